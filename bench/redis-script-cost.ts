/** Redis's own time per decision (INFO commandstats evalsha) for the composite benchmark's shape: consumeAll, one policy, the Union. */
/**
 * `node --import tsx bench/redis-script-cost.ts [--calls N] [--rounds R] [--cpus C]`
 *
 * Starts its own redis-server, then for each round and each mode: FLUSHALL,
 * a warm-up of N/5 decisions (so the keys hold state, as in a running
 * service), CONFIG RESETSTAT, N decisions issued one after another, and
 * INFO commandstats. The figure of record is evalsha's usec_per_call, which
 * Redis measures around each script itself: unlike CPU per request it does
 * not move with what else the machine runs, so before/after comparisons of
 * a script change need no quiet machine. The keys follow the composite
 * scenario's fixed-rate sequence (bench/scenarios/composite.ts: 50 orgs of
 * 1 000 users, one in ten to a hot user whose per-second bucket refuses).
 *
 * Modes: `composite` (RedisStore.consumeAll over the scenario's 3 policies
 * on 2 keys: one EVALSHA), `single` (the per-second token bucket alone) and
 * `rlf-union` (rate-limiter-flexible's RateLimiterUnion of the same limits:
 * three EVALSHAs). Not a harness scenario: it runs no server and no load
 * generator, and needs no build.
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterUnion } from 'rate-limiter-flexible';
import { consumeAll, RateLimiter } from '../src/index.js';
import { RedisStore } from '../src/stores/redis/index.js';
import { startRedis } from '../test/support/redis-server.js';
import composite from './scenarios/composite.js';

const MODES = ['composite', 'single', 'rlf-union'] as const;
type Mode = (typeof MODES)[number];

/** The scenario's limits (bench/servers/composite.ts). */
const PER_SECOND = 100;
const PER_DAY = 1_000_000;
const PER_MINUTE = 100_000;

/** One decision on the i-th request's user and org. */
type Decide = (user: string, org: string) => Promise<unknown>;

/** What one mode's measured run left in INFO commandstats. */
interface Measured {
  /** evalsha's usec_per_call. */
  readonly usecPerCall: number;
  /** evalsha calls per decision. */
  readonly callsPerDecision: number;
  /** Commands run inside the scripts, per decision, by name. */
  readonly nested: Record<string, number>;
}

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '3' },
    cpus: { type: 'string' },
  },
});
const calls = Number(values.calls);
const rounds = Number(values.rounds);
if (!Number.isSafeInteger(calls) || calls < 100 || !Number.isSafeInteger(rounds) || rounds < 1) {
  throw new Error(`--calls must be a whole number ≥ 100 and --rounds ≥ 1; got ${values.calls} and ${values.rounds}`);
}
const path = composite.fixedRatePath!;

const server = await startRedis(values.cpus === undefined ? {} : { cpus: values.cpus });
const admin = new Redis(server.url);
const client = new Redis(server.url);
try {
  const version = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? 'unknown';
  console.log(
    `Redis ${version}, Node ${process.version}; ${calls} decisions per mode and round, one at a time, after ${calls / 5} unmeasured`,
  );
  const store = new RedisStore({ client });
  const decide: Record<Mode, Decide> = {
    composite: compositeDecide(store),
    single: singleDecide(store),
    'rlf-union': unionDecide(client),
  };
  const results: Record<Mode, Measured[]> = { composite: [], single: [], 'rlf-union': [] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of MODES) results[mode].push(await measure(decide[mode]));
  }
  await store.close();
  report(results);
} finally {
  client.disconnect();
  admin.disconnect();
  await server.stop();
}

function compositeDecide(store: RedisStore): Decide {
  const perSecond = new RateLimiter({ store, limit: PER_SECOND, window: '1s', algorithm: 'token-bucket' });
  const perDay = new RateLimiter({ store, limit: PER_DAY, window: '1d' });
  const perOrg = new RateLimiter({ store, limit: PER_MINUTE, window: '1m' });
  return (user, org) =>
    consumeAll([
      { limiter: perSecond, key: user },
      { limiter: perDay, key: user },
      { limiter: perOrg, key: org },
    ]);
}

function singleDecide(store: RedisStore): Decide {
  const perSecond = new RateLimiter({ store, limit: PER_SECOND, window: '1s', algorithm: 'token-bucket', prefix: 'single' });
  return (user) => perSecond.consume(user);
}

/** As bench/servers/composite.ts builds it: the per-org limiter maps the user key to its org's. */
function unionDecide(redis: Redis): Decide {
  class PerOrg extends RateLimiterRedis {
    override consume(key: string | number, points?: number, options?: Record<string, unknown>) {
      const user = String(key);
      return super.consume(user.slice(0, user.indexOf('}') + 1), points, options);
    }
  }
  const union = new RateLimiterUnion(
    new RateLimiterRedis({ storeClient: redis, keyPrefix: 'rlf-second', points: PER_SECOND, duration: 1 }),
    new RateLimiterRedis({ storeClient: redis, keyPrefix: 'rlf-day', points: PER_DAY, duration: 86_400 }),
    new PerOrg({ storeClient: redis, keyPrefix: 'rlf-org', points: PER_MINUTE, duration: 60 }),
  );
  return (user) =>
    union.consume(user).catch((reason: Record<string, unknown>) => {
      const failure = Object.values(reason).find((value) => value instanceof Error);
      if (failure !== undefined) throw failure;
    });
}

/** Runs `n` decisions on the scenario's sequence from `first`, one at a time. */
async function run(decideOne: Decide, first: number, n: number): Promise<void> {
  for (let i = first; i < first + n; i++) {
    const query = new URLSearchParams(path(i).slice(2));
    const org = query.get('org')!;
    await decideOne(`{${org}}:${query.get('user')!}`, `{${org}}`);
  }
}

async function measure(decideOne: Decide): Promise<Measured> {
  await admin.flushall();
  await run(decideOne, 0, calls / 5);
  await admin.config('RESETSTAT');
  await run(decideOne, calls / 5, calls);
  const info = await admin.info('commandstats');
  const evalsha = /^cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/m.exec(info);
  if (evalsha === null) throw new Error(`no evalsha in INFO commandstats:\n${info}`);
  const nested: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!['evalsha', 'eval', 'config|resetstat', 'info', 'script|load'].includes(m[1]!)) nested[m[1]!] = Number(m[2]) / calls;
  }
  return { usecPerCall: Number(evalsha[2]), callsPerDecision: Number(evalsha[1]) / calls, nested };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function report(results: Record<Mode, Measured[]>): void {
  console.log('');
  console.log(
    'mode        evalsha usec_per_call (median; by round)   evalsha/decision  Redis µs/decision  commands in scripts per decision',
  );
  for (const mode of MODES) {
    const rows = results[mode];
    const perCall = rows.map((r) => r.usecPerCall);
    const last = rows[rows.length - 1]!;
    const nested = Object.entries(last.nested)
      .filter(([, n]) => n >= 0.005)
      .map(([name, n]) => `${name} ${n.toFixed(2)}`)
      .join(', ');
    console.log(
      `${mode.padEnd(10)}  ${median(perCall).toFixed(2).padStart(6)}  (${perCall.map((x) => x.toFixed(2)).join(' ')})`.padEnd(51) +
        `${last.callsPerDecision.toFixed(2).padStart(16)}  ${(median(perCall) * last.callsPerDecision).toFixed(2).padStart(17)}  ${nested}`,
    );
  }
  console.log(
    "\nRedis µs/decision = usec_per_call × evalsha calls per decision: the scripts' own time, without reading and writing the sockets.",
  );
}
