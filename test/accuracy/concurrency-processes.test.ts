// Accuracy of concurrency limits across processes: 8 forked children on one real redis-server acquire, hold a few ms and release under a limit; a sampler reading the slot set and a witness counter the children keep both stay at or below the limit. Then a child holding slots is SIGKILLed, and the time until its slots come back is measured against ttl + one renewal interval.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { ConcurrencyLimiter } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { redisKeys } from '../../src/stores/redis/key-names.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import type { HolderCommand, HolderReport } from '../support/concurrency-holder.js';

const CHILD = fileURLToPath(new URL('../support/concurrency-holder.ts', import.meta.url));
const PROCESSES = 8;
const LIMIT = 4;
const RUN_MS = 4000;
const TTL_MS = 2000;
/** The heartbeat renews every ttl/3. */
const RENEW_MS = Math.floor(TTL_MS / 3);

let server: RedisServer;
let reader: Redis;
const children: ChildProcess[] = [];

before(async () => {
  server = await startRedis();
  reader = new Redis(server.url);
  for (let i = 0; i < PROCESSES; i++) {
    const child = fork(CHILD, [server.url], { execArgv: ['--import', 'tsx'] });
    children.push(child);
  }
  await Promise.all(children.map((child) => next(child, 'ready')));
});

after(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  reader?.disconnect();
  await server?.stop();
});

/** The next report of `type` from `child`, or its death or failure as an error. */
function next<T extends HolderReport['type']>(child: ChildProcess, type: T): Promise<Extract<HolderReport, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`a child exited (code ${code}) mid-run`));
    const onMessage = (report: HolderReport | undefined): void => {
      if (report?.type !== type && report?.type !== 'error') return;
      child.off('exit', onExit);
      child.off('message', onMessage);
      if (report.type === 'error') reject(new Error(`a child failed: ${report.message}`));
      else resolve(report as Extract<HolderReport, { type: T }>);
    };
    child.once('exit', onExit);
    child.on('message', onMessage);
  });
}

const send = (child: ChildProcess, command: HolderCommand): void => void child.send(command);

/** Unexpired members of a slot set, read on Redis's own clock in one atomic step. */
const LIVE = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', now), '+inf')`;
const live = async (storeKey: string): Promise<number> => Number(await reader.eval(LIVE, 1, redisKeys(storeKey).slots));

test(`${PROCESSES} processes under a limit of ${LIMIT}: never more than ${LIMIT} in flight, sampled from the slot set and counted by the holders`, async () => {
  const key = 'busy';
  let stop = false;
  let samples = 0;
  let maxSampled = 0;
  let atLimit = 0;
  const sampler = (async () => {
    while (!stop) {
      const n = await live(`acc:${key}`);
      samples++;
      maxSampled = Math.max(maxSampled, n);
      if (n === LIMIT) atLimit++;
    }
  })();
  const command: HolderCommand = { type: 'run', key, limit: LIMIT, ttl: `${TTL_MS}ms`, loops: 2, ms: RUN_MS, witness: 'witness' };
  const reports = await Promise.all(
    children.map((child) => {
      const report = next(child, 'ran');
      send(child, command);
      return report;
    }),
  );
  stop = true;
  await sampler;
  const admitted = reports.reduce((sum, r) => sum + r.admitted, 0);
  const refused = reports.reduce((sum, r) => sum + r.refused, 0);
  const maxWitness = Math.max(...reports.map((r) => r.maxWitness));
  console.log(
    `concurrency accuracy: ${admitted} admitted, ${refused} refused; max in flight sampled ${maxSampled} (${samples} samples, ${atLimit} at the limit), counted by holders ${maxWitness}; limit ${LIMIT}`,
  );
  assert.ok(maxSampled <= LIMIT, `sampled ${maxSampled} unexpired slots, limit ${LIMIT}`);
  assert.ok(maxWitness <= LIMIT, `holders counted ${maxWitness} at once, limit ${LIMIT}`);
  // The run was contended: the limit was reached and refusals happened, so the bound was tested.
  assert.ok(atLimit > 0 && refused > 0, `at the limit ${atLimit} times, ${refused} refusals`);
  assert.equal(await live(`acc:${key}`), 0, 'every slot released at the end');
  assert.equal(await reader.get('witness'), '0');
});

test(`a SIGKILLed holder's slots come back within ttl + one renewal interval (${TTL_MS} + ${RENEW_MS} ms)`, async () => {
  const key = 'victim';
  const victim = children[0]!;
  const holding = next(victim, 'holding');
  send(victim, { type: 'hold', key, limit: 3, ttl: `${TTL_MS}ms`, count: 2 });
  assert.equal((await holding).held, 2);
  const survivor = new ConcurrencyLimiter({ store: new RedisStore({ client: reader }), limit: 3, ttl: `${TTL_MS}ms`, prefix: 'acc' });
  const own = await survivor.acquire(key);
  assert.equal(own.allowed, true);
  // Long enough for several renewals: the victim's slots outlive their first ttl only because it renews them.
  await new Promise((resolve) => setTimeout(resolve, TTL_MS + 500));
  assert.equal(await live(`acc:${key}`), 3, 'the victim renewed its slots past their first ttl');
  assert.equal((await survivor.acquire(key)).allowed, false);

  const exited = new Promise((resolve) => victim.once('exit', resolve));
  const killedAt = performance.now();
  victim.kill('SIGKILL');
  await exited;
  while ((await live(`acc:${key}`)) > 1) {
    assert.ok(performance.now() - killedAt < 3 * TTL_MS, 'the slots did not come back');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const back = performance.now() - killedAt;
  console.log(
    `SIGKILL recovery: the killed holder's 2 slots came back ${Math.round(back)} ms after the kill (bound: ttl ${TTL_MS} + renewal ${RENEW_MS} = ${TTL_MS + RENEW_MS} ms)`,
  );
  assert.ok(back <= TTL_MS + RENEW_MS, `${Math.round(back)} ms`);
  const again = await Promise.all([survivor.acquire(key), survivor.acquire(key)]);
  assert.deepEqual(
    again.map((s) => s.allowed),
    [true, true],
  );
  // The survivor's slot was renewed by its heartbeat all along and is still its own.
  assert.equal(await own.release(), true);
  await Promise.all(again.map((s) => s.release()));
});

test('stop the children', async () => {
  await Promise.all(
    children.slice(1).map((child) => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      send(child, { type: 'stop' });
      return exited;
    }),
  );
});
