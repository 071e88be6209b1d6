// RateLimiter's wait and execEvenly options on the memory store: option checks, waiting in order within the timeout, a full line, consumeNow, pacing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  consumeAll,
  ErrorCode,
  MemoryStore,
  RateLimiter,
  WarningCode,
  isFloodgateError,
  type Decision,
  type RateLimiterOptions,
} from '../../src/index.js';
import { forgetWarnings } from '../../src/core/warnings.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function throwsCode(options: Record<string, unknown>, code: string, message: RegExp): void {
  assert.throws(
    () => new RateLimiter({ limit: 5, window: '1s', ...options } as RateLimiterOptions),
    (e: unknown) => isFloodgateError(e) && e.code === code && message.test(e.message),
  );
}

test('wait and execEvenly are checked: a typed error that says what to write', () => {
  throwsCode({ wait: true }, ErrorCode.INVALID_OPTIONS, /wait takes options, not true: write wait: \{ timeout: '5s' \}/);
  throwsCode({ wait: '5s' }, ErrorCode.INVALID_OPTIONS, /wait takes options, not "5s"/);
  throwsCode({ wait: {} }, ErrorCode.INVALID_OPTIONS, /wait.timeout is required/);
  throwsCode({ wait: { timeout: 'soon' } }, ErrorCode.INVALID_DURATION, /wait.timeout must be a number of milliseconds or a string/);
  throwsCode({ wait: { timeout: 2 ** 31 } }, ErrorCode.INVALID_DURATION, /wait.timeout must be at most 2147483647 ms/);
  throwsCode(
    { wait: { timeout: '1s', maxQueue: 0 } },
    ErrorCode.INVALID_OPTIONS,
    /wait.maxQueue must be a whole number from 1 to 1000000; got 0/,
  );
  throwsCode({ wait: { timeout: '1s', maxQueue: 2.5 } }, ErrorCode.INVALID_OPTIONS, /wait.maxQueue must be/);
  throwsCode({ wait: { timeout: '1s', maxqueue: 5 } }, ErrorCode.UNKNOWN_OPTION, /wait has no option "maxqueue"/);
  throwsCode({ execEvenly: 'yes' }, ErrorCode.INVALID_OPTIONS, /execEvenly must be true or false; got "yes"/);
  assert.ok(new RateLimiter({ limit: 5, window: '1s', wait: { timeout: '1s' }, execEvenly: false }));
});

test('without wait or execEvenly a decision carries no waitedMs', async () => {
  const limiter = new RateLimiter({ limit: 1, window: '1s' });
  assert.equal('waitedMs' in (await limiter.consume('k')), false);
});

test('with wait, refused calls wait in arrival order and are admitted when the window resets, within the timeout', async () => {
  const limiter = new RateLimiter({ limit: 2, window: '200ms', wait: { timeout: '1s' } });
  const order: number[] = [];
  const started = Date.now();
  const calls = [0, 1, 2, 3, 4].map((i) =>
    limiter.consume('k').then((d) => {
      order.push(i);
      return { d, at: Date.now() - started };
    }),
  );
  const results = await Promise.all(calls);
  assert.deepEqual(order, [0, 1, 2, 3, 4]);
  assert.ok(results.every((r) => r.d.allowed));
  assert.deepEqual(
    results.map((r) => r.d.waitedMs! > 0),
    [false, false, true, true, true],
  );
  // Two per window: 0 and 1 now, 2 and 3 at 200 ms, 4 at 400 ms.
  assert.ok(results[2]!.at >= 195 && results[2]!.at < 300, `third admitted at ${results[2]!.at} ms`);
  assert.ok(results[4]!.at >= 395 && results[4]!.at < 500, `fifth admitted at ${results[4]!.at} ms`);
  assert.ok(Math.abs(results[4]!.d.waitedMs! - results[4]!.at) < 30);
});

test('with wait, a call the store could admit only after its timeout is refused at once with how long it would have needed', async () => {
  const limiter = new RateLimiter({ limit: 1, window: '10s', wait: { timeout: '100ms' } });
  await limiter.consume('k');
  const started = Date.now();
  const d = await limiter.consume('k');
  assert.equal(d.allowed, false);
  assert.ok(Date.now() - started < 50, 'refused at once');
  assert.equal(d.waitedMs, 0);
  assert.ok(d.retryAfterMs > 9000, `retryAfterMs ${d.retryAfterMs}`);
});

