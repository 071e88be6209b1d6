// MemoryStore with onFull 'overflow': a full table never forgets a live key, and the overflow sketch never admits a key over its limit, for every algorithm.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALGORITHMS, type Operation, type Policy } from '../../src/core/policy.js';
import { ErrorCode, FloodgateError, ManualClock, MemoryStore } from '../../src/index.js';

const START = 1_700_006_400_000;

function policy(algorithm: Policy['algorithm'], limit: number, windowMs: number, blockMs = 0): Policy {
  return { algorithm, limit, windowMs, blockMs };
}

function consume(key: string, p: Policy, amount = 1): Operation {
  return { kind: 'consume', key, amount, policy: p };
}

/** Consumes until refused; returns how many were admitted. */
function drain(store: MemoryStore, key: string, p: Policy, now: number, most = 1000): number {
  let n = 0;
  while (n < most && store.applySync(consume(key, p), now).allowed) n++;
  return n;
}

for (const algorithm of ALGORITHMS) {
  test(`regression: a flood of new keys never resets a live key (${algorithm}, overflow mode)`, () => {
    const clock = new ManualClock(START);
    const p = policy(algorithm, 3, 3_600_000);
    const store = new MemoryStore({ maxKeys: 10, onFull: 'overflow', overflowCells: 64, clock: clock.now, sweepIntervalMs: 0 });
    for (let i = 0; i < 10; i++)
      for (let u = 0; u < 1 + (i % 2); u++) assert.equal(store.applySync(consume(`live${i}`, p), clock.now()).allowed, true);
    clock.advance(1000);
    for (let i = 0; i < 5000; i++) store.applySync(consume(`flood${i}`, p), clock.now());
    assert.equal(store.size, 10);
    assert.ok(store.overflows >= 5000, `overflows ${store.overflows}`);
    for (let i = 0; i < 10; i++) assert.equal(drain(store, `live${i}`, p, clock.now()), 2 - (i % 2), `live${i}`);
  });

  test(`the overflow sketch never admits a key over its limit (${algorithm})`, () => {
    // Replays every key's admitted consumes through an exact store: each must be admitted there too.
    const p = policy(algorithm, 4, 1000);
    const clock = new ManualClock(START + 337);
    const store = new MemoryStore({ maxKeys: 1, onFull: 'overflow', overflowCells: 16, clock: clock.now, sweepIntervalMs: 0 });
    store.applySync(consume('holder', policy(algorithm, 4, 10_000_000)), clock.now());
    let seed = 7;
    const random = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const admitted = new Map<string, number[]>();
    for (let i = 0; i < 20_000; i++) {
      clock.advance(random(3));
      const key = `k${random(40)}`;
      if (store.applySync(consume(key, p), clock.now()).allowed) {
        const times = admitted.get(key) ?? [];
        times.push(clock.now());
        admitted.set(key, times);
      }
    }
    assert.ok([...admitted.values()].reduce((n, t) => n + t.length, 0) > 100, 'the sketch admits some');
    const exact = new MemoryStore({ sweepIntervalMs: 0 });
    for (const [key, times] of admitted) {
      for (const t of times) assert.equal(exact.applySync(consume(key, p), t).allowed, true, `${key} admitted over its limit at ${t}`);
    }
  });

  test(`a key counted in the sketch keeps its usage when it enters the table (${algorithm})`, () => {
    const clock = new ManualClock(START);
    const p = policy(algorithm, 3, 3_600_000);
    const short = policy(algorithm, 3, 1000);
    const store = new MemoryStore({ maxKeys: 1, onFull: 'overflow', clock: clock.now, sweepIntervalMs: 0 });
    store.applySync(consume('shortlived', short), clock.now());
    assert.equal(store.applySync(consume('k', p), clock.now()).allowed, true);
    assert.equal(store.applySync(consume('k', p), clock.now()).allowed, true);
    assert.equal(store.overflows, 2);
    clock.advance(5000);
    // The short-lived key has expired: its slot is reclaimed, and k enters the table with its two units spent.
    assert.equal(drain(store, 'k', p, clock.now()), 1);
    assert.equal(store.overflows, 2);
  });
}

