// Reservations when the store fails: settled where the units were taken (the insurance limiter, nothing when failed open), and a settlement the store cannot take rejects and stays open instead of going to a fallback.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, ManualClock, MemoryStore, RateLimiter } from '../../src/index.js';
import { FlakyStore } from '../support/flaky-store.js';

test('a reserve the insurance decided is settled on the insurance limiter, not on the store that came back', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const insurance = new RateLimiter({ limit: 10, window: '1m', clock: clock.now, store: new MemoryStore({ clock: clock.now }) });
  const l = new RateLimiter({ limit: 10, window: '1m', store, insurance, clock: clock.now, breaker: false });
  await l.consume('k', 5);
  store.failing = true;
  const r = await l.reserve('k', 6);
  assert.deepEqual([r.allowed, r.decision.source], [true, 'insurance']);
  store.failing = false;
  assert.deepEqual(await r.commit(2), { status: 'settled', charged: 2 });
  assert.equal((await insurance.peek('k')).remaining, 8, 'the insurance took 6 and got 4 back');
  assert.equal((await l.peek('k')).remaining, 5, "the store's count is untouched: it never held the 6");
});

test('a reserve admitted by fail-open settles nothing and charges nothing', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const l = new RateLimiter({ limit: 10, window: '1m', store, onStoreFailure: 'fail-open', clock: clock.now, breaker: false });
  store.failing = true;
  const r = await l.reserve('k', 6);
  assert.deepEqual([r.allowed, r.decision.source], [true, 'fail-open']);
  store.failing = false;
  const calls = store.calls;
  assert.deepEqual(await r.commit(20), { status: 'settled', charged: 0 });
  assert.equal(store.calls, calls, 'no penalty for units never spent');
  assert.equal((await l.peek('k')).remaining, 10);
});

test('a store failure while settling rejects with its code, goes to no fallback, and the reservation can be settled once the store is back', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const insurance = new RateLimiter({ limit: 10, window: '1m', clock: clock.now, store: new MemoryStore({ clock: clock.now }) });
  const l = new RateLimiter({ limit: 10, window: '1m', store, insurance, clock: clock.now, breaker: false });
  const r = await l.reserve('k', 6);
  assert.equal(r.decision.source, 'store');
  store.failing = true;
  await assert.rejects(r.commit(1), { code: ErrorCode.STORE_ERROR });
  await assert.rejects(r.commit(9), { code: ErrorCode.STORE_ERROR });
  assert.equal((await insurance.peek('k')).remaining, 10, 'the insurance was not given units it never took, nor charged');
  store.failing = false;
  assert.deepEqual(await r.commit(1), { status: 'settled', charged: 1 });
  assert.equal((await l.peek('k')).remaining, 9);
  await assert.rejects(r.cancel(), { code: ErrorCode.RESERVATION_SETTLED });
});

test('with the breaker open, a settlement rejects with FLOODGATE_CIRCUIT_OPEN instead of calling the store', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const l = new RateLimiter({
    limit: 10,
    window: '1m',
    store,
    onStoreFailure: 'fail-closed',
    clock: clock.now,
    breaker: { failureThreshold: 1, cooldown: '5s' },
  });
  const r = await l.reserve('k', 6);
  store.failing = true;
  assert.equal((await l.consume('other')).source, 'fail-closed');
  store.failing = false;
  const calls = store.calls;
  await assert.rejects(r.cancel(), { code: ErrorCode.CIRCUIT_OPEN });
  assert.equal(store.calls, calls);
  clock.advance(5000);
  assert.deepEqual(await r.cancel(), { status: 'settled', charged: 0 });
  assert.equal((await l.peek('k')).remaining, 10);
});

test('with the in-memory block on, a give-back lets the key in again at once', async () => {
  const clock = new ManualClock();
  const l = new RateLimiter({
    limit: 10,
    window: '1m',
    clock: clock.now,
    store: new MemoryStore({ clock: clock.now }),
    inMemoryBlock: true,
  });
  const r = await l.reserve('k', 10);
  const refused = await l.consume('k');
  assert.deepEqual([refused.allowed, refused.source], [false, 'memory-block']);
  await r.commit(4);
  const d = await l.consume('k');
  assert.deepEqual([d.allowed, d.source, d.remaining], [true, 'store', 5]);
});
