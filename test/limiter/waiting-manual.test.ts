// A limiter's waiting and pacing on a ManualClock (memory store and timers on the same clock): slots and waits to the millisecond.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Decision, RateLimiterOptions } from '../../src/index.js';
import { LimiterWaiting } from '../../src/limiter/waiting.js';
import { ManualTimers } from '../support/manual-timers.js';
import { waitingOnTimers } from '../support/waiting-limiter.js';

/** A limiter without waiting on a memory store, wrapped in LimiterWaiting whose timers and clock are the test's. */
function waitingLimiter(timers: ManualTimers, options: Omit<RateLimiterOptions, 'store' | 'clock'>): LimiterWaiting {
  return waitingOnTimers(timers, options, 'm').w;
}

async function run(timers: ManualTimers, calls: Promise<Decision>[], ms: number): Promise<{ d: Decision; at: number }[]> {
  const answered: { d: Decision; at: number }[] = new Array(calls.length);
  calls.forEach((call, i) => void call.then((d) => (answered[i] = { d, at: timers.clock.now() - 1_000_000 })));
  await timers.advance(ms);
  return answered;
}

test('execEvenly: five calls at once resolve at 0, 100, 200, 300 and 400 ms exactly (limit 5 per 500 ms)', async () => {
  const timers = new ManualTimers(1_000_000);
  const limiter = waitingLimiter(timers, { limit: 5, window: 500, execEvenly: true });
  const answered = await run(
    timers,
    [0, 1, 2, 3, 4].map(() => limiter.consume('k', 1)),
    1000,
  );
  assert.deepEqual(
    answered.map((a) => a.at),
    [0, 100, 200, 300, 400],
  );
  assert.deepEqual(
    answered.map((a) => a.d.waitedMs),
    [0, 100, 200, 300, 400],
  );
});

test('execEvenly with a window/limit that is not a whole number of ms: each slot within 1 ms of k × window/limit', async () => {
  const timers = new ManualTimers(1_000_000);
  const limiter = waitingLimiter(timers, { limit: 3, window: 1000, execEvenly: true, algorithm: 'token-bucket' });
  const answered = await run(
    timers,
    [0, 1, 2].map(() => limiter.consume('k', 1)),
    2000,
  );
  const at = answered.map((a) => a.at);
  [0, 1000 / 3, 2000 / 3].forEach((want, i) => assert.ok(Math.abs(at[i]! - want) <= 1, `slot ${i} at ${at[i]} ms, meant ${want}`));
});

test('execEvenly: a slot is kept after a quiet spell, then the schedule starts over at the next call', async () => {
  const timers = new ManualTimers(1_000_000);
  const limiter = waitingLimiter(timers, { limit: 10, window: 1000, execEvenly: true, algorithm: 'token-bucket' });
  await run(timers, [limiter.consume('k', 1), limiter.consume('k', 1)], 500);
  // 500 ms later the schedule (which ended at 200 ms) is empty: the next call is not delayed.
  const later = await run(timers, [limiter.consume('k', 1), limiter.consume('k', 1)], 500);
  assert.deepEqual(
    later.map((a) => a.d.waitedMs),
    [0, 100],
  );
});

test('wait: two per fixed window of 100 ms; five calls are admitted at 0, 0, 100, 100, 200 in order', async () => {
  const timers = new ManualTimers(1_000_000);
  const limiter = waitingLimiter(timers, { limit: 2, window: 100, wait: { timeout: 1000 } });
  const answered = await run(
    timers,
    [0, 1, 2, 3, 4].map(() => limiter.consume('k', 1)),
    1000,
  );
  assert.ok(answered.every((a) => a.d.allowed));
  assert.deepEqual(
    answered.map((a) => a.at),
    [0, 0, 100, 100, 200],
  );
  assert.deepEqual(
    answered.map((a) => a.d.waitedMs),
    [0, 0, 100, 100, 200],
  );
});

test('wait and execEvenly together: the timeout bounds the wait for admission; the pacing slot comes after it', async () => {
  const timers = new ManualTimers(1_000_000);
  const limiter = waitingLimiter(timers, { limit: 2, window: 100, wait: { timeout: 150 }, execEvenly: true });
  const answered = await run(
    timers,
    [0, 1, 2, 3, 4].map(() => limiter.consume('k', 1)),
    1000,
  );
  // Admitted at 0, 0, 100, 100; the fifth would be admitted at 200 > 150: refused at once at 100.
  assert.deepEqual(
    answered.map((a) => a.d.allowed),
    [true, true, true, true, false],
  );
  // Slots 50 ms apart from the first admission on.
  assert.deepEqual(
    answered.map((a) => a.at),
    [0, 50, 100, 150, 100],
  );
});
