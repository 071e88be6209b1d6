// Circuit breakers per failure scope (Store.failureScope, the node of a Redis Cluster): a lost node sends only its keys to the
// fallback; keys of healthy nodes keep reaching the store. Real MemoryStores behind a switch per scope.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CircuitBreaker } from '../../src/guards/breaker.js';
import { consumeAll, ManualClock, MemoryStore, RateLimiter, type Operation, type Outcome, type Store } from '../../src/index.js';

/** A MemoryStore split in two scopes by the key's last character ("…a" on node-a, else node-b); calls on a failing scope reject. */
class TwoNodeStore implements Store {
  readonly name = 'two-node';
  readonly failing = new Set<string>();
  readonly calls = new Map<string, number>();
  private readonly inner: MemoryStore;

  constructor(clock: () => number) {
    this.inner = new MemoryStore({ clock, sweepIntervalMs: 0 });
  }

  failureScope(key: string): string {
    return key.endsWith('a') ? 'node-a' : 'node-b';
  }

  private call<T>(keys: readonly string[], run: () => Promise<T>): Promise<T> {
    const scopes = new Set(keys.map((k) => this.failureScope(k)));
    for (const s of scopes) this.calls.set(s, (this.calls.get(s) ?? 0) + 1);
    for (const s of scopes) if (this.failing.has(s)) return Promise.reject(new Error(`connection to ${s} refused`));
    return run();
  }

  apply(operation: Operation): Promise<Outcome> {
    return this.call([operation.key], () => this.inner.apply(operation));
  }

  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    return this.call(
      operations.map((o) => o.key),
      () => this.inner.consumeAll(operations),
    );
  }
}

describe('circuit breakers per failure scope', () => {
  it('forScope keeps one breaker per scope, each with its own count and cooldown; anyOpen and nextRetryInMs see them all', () => {
    const parent = new CircuitBreaker({ failureThreshold: 2, cooldownMs: 1000 });
    assert.equal(parent.forScope(undefined), parent);
    const a = parent.forScope('node-a');
    assert.equal(parent.forScope('node-a'), a, 'the same breaker for the same scope');
    a.failure(0);
    a.failure(10);
    assert.equal(a.isOpen(20), true);
    assert.equal(parent.forScope('node-b').isOpen(20), false, 'another scope is not opened');
    assert.equal(parent.isOpen(20), false, "the limiter's own breaker is not opened");
    assert.equal(parent.anyOpen(20), true);
    assert.equal(parent.nextRetryInMs(20), 990);
    assert.equal(parent.anyOpen(1020), false, 'after the cooldown the next call probes');
  });

  it('one lost node no longer sends every key of the policy to the fallback: keys of the healthy node keep reaching the store', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new TwoNodeStore(clock.now);
    const limiter = new RateLimiter({
      store,
      clock: clock.now,
      limit: 100,
      window: 60_000,
      prefix: 'p',
      onStoreFailure: 'fail-open',
      breaker: { failureThreshold: 3, cooldown: 5000 },
    });
    store.failing.add('node-a');
    for (let i = 0; i < 3; i++) assert.equal((await limiter.consume('key-a')).source, 'fail-open');
    const callsToA = store.calls.get('node-a');
    // Node a's breaker is open: its keys no longer wait on the store.
    for (let i = 0; i < 5; i++) assert.equal((await limiter.consume('other-a')).source, 'fail-open');
    assert.equal(store.calls.get('node-a'), callsToA, 'no call reaches the lost node while its breaker is open');
    // Node b's keys are decided by the store all along.
    for (let i = 0; i < 5; i++) assert.equal((await limiter.consume('key-b')).source, 'store');
    assert.equal(limiter.circuitOpen(), true, 'readiness sees a breaker open');
    assert.equal(limiter.health().breaker, 'open');
    // Back after the cooldown: the probe finds the node again.
    store.failing.delete('node-a');
    clock.advance(5000);
    assert.equal((await limiter.consume('key-a')).source, 'store');
    assert.equal(limiter.circuitOpen(), false);
  });

  it("a composite whose parts are on a lost node opens that node's breakers only", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new TwoNodeStore(clock.now);
    const options = {
      store,
      clock: clock.now,
      window: 60_000,
      onStoreFailure: 'fail-open' as const,
      breaker: { failureThreshold: 2, cooldown: 5000 },
    };
    const perKey = new RateLimiter({ ...options, limit: 50, prefix: 'k' });
    const perOrg = new RateLimiter({ ...options, limit: 500, prefix: 'o' });
    store.failing.add('node-a');
    for (let i = 0; i < 2; i++) {
      const d = await consumeAll([
        { limiter: perKey, key: 'user-a' },
        { limiter: perOrg, key: 'org-a' },
      ]);
      assert.equal(d.parts[0]!.source, 'fail-open');
    }
    const healthy = await consumeAll([
      { limiter: perKey, key: 'user-b' },
      { limiter: perOrg, key: 'org-b' },
    ]);
    assert.deepEqual(
      healthy.parts.map((p) => p?.source),
      ['store', 'store'],
    );
    assert.equal((await perKey.consume('user-b')).source, 'store');
    assert.equal((await perKey.consume('user-a')).source, 'fail-open');
  });
});
