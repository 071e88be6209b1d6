// OutboundLimiter in one process on the memory store: budgets, priority order, learning from answers, deadlines, queue bounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OutboundLimiter } from '../../src/egress/outbound-limiter.js';
import { isFloodgateError } from '../../src/core/errors.js';
import { FailingStore } from '../http/support/http.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test('a rate budget: the calls past it wait for the next window, none is lost', async () => {
  const out = new OutboundLimiter({ rate: { limit: 5, window: '300ms' } });
  const started: number[] = [];
  const t0 = Date.now();
  await Promise.all(Array.from({ length: 12 }, () => out.schedule('api', () => void started.push(Date.now() - t0))));
  assert.equal(started.length, 12);
  // Five per window: the 6th and 11th started a window (or two) later than the first.
  const windows = new Set(started.map((ms) => Math.floor((ms + (t0 % 300)) / 300)));
  assert.ok(windows.size >= 3, `started in ${windows.size} windows: ${started.join(', ')}`);
});

test('higher priorities start first; FIFO within one', async () => {
  const out = new OutboundLimiter({ rate: { limit: 1, window: '150ms' } });
  const order: string[] = [];
  const run = (name: string, priority: string) => out.schedule('api', () => void order.push(name), { priority });
  await Promise.all([
    run('first', 'normal'),
    run('low1', 'low'),
    run('low2', 'low'),
    run('high1', 'high'),
    run('normal1', 'normal'),
    run('high2', 'high'),
  ]);
  assert.deepEqual(order, ['first', 'high1', 'high2', 'normal1', 'low1', 'low2']);
});

test('concurrency: never more than the limit in flight, across keys each its own', async () => {
  const out = new OutboundLimiter({ concurrency: 2 });
  let now = 0;
  let most = 0;
  const job = async (): Promise<void> => {
    now++;
    most = Math.max(most, now);
    await sleep(30);
    now--;
  };
  await Promise.all(Array.from({ length: 8 }, () => out.schedule('a', job)));
  assert.equal(most, 2);
});

test('a 429 with Retry-After holds the key until then; a remaining of 0 holds it until the reset', async () => {
  const out = new OutboundLimiter({ rate: { limit: 100, window: '10s' } });
  await out.schedule('api', ({ learn }) => learn({ status: 429, requests: { retryAfterMs: 400 } }));
  const t0 = Date.now();
  await out.schedule('api', () => undefined);
  assert.ok(Date.now() - t0 >= 350, `started after ${Date.now() - t0} ms`);
  await out.schedule('api', ({ learn }) => learn({ requests: { remaining: 0, resetMs: 300 } }));
  const t1 = Date.now();
  await out.schedule('api', () => undefined);
  assert.ok(Date.now() - t1 >= 250);
});

test('a stated limit under the ceiling is learnt; one above it is not', async () => {
  const out = new OutboundLimiter({ rate: { limit: 10, window: '1s' } });
  await out.schedule('api', ({ learn }) => learn({ requests: { limit: 3, windowMs: 1000, remaining: 2 } }));
  // The first call counted: two more start now, the fourth waits for the window.
  const t0 = Date.now();
  const starts: number[] = [];
  await Promise.all([0, 1, 2].map(() => out.schedule('api', () => void starts.push(Date.now() - t0))));
  assert.ok(starts[2]! >= 100, `starts ${starts.join(', ')}`);
  const other = new OutboundLimiter({ rate: { limit: 3, window: '1s' } });
  await other.schedule('api', ({ learn }) => learn({ requests: { limit: 1000, windowMs: 1000, remaining: 999 } }));
  const fast = await Promise.all([0, 1].map(() => other.schedule('api', () => Date.now())));
  assert.equal(fast.length, 2);
});

test('tokens: the estimate is reserved, settle commits the actual cost; a cost without a tokens budget is refused', async () => {
  const out = new OutboundLimiter({ tokens: { limit: 100, window: '10s' } });
  await out.schedule('llm', ({ settle }) => settle(10), { cost: 80 });
  // 80 reserved, 10 used: 90 left, so a call of 85 starts at once.
  const t0 = Date.now();
  await out.schedule('llm', () => undefined, { cost: 85 });
  assert.ok(Date.now() - t0 < 100);
  const rateOnly = new OutboundLimiter({ rate: { limit: 1, window: '1s' } });
  await assert.rejects(
    rateOnly.schedule('x', () => 1, { cost: 5 }),
    (e: unknown) => isFloodgateError(e, 'FLOODGATE_CONFLICTING_OPTIONS'),
  );
});

