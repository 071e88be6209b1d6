// Child process of the composite accuracy test, on Redis or on the cluster store: on each phase, sets its store's clock to the phase's time and fires many consumeAll composites at once (per-user window, per-org window, per-user token bucket), then reports every decision.
import { Redis } from 'ioredis';
import { consumeAll, RateLimiter } from '../../src/index.js';
import { ClusterStore } from '../../src/stores/cluster/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import {
  COMPOSITE_LIMITS,
  ORGS,
  USERS_PER_ORG,
  orgKey,
  orgOf,
  userKey,
  type ChildMessage,
  type CompositeResult,
  type PhaseMessage,
} from '../accuracy/composite-model.js';

/** `redis <url>`: its own ioredis client to that server; `cluster`: a ClusterStore over this process's IPC channel to the parent's primary. */
const [mode, url] = process.argv.slice(2);
if (mode !== 'cluster' && (mode !== 'redis' || url === undefined)) throw new Error('usage: composite-hammer.ts redis <url> | cluster');

let now = 0;
// The parent's clock for every part: one instant per phase, so each part's state after a phase follows from the admitted units alone.
const clock = (): number => now;
const client = mode === 'redis' ? new Redis(url!) : undefined;
const store = client ? new RedisStore({ client, clock }) : new ClusterStore({ clock });
const { userWindow, orgWindow, userBucket } = COMPOSITE_LIMITS;
const perUser = new RateLimiter({ store, limit: userWindow.limit, window: userWindow.windowMs, prefix: userWindow.prefix });
const perOrg = new RateLimiter({ store, limit: orgWindow.limit, window: orgWindow.windowMs, prefix: orgWindow.prefix });
const bucket = new RateLimiter({
  store,
  limit: userBucket.limit,
  window: userBucket.windowMs,
  algorithm: 'token-bucket',
  prefix: userBucket.prefix,
});

async function one(): Promise<CompositeResult> {
  // Within an org the first user is hot (about half the org's composites), so a user's own limits refuse while its org still admits.
  const user = Math.floor(Math.random() * ORGS) * USERS_PER_ORG + Math.floor(USERS_PER_ORG * Math.random() ** 3);
  const cost = 1 + Math.floor(Math.random() * 3);
  const key = userKey(user);
  const d = await consumeAll([
    { limiter: perUser, key, cost },
    { limiter: perOrg, key: orgKey(orgOf(user)), cost },
    { limiter: bucket, key, cost },
  ]);
  return { user, cost, allowed: d.allowed, decisive: d.decisive, remaining: d.parts.map((p) => p?.remaining ?? -1) };
}

const send = (message: ChildMessage): void => void process.send?.(message);

process.on('message', (message: PhaseMessage | { type: 'stop' } | undefined) => {
  // The cluster store's own replies come over the same channel; they are not for this handler.
  if (message?.type !== 'phase' && message?.type !== 'stop') return;
  if (message.type === 'stop') {
    Promise.resolve(client?.quit()).finally(() => process.exit(0));
    return;
  }
  now = message.now;
  Promise.all(Array.from({ length: message.count }, one)).then(
    (results) => send({ type: 'done', results }),
    (error: unknown) => send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});

if (client) client.once('ready', () => send({ type: 'ready' }));
else send({ type: 'ready' });
