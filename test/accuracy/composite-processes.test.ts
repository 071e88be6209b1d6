// Accuracy of consumeAll across processes: 8 forked children hammer overlapping composites (per-user window and bucket under a shared per-org window), each with its own ioredis client to one real redis-server, then on the cluster store through one primary; no part ever goes over its limit and every admitted unit is in the store, checked after every phase.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RateLimiter, type Policy } from '../../src/index.js';
import { ClusterStore, ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { redisKeys } from '../../src/stores/redis/index.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';
import {
  COMPOSITE_LIMITS,
  CompositeModel,
  ORGS,
  PART_NAMES,
  USERS,
  orgKey,
  userKey,
  type BucketState,
  type ChildMessage,
  type CompositeResult,
  type StoredState,
  type WindowState,
  windowFromPeek,
} from './composite-model.js';

const CHILD = fileURLToPath(new URL('../support/composite-hammer.ts', import.meta.url));
const PROCESSES = 8;
/** Composites each process has in flight at once per phase: 8 × 8 = 64 a phase, more than the limits admit, so every part refuses. */
const PER_PHASE = 8;
const PHASES = 60;
/** Clock time between phases: 60 × 250 ms = 15 s of clock time, three 5-s org windows, seven 2-s user windows, and refills of the 1-s bucket. */
const STEP_MS = 250;
/** The clock's start: any instant works, the store's TTLs do not follow a client clock. */
const START = 1_800_000_000_000;

let server: RedisServer;
let reader: Redis;
const children: ChildProcess[] = [];
const redis = redisFixture((open, started) => {
  server = started;
  reader = open();
});
redis.cleanup(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/** The next message of `child` for this test (the cluster store's own messages share the channel), or its death as an error. */
function next(child: ChildProcess): Promise<ChildMessage> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`a child exited (code ${code}) mid-run`));
    const onMessage = (message: ChildMessage | undefined): void => {
      if (message?.type !== 'ready' && message?.type !== 'done' && message?.type !== 'error') return;
      child.off('exit', onExit);
      child.off('message', onMessage);
      if (message.type === 'error') reject(new Error(`a child failed: ${message.message}`));
      else resolve(message);
    };
    child.once('exit', onExit);
    child.on('message', onMessage);
  });
}

/** Every part's state as Redis holds it (the Lua's hash fields: c/r for a window, m/r for a bucket). */
async function readRedis(): Promise<StoredState> {
  const { userWindow, orgWindow, userBucket } = COMPOSITE_LIMITS;
  const users = Array.from({ length: USERS }, (_, u) => userKey(u));
  const orgs = Array.from({ length: ORGS }, (_, o) => orgKey(o));
  const pipeline = reader.pipeline();
  for (const key of users) pipeline.hmget(redisKeys(`${userWindow.prefix}:${key}`).state, 'c', 'r');
  for (const key of orgs) pipeline.hmget(redisKeys(`${orgWindow.prefix}:${key}`).state, 'c', 'r');
  for (const key of users) pipeline.hmget(redisKeys(`${userBucket.prefix}:${key}`).state, 'm', 'r');
  const replies = (await pipeline.exec())!.map(([error, value]) => {
    if (error) throw error;
    const [a, b] = value as (string | null)[];
    return a === null || b === null ? undefined : [Number(a), Number(b)];
  });
  const window = (v: number[] | undefined): WindowState | undefined => (v ? { c: v[0]!, r: v[1]! } : undefined);
  const bucket = (v: number[] | undefined): BucketState | undefined => (v ? { m: v[0]!, r: v[1]! } : undefined);
  return {
    userWindows: replies.slice(0, USERS).map(window),
    orgWindows: replies.slice(USERS, USERS + ORGS).map(window),
    buckets: replies.slice(USERS + ORGS).map(bucket),
  };
}

