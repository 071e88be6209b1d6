// wait and execEvenly against a real redis-server: pacing gaps across two clients, waits bounded by the timeout, a full line refusing at once, FIFO in a process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { ConcurrencyLimiter, RateLimiter, type Decision, type RateLimiterOptions } from '../../src/index.js';
import { LocalFirstStore, RedisStore } from '../../src/stores/redis/index.js';
import { redisFixture } from '../support/redis-clients.js';

const clients: Redis[] = [];
redisFixture((open) => {
  clients.push(open(), open());
});

/** A limiter on its own RedisStore over client `i`. */
function limiter(i: number, options: Omit<RateLimiterOptions, 'store'>): RateLimiter {
  return new RateLimiter({ ...options, store: new RedisStore({ client: clients[i]! }) });
}

interface Timed {
  d: Decision;
  /** Wall ms from the call to its answer. */
  took: number;
  /** Wall ms from the test's start to the answer. */
  at: number;
  /** When the limiter meant to answer, from the test's start: the call's start plus its `waitedMs` (no timer lateness in it). */
  meant: number;
}

function timed(start: number, call: () => Promise<Decision>): Promise<Timed> {
  const called = Date.now();
  return call().then((d) => ({ d, took: Date.now() - called, at: Date.now() - start, meant: called - start + (d.waitedMs ?? 0) }));
}

/** Gaps between successive values, sorted. */
function gapsOf(times: number[]): number[] {
  const sorted = [...times].sort((x, y) => x - y);
  return sorted.slice(1).map((t, i) => t - sorted[i]!);
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

test("execEvenly on Redis: a key's admitted calls from two clients resolve window/limit apart (within 10 %)", async () => {
  const options = { limit: 10, window: '1s', execEvenly: true, prefix: 'even' } as const;
  const a = limiter(0, options);
  const b = limiter(1, options);
  const start = Date.now();
  const calls: Promise<Timed>[] = [];
  for (let i = 0; i < 5; i++)
    calls.push(
      timed(start, () => a.consume('k')),
      timed(start, () => b.consume('k')),
    );
  const done = await Promise.all(calls);
  assert.ok(done.every((r) => r.d.allowed));
  const meant = gapsOf(done.map((r) => r.meant));
  const wall = gapsOf(done.map((r) => r.at));
  const off = (gaps: number[]) => Math.max(...gaps.map((g) => Math.abs(g - 100)));
  console.log(
    `execEvenly (Redis, 2 clients, target 100 ms): slot gaps ${meant.join(', ')} (worst ${off(meant)} ms off); ` +
      `wall-clock gaps ${wall.join(', ')} (worst ${off(wall)} ms off, median ${median(wall)})`,
  );
  // The schedule the store hands out is exact; the wall clock adds the timer lateness of a loaded machine to single gaps.
  for (const gap of meant) assert.ok(Math.abs(gap - 100) <= 10, `slot gap ${gap} ms`);
  assert.ok(Math.abs(median(wall) - 100) <= 10, `median wall-clock gap ${median(wall)} ms`);
  // The eleventh is refused at once: the window's 10 are spent, and a refusal is not paced.
  const refused = await timed(start, () => a.consume('k'));
  assert.equal(refused.d.allowed, false);
  assert.ok(refused.took < 50);
});

test('execEvenly on two local-first stores sharing one Redis: one schedule for both (penalties go to Redis)', async () => {
  const stores = clients.map((client, i) => new LocalFirstStore({ client, channel: `wait-lf-${process.pid}-${i}` }));
  try {
    const [a, b] = stores.map((store) => new RateLimiter({ store, limit: 10, window: '1s', execEvenly: true, prefix: 'lf' }));
    const start = Date.now();
    const calls: Promise<Timed>[] = [];
    for (let i = 0; i < 4; i++)
      calls.push(
        timed(start, () => a!.consume('k')),
        timed(start, () => b!.consume('k')),
      );
    const done = await Promise.all(calls);
    assert.ok(done.every((r) => r.d.allowed));
    const meant = gapsOf(done.map((r) => r.meant));
    console.log(`execEvenly (local-first, 2 stores, target 100 ms): slot gaps ${meant.join(', ')}`);
    for (const gap of meant) assert.ok(Math.abs(gap - 100) <= 10, `slot gap ${gap} ms`);
  } finally {
    await Promise.all(stores.map((store) => store.close()));
  }
});

test('execEvenly on Redis keeps spacing a steady stream: each call comes a slot after the previous, not in bursts per window', async () => {
  const paced = limiter(0, { limit: 10, window: '1s', execEvenly: true, prefix: 'stream' });
  const start = Date.now();
  // 15 calls over about 1.5 s, issued in bursts of 5 at 0, 500 and 1000 ms.
  const calls: Promise<Timed>[] = [];
  for (const when of [0, 500, 1000]) {
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + when - Date.now())));
    for (let i = 0; i < 5; i++) calls.push(timed(start, () => paced.consume('k')));
  }
  const admitted = (await Promise.all(calls)).filter((r) => r.d.allowed);
  const meant = gapsOf(admitted.map((r) => r.meant));
  const wall = gapsOf(admitted.map((r) => r.at));
  console.log(
    `execEvenly stream (Redis): ${admitted.length} admitted; slot gaps min ${Math.min(...meant)} max ${Math.max(...meant)} ms, ` +
      `wall-clock min ${Math.min(...wall)} max ${Math.max(...wall)} ms (target 100)`,
  );
  // Inside each burst the slots are 100 ms apart; between bursts a slot may wait longer (no caller).
  assert.ok(Math.min(...meant) >= 90, `smallest slot gap ${Math.min(...meant)} ms`);
});

