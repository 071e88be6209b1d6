// Accuracy of consumeAll across processes: 8 forked children, each with its own ioredis client to one real redis-server, hammer overlapping composites (per-user window and bucket under a shared per-org window); no part ever goes over its limit and every admitted unit is in Redis, checked exactly after every phase.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { redisKeys } from '../../src/stores/redis/index.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
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

before(async () => {
  server = await startRedis();
  reader = new Redis(server.url);
});

after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  reader?.disconnect();
  await server?.stop();
});

/** The next message of `child`, or its death as an error. */
function next(child: ChildProcess): Promise<ChildMessage> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`a child exited (code ${code}) mid-run`));
    child.once('exit', onExit);
    child.once('message', (message: ChildMessage) => {
      child.off('exit', onExit);
      if (message.type === 'error') reject(new Error(`a child failed: ${message.message}`));
      else resolve(message);
    });
  });
}

/** Every part's state as Redis holds it (the Lua's hash fields: c/r for a window, m/r for a bucket). */
async function readStored(): Promise<StoredState> {
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

test(
  '8 processes, overlapping composites on one Redis: no part over its limit in any window, every admitted unit in Redis',
  { timeout: 60_000 },
  async () => {
    for (let i = 0; i < PROCESSES; i++) {
      children.push(fork(CHILD, [server.url], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
    }
    await Promise.all(children.map(next));

    const model = new CompositeModel();
    const refusedBy = [0, 0, 0];
    let admitted = 0;
    let total = 0;
    for (let phase = 0; phase < PHASES; phase++) {
      const now = START + phase * STEP_MS;
      const replies = children.map(next);
      for (const child of children) child.send({ type: 'phase', now, count: PER_PHASE });
      const results: CompositeResult[] = [];
      for (const reply of await Promise.all(replies)) if (reply.type === 'done') results.push(...reply.results);
      assert.equal(results.length, PROCESSES * PER_PHASE);
      // Every child has its answers, so Redis is quiet until the next phase: its state is final for this instant.
      const problems = model.phase(now, results, await readStored());
      assert.deepEqual(problems, [], `phase ${phase} (clock ${now})`);
      for (const r of results) {
        total++;
        if (r.allowed) admitted++;
        else refusedBy[r.decisive]!++;
      }
    }
    for (const child of children) child.send({ type: 'stop' });

    // The run must have pressed every part: each was the reason for some refusals.
    const summary = `${admitted}/${total} admitted; refused by ${PART_NAMES.map((n, i) => `${n} ${refusedBy[i]}`).join(', ')}; ${model.windowsChecked.size} windows, ${model.comparisons} state comparisons`;
    for (let part = 0; part < PART_NAMES.length; part++)
      assert.ok(refusedBy[part]! > 0, `no composite was refused by the ${PART_NAMES[part]}: ${summary}`);
    assert.ok(admitted >= 100, summary);
    console.log(`composite accuracy: ${summary}`);
  },
);
