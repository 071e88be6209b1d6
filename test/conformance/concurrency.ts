// Concurrency-slot cases of the conformance suite: every store configuration must pass them (acquire, release, renew, expiry, owner check).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConcurrencyLimiter, type ConcurrencyLimiterOptions, type ManualClock, type Store } from '../../src/index.js';

/** What the suite hands the concurrency cases. */
export interface ConcurrencyContext {
  readonly clock: ManualClock;
  /** The store under test (built on `clock`). */
  store(): Store;
}

let prefixes = 0;

/** Registers the concurrency cases inside a conformance `describe`. */
export function concurrencyCases(ctx: ConcurrencyContext): void {
  const { clock } = ctx;
  // No heartbeat: time is the suite's ManualClock, and renewals are the cases' own.
  const limiter = (options: Omit<ConcurrencyLimiterOptions, 'store' | 'heartbeat' | 'prefix'>) =>
    new ConcurrencyLimiter({ heartbeat: false, prefix: `cc${++prefixes}:${process.pid}`, ...options, store: ctx.store() });

  test('concurrency: acquires up to the limit, refuses the next with the time until the earliest slot expires', async () => {
    const l = limiter({ limit: 3, ttl: '10s' });
    for (let i = 1; i <= 3; i++) {
      const slot = await l.acquire('k');
      assert.deepEqual([slot.allowed, slot.inFlight, slot.limit, slot.retryAfterMs], [true, i, 3, 0]);
      clock.advance(100);
    }
    const refused = await l.acquire('k');
    assert.deepEqual([refused.allowed, refused.inFlight, refused.retryAfterMs], [false, 3, 10_000 - 300]);
    assert.equal(await refused.release(), false, 'a refused acquisition holds nothing to release');
  });

  test('concurrency: release frees one slot, and a second release of it is a no-op', async () => {
    const l = limiter({ limit: 2, ttl: '10s' });
    const a = await l.acquire('k');
    const b = await l.acquire('k');
    assert.equal((await l.acquire('k')).allowed, false);
    assert.equal(await a.release(), true);
    assert.equal(await a.release(), false);
    const c = await l.acquire('k');
    assert.deepEqual([c.allowed, c.inFlight], [true, 2]);
    // The second release above freed nothing: the key is full again.
    assert.equal((await l.acquire('k')).allowed, false);
    assert.equal(await b.release(), true);
    assert.equal(await c.release(), true);
    assert.equal((await l.acquire('k')).inFlight, 1);
  });

  test('concurrency: an expired slot is reclaimed exactly at its expiry', async () => {
    const l = limiter({ limit: 1, ttl: '1s' });
    assert.equal((await l.acquire('k')).allowed, true);
    clock.advance(999);
    const refused = await l.acquire('k');
    assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 1]);
    clock.advance(1);
    const taken = await l.acquire('k');
    assert.deepEqual([taken.allowed, taken.inFlight], [true, 1]);
  });

  test('concurrency: renew extends a held slot by a ttl from now', async () => {
    const l = limiter({ limit: 1, ttl: '1s' });
    const a = await l.acquire('k');
    clock.advance(800);
    assert.equal(await a.renew(), true);
    clock.advance(800);
    const refused = await l.acquire('k');
    assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 200]);
    clock.advance(200);
    assert.equal((await l.acquire('k')).allowed, true);
  });

  test('concurrency: renew of an expired slot fails and does not revive it', async () => {
    const l = limiter({ limit: 1, ttl: '1s' });
    const a = await l.acquire('k');
    clock.advance(1000);
    assert.equal(await a.renew(), false);
    assert.equal((await l.acquire('k')).allowed, true);
  });

  test("concurrency: the old owner of an expired slot cannot free the new holder's slot", async () => {
    const l = limiter({ limit: 1, ttl: '1s' });
    const old = await l.acquire('k');
    clock.advance(1000);
    const fresh = await l.acquire('k');
    assert.equal(fresh.allowed, true);
    assert.equal(await old.release(), false);
    const third = await l.acquire('k');
    assert.deepEqual([third.allowed, third.inFlight], [false, 1], 'the new holder still holds its slot');
    assert.equal(await fresh.release(), true);
  });

  test('concurrency (store): an owner acquiring again holds one slot, extended, even on a full key', async () => {
    const store = ctx.store();
    const key = `cs${++prefixes}:${process.pid}`;
    assert.deepEqual(await store.acquireSlot!(key, 2, 'owner-a', 1000), { admitted: true, inUse: 1, retryAfterMs: 0 });
    assert.deepEqual(await store.acquireSlot!(key, 2, 'owner-b', 1000), { admitted: true, inUse: 2, retryAfterMs: 0 });
    clock.advance(500);
    assert.deepEqual(await store.acquireSlot!(key, 2, 'owner-a', 1000), { admitted: true, inUse: 2, retryAfterMs: 0 });
    assert.deepEqual(await store.acquireSlot!(key, 2, 'owner-c', 1000), { admitted: false, inUse: 2, retryAfterMs: 500 });
    clock.advance(500);
    // owner-b expired; owner-a's slot was moved to 1500 ms.
    assert.deepEqual(await store.acquireSlot!(key, 2, 'owner-c', 1000), { admitted: true, inUse: 2, retryAfterMs: 0 });
    assert.equal(await store.releaseSlot!(key, 'owner-b'), false);
    assert.equal(await store.releaseSlot!(key, 'owner-a'), true);
    assert.equal(await store.releaseSlot!(key, 'owner-c'), true);
  });

  test('concurrency: keys are independent', async () => {
    const l = limiter({ limit: 1, ttl: '10s' });
    assert.equal((await l.acquire('x')).allowed, true);
    assert.equal((await l.acquire('y')).allowed, true);
    assert.equal((await l.acquire('x')).allowed, false);
    assert.equal((await l.acquire('y')).allowed, false);
  });
}