test('deadlines, a full queue and an abort reject with their codes, having spent nothing', async () => {
  const out = new OutboundLimiter({ rate: { limit: 1, window: '10s' }, maxQueue: 2 });
  await out.schedule('api', () => undefined);
  const late = out.schedule('api', () => 'ran', { timeout: '100ms' });
  const controller = new AbortController();
  const aborted = out.schedule('api', () => 'ran', { signal: controller.signal });
  await assert.rejects(
    out.schedule('api', () => 'ran'),
    (e: unknown) => isFloodgateError(e, 'FLOODGATE_QUEUE_FULL'),
  );
  controller.abort();
  await assert.rejects(aborted, (e: unknown) => isFloodgateError(e, 'FLOODGATE_ABORTED'));
  await assert.rejects(late, (e: unknown) => isFloodgateError(e, 'FLOODGATE_DEADLINE_EXCEEDED'));
  assert.equal(out.queued, 0);
});

test('bad options get typed errors', () => {
  assert.throws(() => new OutboundLimiter({}), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => new OutboundLimiter({ rate: { limit: 0, window: '1s' } }), { code: 'FLOODGATE_INVALID_LIMIT' });
  assert.throws(() => new OutboundLimiter({ rate: { limit: 1, window: '1s' }, priorities: [] }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => new OutboundLimiter({ rate: { limit: 1, window: '1s' }, rte: 1 } as never), { code: 'FLOODGATE_UNKNOWN_OPTION' });
});

test('with the budget saturated, a high-priority call waits at most about one token interval; the low-priority ones are those that time out', async (t) => {
  // 20 per second as a token bucket: one token every 50 ms once the burst is spent.
  const out = new OutboundLimiter({ rate: { limit: 20, window: '1s', algorithm: 'token-bucket' } });
  const lows = Array.from({ length: 60 }, () =>
    out
      .schedule('api', () => 'ran', { priority: 'low', timeout: '1500ms' })
      .then(
        () => 'ran',
        (e: { code?: string }) => e.code ?? 'error',
      ),
  );
  await sleep(100);
  const waits: number[] = [];
  for (let i = 0; i < 10; i++) {
    const asked = Date.now();
    await out.schedule('api', () => void waits.push(Date.now() - asked), { priority: 'high', timeout: '1500ms' });
    await sleep(60);
  }
  const outcomes = await Promise.all(lows);
  const timedOut = outcomes.filter((o) => o === 'FLOODGATE_DEADLINE_EXCEEDED').length;
  t.diagnostic(`high-priority waits ${waits.join(', ')} ms (one token is 50 ms); low-priority: ${timedOut} of 60 timed out`);
  // One token interval, and the timer that wakes the line (a few ms on a loaded machine).
  for (const w of waits) assert.ok(w <= 50 + 30, `a high-priority call waited ${w} ms`);
  assert.ok(timedOut > 0, 'low-priority calls are the ones that time out');
  assert.ok(outcomes.every((o) => o === 'ran' || o === 'FLOODGATE_DEADLINE_EXCEEDED'));
});

test('a store that fails: each call rejects with the store’s typed error, in line or not, and nothing is left unhandled', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const direct = new OutboundLimiter({ store: new FailingStore(), rate: { limit: 5, window: '1s' } });
    await assert.rejects(
      direct.schedule('api', () => 'ran'),
      (e: unknown) => isFloodgateError(e, 'FLOODGATE_STORE_ERROR'),
    );
    const inLine = new OutboundLimiter({ store: new FailingStore(), tokens: { limit: 100, window: '1s' } });
    const calls = [1, 2, 3].map(() => inLine.schedule('api', () => 'ran', { cost: 5 }));
    for (const call of calls) await assert.rejects(call, (e: unknown) => isFloodgateError(e, 'FLOODGATE_STORE_ERROR'));
    assert.equal(inLine.queued, 0);
    await sleep(20);
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

test('a misspelt schedule option is reported on the fast path too (a rate alone on the memory store answers without a line)', async () => {
  const out = new OutboundLimiter({ rate: { limit: 5, window: '1s' } });
  await assert.rejects(
    out.schedule('api', () => 'ran', { cst: 5 } as never),
    (e: unknown) => isFloodgateError(e, 'FLOODGATE_UNKNOWN_OPTION'),
  );
  assert.equal(await out.schedule('api', () => 'ran'), 'ran');
});