test('with wait, a full line refuses at once; other keys have their own line', async () => {
  const limiter = new RateLimiter({ limit: 1, window: '300ms', wait: { timeout: '2s', maxQueue: 2 } });
  await limiter.consume('k');
  const waiting = [limiter.consume('k'), limiter.consume('k')];
  await sleep(5);
  const started = Date.now();
  const full = await limiter.consume('k');
  assert.equal(full.allowed, false);
  assert.equal(full.waitedMs, 0);
  assert.ok(Date.now() - started < 20, 'refused at once');
  assert.ok(full.retryAfterMs > 200 && full.retryAfterMs <= 300, `retryAfterMs ${full.retryAfterMs}`);
  assert.equal((await limiter.consume('other')).allowed, true);
  const [a, b] = await Promise.all(waiting);
  assert.equal(a!.allowed, true);
  assert.equal(b!.allowed, true);
});

test('consumeNow with wait answers only an admission at once; a refusal is undefined and spends nothing', async () => {
  const limiter = new RateLimiter({ limit: 2, window: '1s', wait: { timeout: '2s' } });
  const first = limiter.consumeNow('k');
  assert.equal(first?.allowed, true);
  assert.equal(first?.waitedMs, 0);
  assert.equal(limiter.consumeNow('k')?.allowed, true);
  assert.equal(limiter.consumeNow('k'), undefined);
  assert.equal((await limiter.peek('k')).remaining, 0);
  assert.throws(
    () => limiter.consumeNow(''),
    (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_KEY),
  );
});

test('a unit freed while a call waits goes to that call: consumeNow and a new consume queue behind it', async () => {
  const limiter = new RateLimiter({ limit: 1, window: '300ms', wait: { timeout: '1s' } });
  await limiter.consume('k');
  const order: string[] = [];
  const waiting = limiter.consume('k').then((d) => (order.push('waiter'), d));
  await sleep(5);
  await limiter.reward('k');
  assert.equal(limiter.consumeNow('k'), undefined, 'the freed unit is not taken past the waiter');
  const later = limiter.consume('k').then((d) => (order.push('later'), d));
  const [w, l] = await Promise.all([waiting, later]);
  assert.deepEqual(order, ['waiter', 'later']);
  assert.equal(w.allowed && l.allowed, true);
});

test('a reward or reset in this process lets the first waiting call in at once, not at its scheduled retry', async () => {
  const limiter = new RateLimiter({ limit: 1, window: '10s', wait: { timeout: '20s' } });
  await limiter.consume('k');
  const started = Date.now();
  const waiting = limiter.consume('k');
  await sleep(20);
  await limiter.reward('k');
  const d = await waiting;
  assert.equal(d.allowed, true);
  assert.ok(Date.now() - started < 200, `admitted ${Date.now() - started} ms after the call`);
  const next = limiter.consume('k');
  await sleep(20);
  await limiter.reset('k');
  assert.equal((await next).allowed, true);
});

test('bad calls reject at once with wait, without joining the line', async () => {
  const limiter = new RateLimiter({ limit: 2, window: '1s', wait: { timeout: '1s' } });
  await assert.rejects(limiter.consume('k', 3), (e: unknown) => isFloodgateError(e, ErrorCode.COST_EXCEEDS_LIMIT));
  await assert.rejects(limiter.consume(''), (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_KEY));
});

test('with execEvenly on the memory store, a burst of admitted calls resolves window/limit apart', async () => {
  const limiter = new RateLimiter({ limit: 5, window: '500ms', execEvenly: true });
  const started = Date.now();
  const done = await Promise.all([0, 1, 2, 3, 4].map(() => limiter.consume('k').then((d) => ({ d, at: Date.now() - started }))));
  const refused = await limiter.consume('k');
  assert.equal(refused.allowed, false, 'a refusal is not delayed: the window is spent');
  assert.equal(refused.waitedMs, 0);
  const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
  const gaps = (values: number[]) =>
    sorted(values)
      .slice(1)
      .map((t, i) => t - sorted(values)[i]!);
  // When each call was meant to resolve (all were called at 0): its waitedMs, free of timer lateness.
  const meant = gaps(done.map((r) => r.d.waitedMs!));
  const wall = gaps(done.map((r) => r.at));
  console.log(`execEvenly (memory, target 100 ms): slot gaps ${meant.join(', ')}; wall-clock gaps ${wall.join(', ')}`);
  for (const gap of meant) assert.ok(Math.abs(gap - 100) <= 10, `slot gap ${gap} ms`);
  assert.ok(Math.abs(sorted(wall)[2]! - 100) <= 10, `median wall-clock gap ${sorted(wall)[2]} ms`);
  assert.ok(done.every((r) => r.d.allowed));
  assert.equal(limiter.consumeNow('j'), undefined, 'consumeNow cannot know a pacing delay');
  assert.equal((await limiter.peek('j')).remaining, 5, '… and spent nothing');
});

