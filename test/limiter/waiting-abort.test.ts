// Abandoning a wait: a waiting consume or acquire whose signal aborts leaves its key's line at once, spends nothing, and lets the next caller move up.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConcurrencyLimiter, ErrorCode, MemoryStore, RateLimiter, isFloodgateError, type Decision } from '../../src/index.js';
import { LimiterWaiting } from '../../src/limiter/waiting.js';
import { WaitQueue, type AttemptResult } from '../../src/waiting/wait-queue.js';
import { ManualTimers, settle } from '../support/manual-timers.js';
import { waitingOnTimers } from '../support/waiting-limiter.js';

/** A limiter with `wait` on a memory store, on the test's clock and timers. */
function waitingLimiter(
  timers: ManualTimers,
  limit: number,
  windowMs: number,
  timeoutMs: number,
): { w: LimiterWaiting; plain: RateLimiter } {
  return waitingOnTimers(timers, { limit, window: windowMs, wait: { timeout: timeoutMs } }, 'a');
}

const isAborted = (e: unknown): boolean => isFloodgateError(e, ErrorCode.ABORTED);

test('consume with a signal that aborts while waiting: rejects ABORTED at once, leaves the line, and the unit goes to the next caller', async () => {
  const timers = new ManualTimers(1_000_000);
  const { w, plain } = waitingLimiter(timers, 1, 1000, 5000);
  assert.equal((await w.consume('k', 1)).allowed, true);
  const controller = new AbortController();
  const first = w.consume('k', 1, controller.signal);
  const second = w.consume('k', 1);
  const firstSettled = first.then(
    () => 'resolved',
    (e: unknown) => (isAborted(e) ? 'aborted' : 'other'),
  );
  await timers.advance(100);
  assert.equal(w.waiting('k'), 2);
  controller.abort();
  await settle();
  assert.equal(await firstSettled, 'aborted');
  assert.equal(w.waiting('k'), 1);
  await timers.advance(1000);
  const d: Decision = await second;
  assert.equal(d.allowed, true);
  assert.equal(d.waitedMs, 1000);
  // The aborted call spent nothing: the window after holds one unit for the next caller.
  assert.equal((await plain.peek('k')).remaining, 0);
  await timers.advance(1000);
  assert.equal((await plain.peek('k')).remaining, 1);
});

test('a signal already aborted: consume rejects ABORTED without asking the store', async () => {
  const timers = new ManualTimers(1_000_000);
  const { w, plain } = waitingLimiter(timers, 1, 1000, 5000);
  await assert.rejects(w.consume('k', 1, AbortSignal.abort()), isAborted);
  assert.equal((await plain.peek('k')).remaining, 1);
});

test('the aborted head leaves no retry timer behind when it was the only waiter', async () => {
  const timers = new ManualTimers(1_000_000);
  const { w } = waitingLimiter(timers, 1, 1000, 5000);
  await w.consume('k', 1);
  const controller = new AbortController();
  const waiting = w.consume('k', 1, controller.signal).catch((e: unknown) => e);
  await settle();
  assert.equal(timers.pending, 1);
  controller.abort();
  assert.ok(isAborted(await waiting));
  assert.equal(timers.pending, 0);
});

test('WaitQueue: a head aborted while its attempt is in flight is answered aborted at once, and the admission that follows goes to late', async () => {
  const timers = new ManualTimers(0);
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  let answer: ((r: AttemptResult<string>) => void) | undefined;
  const attempt = (): Promise<AttemptResult<string>> => new Promise((resolve) => (answer = resolve));
  const given: string[] = [];
  const controller = new AbortController();
  const run = queue.run('k', attempt, 10_000, { admitted: false, value: 'no', retryInMs: 10 }, (v) => given.push(v), controller.signal);
  await timers.advance(10);
  assert.ok(answer !== undefined, 'the retry is in flight');
  controller.abort();
  assert.deepEqual(await run, { status: 'aborted', waitedMs: 10 });
  answer!({ admitted: true, value: 'yes' });
  await settle();
  assert.deepEqual(given, ['yes']);
  assert.equal(queue.keys, 0);
});

test('ConcurrencyLimiter acquire with a signal: aborting the wait frees its place, and the slot goes to the next waiter on release', async () => {
  const limiter = new ConcurrencyLimiter({ store: new MemoryStore(), limit: 1, wait: { timeout: '5s', maxQueue: 2 } });
  const held = await limiter.acquire('k');
  const controller = new AbortController();
  const first = limiter.acquire('k', { signal: controller.signal });
  const second = limiter.acquire('k');
  // The line is full (2): a third is refused at once.
  const third = await limiter.acquire('k');
  assert.equal(third.allowed, false);
  controller.abort(new Error('client left'));
  await assert.rejects(first, (e: unknown) => isAborted(e) && (e as Error).cause instanceof Error);
  // Its place is free again.
  const fourth = limiter.acquire('k');
  await held.release();
  const slot = await second;
  assert.equal(slot.allowed, true);
  await slot.release();
  const next = await fourth;
  assert.equal(next.allowed, true);
  await next.release();
});

test('consume and acquire check their options: a signal that is not an AbortSignal is a typed error', async () => {
  const limiter = new RateLimiter({ limit: 1, window: '1s', wait: { timeout: '1s' } });
  await assert.rejects(limiter.consume('k', 1, { signal: 'x' as never }), (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_OPTIONS));
  await assert.rejects(limiter.consume('k', 1, { sigal: 1 } as never), (e: unknown) => isFloodgateError(e, ErrorCode.UNKNOWN_OPTION));
  const slots = new ConcurrencyLimiter({ limit: 1 });
  await assert.rejects(slots.acquire('k', { signal: {} as never }), (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_OPTIONS));
});
