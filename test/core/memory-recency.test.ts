// MemoryStore writes a key in place while it is young (no delete and set per call): eviction and reclaim still spare hot keys.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Operation, Policy } from '../../src/core/policy.js';
import { ManualClock, MemoryStore } from '../../src/index.js';

const START = 1_700_006_400_000;
const p: Policy = { algorithm: 'fixed-window', limit: 1_000_000, windowMs: 60_000, blockMs: 0 };

function consume(key: string, policy: Policy = p): Operation {
  return { kind: 'consume', key, amount: 1, policy };
}

/** Units the key has used in its window (0 when the store holds no state for it). */
function used(store: MemoryStore, key: string, now: number): number {
  return p.limit - store.applySync({ kind: 'peek', key, amount: 0, policy: p }, now).remaining;
}

test('regression: writing a key on every call moved it in the table; a hot key still survives a flood of new keys (evict)', () => {
  const now = START;
  const store = new MemoryStore({ maxKeys: 100, sweepIntervalMs: 0 });
  let hot = 0;
  for (let i = 0; i < 10_000; i++) {
    store.applySync(consume(`cold-${i}`), now);
    // Used once per 10 new keys: always within the most recent tenth of the table.
    if (i % 10 === 0) {
      store.applySync(consume('hot'), now);
      hot++;
    }
    assert.ok(store.size <= 100, `${store.size} keys`);
  }
  assert.equal(used(store, 'hot', now), hot, 'the hot key kept its count');
});

test('regression: evict mode forgets the least recently used key, not one rewritten in place since it was placed', () => {
  const now = START;
  const store = new MemoryStore({ maxKeys: 4, sweepIntervalMs: 0 });
  for (const k of ['a', 'b', 'c', 'd']) store.applySync(consume(k), now);
  assert.equal(store.size, 4);
  // 'c' and 'd' are used again while young (written in place), 'a' from the older half (moved): 'b' is the least recently used.
  store.applySync(consume('c'), now);
  store.applySync(consume('d'), now);
  store.applySync(consume('a'), now);
  store.applySync(consume('e'), now);
  assert.equal(used(store, 'a', now), 2, 'the most recently used key stays');
  assert.equal(used(store, 'e', now), 1, 'the key just written stays');
  assert.equal(used(store, 'c', now), 2);
  assert.equal(used(store, 'd', now), 2);
  assert.equal(used(store, 'b', now), 0, 'b was evicted');
});

test('regression: with keys written in place, overflow mode still reclaims an expired key behind a live rewritten one', () => {
  const clock = new ManualClock(START);
  const short: Policy = { ...p, windowMs: 1000 };
  const store = new MemoryStore({ maxKeys: 8, onFull: 'overflow', overflowCells: 64, clock: clock.now, sweepIntervalMs: 0 });
  // k0 (a long window) is rewritten in place at once: still the oldest placed, and live after the others expire.
  store.applySync(consume('k0'), clock.now());
  store.applySync(consume('k0'), clock.now());
  for (let i = 1; i < 8; i++) store.applySync(consume(`k${i}`, short), clock.now());
  clock.advance(1500);
  store.applySync(consume('new'), clock.now());
  assert.equal(store.overflows, 0, 'an expired key was reclaimed, not the sketch used');
  assert.equal(used(store, 'k0', clock.now()), 2, 'the live key kept its count');
  assert.equal(store.size, 8);
});

test('a key written in the older half of the table moves to the young end: eviction order follows use', () => {
  const now = START;
  const store = new MemoryStore({ maxKeys: 10, sweepIntervalMs: 0 });
  for (let i = 0; i < 10; i++) store.applySync(consume(`k${i}`), now);
  // k0..k4 sit in the older half: each use moves it past k5..k9.
  for (let i = 0; i < 5; i++) store.applySync(consume(`k${i}`), now);
  for (let i = 0; i < 5; i++) store.applySync(consume(`n${i}`), now);
  for (let i = 5; i < 10; i++) assert.equal(used(store, `k${i}`, now), 0, `k${i} evicted`);
  for (let i = 0; i < 5; i++) assert.equal(used(store, `k${i}`, now), 2, `k${i} kept`);
});
