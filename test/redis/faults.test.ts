// Real Redis faults under a RateLimiter with insurance: SIGKILL under load, SIGSTOP (timeouts and the breaker), lost scripts; nothing hangs or leaks a rejection.
import assert from 'node:assert/strict';
import { after, afterEach, test } from 'node:test';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { ErrorCode, MemoryStore, RateLimiter, isFloodgateError, type Decision, type DecisionSource } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { LUA_SCRIPTS } from '../../src/stores/redis/lua/scripts.generated.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';

const TIMEOUT_MS = 150;
// Generous: two cores shared with other test files and Redis itself.
const SLACK_MS = 350;

const unhandled: unknown[] = [];
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason);
});
afterEach(() => {
  assert.deepEqual(unhandled, [], 'an unhandled rejection escaped');
});

const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function limiterOn(store: RedisStore, cooldown: number, failureThreshold = 3): RateLimiter {
  const shape = { limit: 1_000_000, window: '1m' } as const;
  const insurance = new RateLimiter({ ...shape, store: new MemoryStore({ sweepIntervalMs: 0 }) });
  return new RateLimiter({ ...shape, store, insurance, breaker: { failureThreshold, cooldown }, prefix: `faults-${Date.now()}` });
}

interface Sample {
  source: DecisionSource | 'rejected';
  ms: number;
  /** When the call was made (wall clock). */
  startedAt: number;
  /** When its answer was handled: later than the store answered when the event loop was busy. */
  at: number;
}