/** Forks the 8 children with `args` (each then makes its own store), runs every phase, and checks each against `read`. */
async function hammer(args: string[], onFork: (child: ChildProcess) => void, read: (now: number) => Promise<StoredState>): Promise<void> {
  const forked: ChildProcess[] = [];
  for (let i = 0; i < PROCESSES; i++) {
    const child = fork(CHILD, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    forked.push(child);
    onFork(child);
  }
  await Promise.all(forked.map(next));

  const model = new CompositeModel();
  const refusedBy = [0, 0, 0];
  let admitted = 0;
  let total = 0;
  for (let phase = 0; phase < PHASES; phase++) {
    const now = START + phase * STEP_MS;
    const replies = forked.map(next);
    for (const child of forked) child.send({ type: 'phase', now, count: PER_PHASE });
    const results: CompositeResult[] = [];
    for (const reply of await Promise.all(replies)) if (reply.type === 'done') results.push(...reply.results);
    assert.equal(results.length, PROCESSES * PER_PHASE);
    // Every child has its answers, so the store is quiet until the next phase: its state is final for this instant.
    const problems = model.phase(now, results, await read(now));
    assert.deepEqual(problems, [], `phase ${phase} (clock ${now})`);
    for (const r of results) {
      total++;
      if (r.allowed) admitted++;
      else refusedBy[r.decisive]!++;
    }
  }
  const exits = forked.map((child) => new Promise((resolve) => child.once('exit', resolve)));
  for (const child of forked) child.send({ type: 'stop' });
  await Promise.all(exits);

  // The run must have pressed every part: each was the reason for some refusals.
  const summary = `${admitted}/${total} admitted; refused by ${PART_NAMES.map((n, i) => `${n} ${refusedBy[i]}`).join(', ')}; ${model.windowsChecked.size} windows, ${model.comparisons} state comparisons`;
  for (let part = 0; part < PART_NAMES.length; part++)
    assert.ok(refusedBy[part]! > 0, `no composite was refused by the ${PART_NAMES[part]}: ${summary}`);
  assert.ok(admitted >= 100, summary);
  console.log(`composite accuracy (${args[0]}): ${summary}`);
}

test(
  '8 processes, overlapping composites on one Redis: no part over its limit in any window, every admitted unit in Redis',
  { timeout: 60_000 },
  async () => {
    await hammer(['redis', server.url], () => {}, readRedis);
  },
);

test(
  '8 processes, overlapping composites on the cluster store: no part over its limit in any window, every admitted unit in the primary',
  { timeout: 60_000 },
  async () => {
    const primary = new ClusterStorePrimary();
    let now = 0;
    // Peeks at the phase's instant; knownRefusals 0, so every peek asks the primary rather than a remembered refusal.
    const store = new ClusterStore({ transport: 'local', clock: () => now, knownRefusals: 0 });
    const { userWindow, orgWindow, userBucket } = COMPOSITE_LIMITS;
    const policy = (p: { limit: number; windowMs: number; prefix: string }, algorithm?: 'token-bucket') =>
      new RateLimiter({ store, limit: p.limit, window: p.windowMs, prefix: p.prefix, ...(algorithm ? { algorithm } : {}) }).policy;
    const policies = { user: policy(userWindow), org: policy(orgWindow), bucket: policy(userBucket, 'token-bucket') };
    const peek = (prefix: string, key: string, p: Policy) => store.apply({ kind: 'peek', key: `${prefix}:${key}`, amount: 0, policy: p });
    try {
      await hammer(
        ['cluster'],
        (child) => primary.attach(child),
        async (at) => {
          now = at;
          const users = Array.from({ length: USERS }, (_, u) => userKey(u));
          const orgs = Array.from({ length: ORGS }, (_, o) => orgKey(o));
          const [u, o, b] = await Promise.all([
            Promise.all(users.map((key) => peek(userWindow.prefix, key, policies.user))),
            Promise.all(orgs.map((key) => peek(orgWindow.prefix, key, policies.org))),
            Promise.all(users.map((key) => peek(userBucket.prefix, key, policies.bucket))),
          ]);
          return {
            userWindows: u.map((x) => windowFromPeek(x.remaining, x.resetMs, userWindow.limit, at)),
            orgWindows: o.map((x) => windowFromPeek(x.remaining, x.resetMs, orgWindow.limit, at)),
            bucketViews: b.map((x) => ({ remaining: x.remaining, resetMs: x.resetMs })),
          };
        },
      );
    } finally {
      await store.close();
      await primary.close();
    }
  },
);