test('wait on Redis: no call waits past its timeout (max measured), and the bucket admits what refills in time', async () => {
  const timeoutMs = 700;
  const waiting = limiter(0, { limit: 5, window: '1s', algorithm: 'token-bucket', wait: { timeout: timeoutMs }, prefix: 'wait' });
  const start = Date.now();
  const done = await Promise.all(Array.from({ length: 20 }, () => timed(start, () => waiting.consume('k'))));
  const admitted = done.filter((r) => r.d.allowed);
  const maxTook = Math.max(...done.map((r) => r.took));
  const maxWaited = Math.max(...done.map((r) => r.d.waitedMs!));
  console.log(
    `wait (Redis, timeout ${timeoutMs} ms): ${admitted.length} of 20 admitted; longest call ${maxTook} ms wall, longest waitedMs ${maxWaited}`,
  );
  // 5 at once, then one per 200 ms: at 200, 400 and 600 ms; the next (800 ms) is past the timeout.
  assert.equal(admitted.length, 8);
  // The last attempt starts before the deadline; its answer may add one store round trip.
  assert.ok(maxTook <= timeoutMs + 25, `a call took ${maxTook} ms`);
  assert.ok(maxWaited <= timeoutMs, `waitedMs ${maxWaited}`);
  for (const r of done.filter((x) => !x.d.allowed)) assert.ok(r.d.retryAfterMs > 0);
});

test('wait on Redis: a full line refuses at once, and the calls in it are admitted in arrival order', async () => {
  const waiting = limiter(0, { limit: 2, window: '300ms', wait: { timeout: '2s', maxQueue: 3 }, prefix: 'full' });
  const start = Date.now();
  const order: number[] = [];
  const done = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      timed(start, () =>
        waiting.consume('k').then((d) => {
          if (d.allowed) order.push(i);
          return d;
        }),
      ),
    ),
  );
  const full = done.filter((r) => !r.d.allowed);
  console.log(
    `full line (Redis): ${full.length} refused, slowest refusal ${Math.max(...full.map((r) => r.took))} ms; admitted order ${order.join(', ')}`,
  );
  assert.equal(full.length, 5, 'two admitted at once, three waiting, five refused');
  for (const r of full) {
    assert.ok(r.took < 50, `a full line refuses at once (took ${r.took} ms)`);
    assert.equal(r.d.waitedMs, 0);
  }
  assert.deepEqual(
    order,
    [...order].sort((x, y) => x - y),
    'FIFO within the process',
  );
  // The three that waited came in at the next two windows.
  const waited = done.filter((r) => r.d.allowed && r.d.waitedMs! > 0);
  assert.equal(waited.length, 3);
});

test('ConcurrencyLimiter wait on Redis: a slot released by another client is taken by the waiter within a poll (25 ms) and a round trip', async () => {
  const [holder, waiter] = clients.map(
    (client) => new ConcurrencyLimiter({ store: new RedisStore({ client }), limit: 1, prefix: 'cwait', wait: { timeout: '2s' } }),
  );
  const held = await holder!.acquire('k');
  assert.equal(held.allowed, true);
  const waiting = waiter!.acquire('k');
  await new Promise((resolve) => setTimeout(resolve, 150));
  const released = Date.now();
  await held.release();
  const slot = await waiting;
  const after = Date.now() - released;
  console.log(`concurrency wait (Redis, 2 clients): admitted ${after} ms after the other client's release, waitedMs ${slot.waitedMs}`);
  assert.equal(slot.allowed, true);
  assert.ok(after <= 60, `admitted ${after} ms after the release`);
  await slot.release();
});