test('execEvenly with cost: a call of cost 3 takes three slots', async () => {
  const limiter = new RateLimiter({ limit: 10, window: '1s', execEvenly: true, store: new MemoryStore() });
  const a: Decision = await limiter.consume('k', 3);
  const started = Date.now();
  const b = await limiter.consume('k');
  assert.equal(a.waitedMs, 0);
  const waited = Date.now() - started;
  assert.ok(waited >= 280 && waited < 340, `second call waited ${waited} ms (three slots of 100 ms, less the time since)`);
  assert.ok(b.waitedMs! >= 280);
});

test('wait.timeout shorter than window/limit warns once: FLOODGATE_WAIT_SHORTER_THAN_UNIT', async () => {
  forgetWarnings();
  const seen: { code?: string; message: string }[] = [];
  const listener = (w: Error & { code?: string }) => seen.push({ code: w.code, message: w.message });
  process.on('warning', listener);
  try {
    new RateLimiter({ limit: 10, window: '1m', wait: { timeout: '1s' } });
    new RateLimiter({ limit: 10, window: '1m', wait: { timeout: '1s' } });
    new RateLimiter({ limit: 10, window: '1m', wait: { timeout: '6s' } });
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  const ours = seen.filter((w) => w.code === WarningCode.WAIT_SHORTER_THAN_UNIT);
  assert.equal(ours.length, 1);
  assert.equal(
    ours[0]!.message,
    'RateLimiter wait.timeout is 1000 ms, shorter than window/limit (6000 ms), the time the limiter takes to free one unit: a refused call is rarely admitted before its timeout, so most waits end refused anyway. If waiting was meant, raise the timeout to at least 6000 ms; to refuse at once, leave wait out.',
  );
});

test('a waiting limiter in consumeAll: the composite answers at once and warns once: FLOODGATE_COMPOSITE_DOES_NOT_WAIT', async () => {
  forgetWarnings();
  const seen: string[] = [];
  const listener = (w: Error & { code?: string }) => void (w.code === WarningCode.COMPOSITE_DOES_NOT_WAIT && seen.push(w.message));
  process.on('warning', listener);
  try {
    const store = new MemoryStore();
    const waiting = new RateLimiter({ store, limit: 1, window: '10s', wait: { timeout: '5s' }, prefix: 'w' });
    const plain = new RateLimiter({ store, limit: 5, window: '10s', prefix: 'p' });
    const parts = [
      { limiter: waiting, key: 'k' },
      { limiter: plain, key: 'k' },
    ];
    assert.equal((await consumeAll(parts)).allowed, true);
    const started = Date.now();
    assert.equal((await consumeAll(parts)).allowed, false);
    assert.ok(Date.now() - started < 50);
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  assert.deepEqual(seen, [
    'consumeAll decides at once: the RateLimiter with prefix "w" has wait or execEvenly, which apply only to its own consume(), so this composite (a route with several policies, too) neither waited nor paced. To wait for a composite, retry after the decision\'s retryAfterMs; to silence this, leave wait and execEvenly off limiters used in consumeAll.',
  ]);
});

test('reserve on a waiting limiter waits for its estimate like consume, and the give-back reaches the next waiter', async () => {
  const limiter = new RateLimiter({ limit: 4, window: '300ms', wait: { timeout: '1s' } });
  const first = await limiter.reserve('k', 4);
  const started = Date.now();
  const second = limiter.reserve('k', 2);
  await sleep(20);
  // Committing 1 of the 4 gives 3 back: the waiting reservation takes 2 of them at once, not at the window's end.
  await first.commit(1);
  const r = await second;
  assert.equal(r.decision.allowed, true);
  assert.ok(Date.now() - started < 200, `admitted after ${Date.now() - started} ms`);
});