test('overflow mode reclaims expired keys before using the sketch, and evict mode still evicts', () => {
  const clock = new ManualClock(START);
  const p = policy('fixed-window', 2, 1000);
  const overflow = new MemoryStore({ maxKeys: 3, onFull: 'overflow', clock: clock.now, sweepIntervalMs: 0 });
  for (const k of ['a', 'b', 'c']) overflow.applySync(consume(k, p), clock.now());
  clock.advance(1000);
  for (const k of ['d', 'e', 'f']) overflow.applySync(consume(k, p), clock.now());
  assert.equal(overflow.overflows, 0);
  assert.equal(overflow.size, 3);
  const evict = new MemoryStore({ maxKeys: 1, clock: clock.now, sweepIntervalMs: 0 });
  evict.applySync(consume('a', p, 2), clock.now());
  evict.applySync(consume('b', p), clock.now());
  assert.equal(drain(evict, 'a', p, clock.now()), 2, 'evict mode forgets the least recently used key');
});

test('the sketch blocks a key that goes over under blockMs, and refuses early rather than late', () => {
  const clock = new ManualClock(START);
  const p = policy('fixed-window', 2, 1000, 60_000);
  const store = new MemoryStore({ maxKeys: 1, onFull: 'overflow', clock: clock.now, sweepIntervalMs: 0 });
  store.applySync(consume('holder', policy('fixed-window', 2, 10_000_000)), clock.now());
  assert.equal(drain(store, 'k', p, clock.now()), 2);
  clock.advance(5000);
  assert.equal(store.applySync(consume('k', p), clock.now()).allowed, false, 'still blocked');
  clock.advance(60_000);
  assert.equal(store.applySync(consume('k', p), clock.now()).allowed, true);
});

test('MemoryStore refuses bad onFull and overflowCells with INVALID_OPTIONS', () => {
  for (const options of [{ onFull: 'drop' }, { overflowCells: 2 }, { overflowCells: 1.5 }]) {
    assert.throws(
      () => new MemoryStore(options as never),
      (error: unknown) => error instanceof FloodgateError && error.code === ErrorCode.INVALID_OPTIONS,
    );
  }
});

test('a composite with a key the full table has no room for: the sketch takes part, all or nothing', () => {
  const now = START;
  const perUser = policy('fixed-window', 3, 60_000);
  const perOrg = policy('sliding-window', 5, 60_000);
  const store = new MemoryStore({ maxKeys: 4, onFull: 'overflow', overflowCells: 64, clock: () => now, sweepIntervalMs: 0 });
  for (let i = 0; i < 3; i++) assert.equal(store.applySync(consume(`live${i}`, perUser), now).allowed, true);
  assert.equal(store.applySync(consume('org', perOrg), now).allowed, true);
  assert.equal(store.size, 4);
  // 'newcomer' finds the table full: decided in the sketch, together with the org in the table.
  const both = (cost = 1) => store.consumeAllSync([consume('newcomer', perUser, cost), consume('org', perOrg)], now);
  const first = both();
  assert.deepEqual(
    first.map((o) => o.allowed),
    [true, true],
  );
  assert.equal(store.overflows, 1);
  // The sketch part refuses (1 + 3 > 3): the org part, which would admit, spends nothing.
  const refused = both(3);
  assert.deepEqual(
    refused.map((o) => o.allowed),
    [false, true],
  );
  assert.equal(store.applySync({ kind: 'peek', key: 'org', amount: 0, policy: perOrg }, now).remaining, 3);
  // Then the org refuses: the sketch part spends nothing either, so the newcomer still has two.
  store.applySync({ kind: 'penalty', key: 'org', amount: 3, policy: perOrg }, now);
  assert.equal(both()[1]!.allowed, false);
  assert.equal(store.consumeAllSync([consume('newcomer', perUser, 2)], now)[0]!.allowed, true);
  assert.equal(store.size, 4, 'no live key was forgotten');
});
