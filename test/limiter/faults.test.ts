// The limiter's fault path with a store that fails on command: insurance, fail-open/closed, reject, and the circuit breaker.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, FloodgateError, ManualClock, RateLimiter } from '../../src/index.js';
import { FlakyStore } from '../support/flaky-store.js';

test('reject mode: a store failure rejects with STORE_ERROR carrying the cause', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const l = new RateLimiter({ limit: 2, window: '1s', store, clock: clock.now });
  store.failing = true;
  await assert.rejects(l.consume('k'), (error: unknown) => {
    assert.ok(error instanceof FloodgateError);
    assert.equal(error.code, ErrorCode.STORE_ERROR);
    assert.match(String((error.cause as Error).message), /connection refused/);
    return true;
  });
});

test('insurance decides while the store fails, and the store takes over again', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const insurance = new RateLimiter({ limit: 1, window: '1s', clock: clock.now });
  const l = new RateLimiter({ limit: 2, window: '1s', store, insurance, clock: clock.now, breaker: false });
  store.failing = true;
  const first = await l.consume('k');
  assert.deepEqual([first.allowed, first.source, first.limit], [true, 'insurance', 1]);
  const second = await l.consume('k');
  assert.deepEqual([second.allowed, second.source], [false, 'insurance']);
  store.failing = false;
  const back = await l.consume('k');
  assert.deepEqual([back.allowed, back.source, back.remaining], [true, 'store', 1]);
});

test('fail-open admits and fail-closed refuses while the store fails', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  store.failing = true;
  const open = new RateLimiter({ limit: 2, window: '1s', store, onStoreFailure: 'fail-open', clock: clock.now });
  const closed = new RateLimiter({ limit: 2, window: '1s', store, onStoreFailure: 'fail-closed', clock: clock.now });
  const a = await open.consume('k');
  assert.deepEqual([a.allowed, a.source], [true, 'fail-open']);
  const b = await closed.consume('k');
  assert.deepEqual([b.allowed, b.source], [false, 'fail-closed']);
  assert.ok(b.retryAfterMs > 0);
});

test('the breaker stops calling a failing store and probes once per cooldown until it answers', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const l = new RateLimiter({
    limit: 100,
    window: '1m',
    store,
    onStoreFailure: 'fail-open',
    breaker: { failureThreshold: 3, cooldown: '1s' },
    clock: clock.now,
  });
  store.failing = true;
  for (let i = 0; i < 20; i++) assert.equal((await l.consume('k')).source, 'fail-open');
  assert.equal(store.calls, 3, 'open after 3 failures');
  clock.advance(1000);
  await l.consume('k');
  assert.equal(store.calls, 4, 'one probe after the cooldown');
  await l.consume('k');
  assert.equal(store.calls, 4, 'failed probe re-opens');
  store.failing = false;
  clock.advance(1000);
  assert.equal((await l.consume('k')).source, 'store');
  assert.equal((await l.consume('k')).source, 'store');
  assert.equal(store.calls, 6);
});

test('with the breaker open and no fallback, calls reject fast with CIRCUIT_OPEN', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const l = new RateLimiter({ limit: 5, window: '1s', store, breaker: { failureThreshold: 1 }, clock: clock.now });
  store.failing = true;
  await assert.rejects(l.consume('k'), { code: ErrorCode.STORE_ERROR });
  await assert.rejects(l.consume('k'), { code: ErrorCode.CIRCUIT_OPEN });
  assert.equal(store.calls, 1);
});

test('circuitOpen() is true while the breaker is open or its probe is out, and clears by itself after the cooldown', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const l = new RateLimiter({
    limit: 100,
    window: '1m',
    store,
    onStoreFailure: 'fail-open',
    breaker: { failureThreshold: 2, cooldown: '1s' },
    clock: clock.now,
  });
  assert.equal(l.circuitOpen(), false);
  store.failing = true;
  await l.consume('k');
  assert.equal(l.circuitOpen(), false, 'below the threshold');
  await l.consume('k');
  assert.equal(l.circuitOpen(), true, 'open at the threshold');
  clock.advance(1000);
  assert.equal(l.circuitOpen(), false, 'after the cooldown, without any call: the next call probes');
  const probe = l.consume('k');
  assert.equal(l.circuitOpen(), true, 'while the probe is out');
  await probe;
  assert.equal(l.circuitOpen(), true, 'the failed probe re-opens it');
  store.failing = false;
  clock.advance(1000);
  await l.consume('k');
  assert.equal(l.circuitOpen(), false, 'a probe that gets an answer closes it');
  assert.equal(new RateLimiter({ limit: 1, window: '1s', store, breaker: false }).circuitOpen(), false, 'no breaker: never open');
});