/** Fires a few consumes every few ms until stopped, recording where each decision came from and how long it took. */
function load(limiter: RateLimiter) {
  const samples: Sample[] = [];
  let started = 0;
  let running = true;
  const inflight = new Set<Promise<unknown>>();
  const loop = (async () => {
    while (running) {
      for (let i = 0; i < 4; i++) {
        const t0 = performance.now();
        const startedAt = Date.now();
        started++;
        const p: Promise<unknown> = limiter.consume(`k${started % 7}`).then(
          (d: Decision) => samples.push({ source: d.source, ms: performance.now() - t0, startedAt, at: Date.now() }),
          () => samples.push({ source: 'rejected', ms: performance.now() - t0, startedAt, at: Date.now() }),
        );
        inflight.add(p);
        p.finally(() => inflight.delete(p));
      }
      await sleep(5);
    }
  })();
  return {
    samples,
    since: (at: number) => samples.filter((s) => s.at >= at),
    async stop(): Promise<number> {
      running = false;
      await loop;
      // Every call must settle: give the stragglers timeout + slack, then count.
      await Promise.race([Promise.all(inflight), sleep(TIMEOUT_MS + SLACK_MS)]);
      return started;
    },
  };
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function ioredisOn(server: RedisServer): Promise<Redis> {
  // Reconnect quickly so the test is short; the store itself needs no client tuning.
  const client = new Redis(server.url, { retryStrategy: () => 50 });
  client.on('error', () => {});
  cleanups.push(() => client.disconnect());
  await client.ping();
  return client;
}

test('SIGKILL under load: every consume resolves in time from store or insurance, and the store takes over again after restart', async () => {
  const server = await startRedis();
  cleanups.push(() => server.stop());
  const client = await ioredisOn(server);
  const limiter = limiterOn(new RedisStore({ client, timeoutMs: TIMEOUT_MS }), 200);
  const run = load(limiter);

  await sleep(400);
  // kill() resolves only once the process is gone; calls that settle in between may come from either side.
  const killStartedAt = Date.now();
  await server.kill();
  const killedAt = Date.now();
  await sleep(2500);
  await server.restart();
  const restartedAt = Date.now();
  await until('store decisions after the restart', () => run.since(restartedAt).some((s) => s.source === 'store'), 5000);
  const backAt = Date.now();
  await sleep(300);
  const started = await run.stop();

  const { samples } = run;
  assert.equal(samples.length, started, `${started - samples.length} consumes never settled`);
  assert.deepEqual(samples.filter((s) => s.source === 'rejected').length, 0);
  assert.deepEqual([...new Set(samples.map((s) => s.source))].sort(), ['insurance', 'store']);
  const slowest = Math.max(...samples.map((s) => s.ms));
  assert.ok(slowest < TIMEOUT_MS + SLACK_MS, `slowest consume took ${slowest.toFixed(0)} ms`);
  assert.ok(
    samples.filter((s) => s.at < killStartedAt).every((s) => s.source === 'store'),
    'healthy phase answered by the store',
  );
  // Calls made once the process is gone: an answer the store gave just before the kill may be handled
  // later when the event loop stalls (the whole suite shares two cores), so the start time decides.
  const down = samples.filter((s) => s.startedAt > killedAt + 50 && s.at < restartedAt);
  const sources = JSON.stringify(
    Object.fromEntries([...new Set(down.map((s) => s.source))].map((k) => [k, down.filter((s) => s.source === k).length])),
  );
  assert.ok(
    down.length > 100 && down.every((s) => s.source === 'insurance'),
    `down phase answered by insurance: ${down.length} calls, ${sources}`,
  );
  const settled = run.since(backAt + 100);
  assert.ok(settled.length > 0 && settled.every((s) => s.source === 'store'), 'the store answers again by itself');
});

test('while the client reconnects, the store fails at once instead of queueing commands', async () => {
  const server = await startRedis();
  cleanups.push(() => server.stop());
  const client = await ioredisOn(server);
  const store = new RedisStore({ client, timeoutMs: 5000 });
  const policy = { algorithm: 'fixed-window', limit: 5, windowMs: 1000, blockMs: 0 } as const;
  await store.apply({ kind: 'consume', key: 'r', amount: 1, policy });
  await server.kill();
  await until('ioredis to notice', () => client.status === 'reconnecting', 3000);
  const t0 = performance.now();
  await assert.rejects(store.apply({ kind: 'consume', key: 'r', amount: 1, policy }), (e: unknown) => {
    assert.ok(isFloodgateError(e, ErrorCode.STORE_ERROR));
    assert.match(e.message, /reconnecting/);
    return true;
  });
  assert.ok(performance.now() - t0 < 100);
  await server.restart();
  await until('ioredis to reconnect', () => client.status === 'ready', 5000);
  assert.equal((await store.apply({ kind: 'consume', key: 'r', amount: 1, policy })).allowed, true);
});

test('node-redis: SIGKILL and restart, no call hangs and the store takes over again', async () => {
  const server = await startRedis();
  cleanups.push(() => server.stop());
  const client = createClient({ url: server.url, socket: { reconnectStrategy: () => 50 } });
  client.on('error', () => {});
  await client.connect();
  cleanups.push(() => client.destroy());
  const limiter = limiterOn(new RedisStore({ client, timeoutMs: TIMEOUT_MS }), 200);
  const run = load(limiter);

  await sleep(300);
  await server.kill();
  await sleep(1500);
  await server.restart();
  const restartedAt = Date.now();
  await until('store decisions after the restart', () => run.since(restartedAt).some((s) => s.source === 'store'), 5000);
  await sleep(200);
  const started = await run.stop();

  assert.equal(run.samples.length, started, `${started - run.samples.length} consumes never settled`);
  assert.equal(run.samples.filter((s) => s.source === 'rejected').length, 0);
  assert.ok(run.samples.some((s) => s.source === 'insurance'));
  const slowest = Math.max(...run.samples.map((s) => s.ms));
  assert.ok(slowest < TIMEOUT_MS + SLACK_MS, `slowest consume took ${slowest.toFixed(0)} ms`);
});

test('SIGSTOP: calls fall back after the store timeout, the breaker then answers at once, and resume brings the store back', async () => {
  const server = await startRedis();
  cleanups.push(() => server.stop());
  cleanups.push(() => server.resume());
  const client = await ioredisOn(server);
  const store = new RedisStore({ client, timeoutMs: TIMEOUT_MS });
  const limiter = limiterOn(store, 400, 3);
  assert.equal((await limiter.consume('a')).source, 'store');

  server.pause();
  // The store alone: STORE_TIMEOUT after timeoutMs, not sooner, not much later.
  const t0 = performance.now();
  await assert.rejects(store.apply({ kind: 'consume', key: 'direct', amount: 1, policy: limiter.policy }), (e: unknown) =>
    isFloodgateError(e, ErrorCode.STORE_TIMEOUT),
  );
  const direct = performance.now() - t0;
  assert.ok(direct >= TIMEOUT_MS - 5 && direct < TIMEOUT_MS + SLACK_MS, `timed out after ${direct.toFixed(0)} ms`);

  // Through the limiter: the first failures wait the timeout, then the breaker opens.
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    const d = await limiter.consume('a');
    const ms = performance.now() - t;
    assert.equal(d.source, 'insurance');
    assert.ok(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + SLACK_MS, `fallback ${i} after ${ms.toFixed(0)} ms`);
  }
  const open: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    const d = await limiter.consume('a');
    open.push(performance.now() - t);
    assert.equal(d.source, 'insurance');
  }
  // None waits for the store; the bound leaves room for a scheduling hiccup on a busy machine.
  open.sort((x, y) => x - y);
  assert.ok(open[open.length - 1]! < TIMEOUT_MS - 40, `with the breaker open, a call took ${open[open.length - 1]!.toFixed(0)} ms`);
  assert.ok(open[10]! < 20, `with the breaker open, the median call took ${open[10]!.toFixed(0)} ms`);

  server.resume();
  const resumedAt = Date.now();
  await until('store decisions after resume', async () => (await limiter.consume('a')).source === 'store', 3000);
  assert.ok(Date.now() - resumedAt < 400 + TIMEOUT_MS + SLACK_MS + 500);
  // The replies that came late (to calls already answered by insurance) changed nothing visible.
  assert.equal((await limiter.consume('b')).source, 'store');
});

test('lost scripts (SCRIPT FLUSH, restart) are reloaded without a single failed call', async () => {
  const server = await startRedis();
  cleanups.push(() => server.stop());
  const client = await ioredisOn(server);
  const admin = await ioredisOn(server);
  const limiter = limiterOn(new RedisStore({ client, timeoutMs: TIMEOUT_MS }), 200);

  const first = await limiter.consume('s');
  assert.deepEqual([first.source, first.remaining], ['store', 999_999]);
  await admin.script('FLUSH');
  const burst = await Promise.all(['s', 's', 't', 'u'].map((k) => limiter.consume(k)));
  assert.deepEqual(
    burst.map((d) => [d.source, d.remaining]),
    [
      ['store', 999_998],
      ['store', 999_997],
      ['store', 999_999],
      ['store', 999_999],
    ],
  );

  await server.kill();
  await server.restart();
  await until('ioredis to reconnect', () => client.status === 'ready', 5000);
  // No persistence, so the count starts over; the script is back by EVAL.
  const after = await limiter.consume('s');
  assert.deepEqual([after.source, after.remaining], ['store', 999_999]);
  assert.deepEqual(await admin.script('EXISTS', LUA_SCRIPTS['fixed-window'].sha), [1]);
});
