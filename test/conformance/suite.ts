// The one conformance suite every store must pass: the same behaviour through RateLimiter, driven by a ManualClock.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ManualClock,
  RateLimiter,
  type Algorithm,
  type Clock,
  type Operation,
  type Outcome,
  type RateLimiterOptions,
  type Store,
} from '../../src/index.js';
import { compositeCases } from './composite.js';
import { reservationCases } from './reservation.js';
import { overrideCases } from './overrides.js';
import { concurrencyCases } from './concurrency.js';
import { calendarCases } from './calendar.js';
import { burstCases } from './burst.js';
import { outboundCases } from './outbound.js';
import { failureScopeCases, type FailureScopeExpectation, type ScopeReader } from './failure-scope.js';

/** What a store factory returns: the store (built with the given clock) and how to dispose of it. */
export interface ConformanceTarget {
  store: Store;
  /** How the store's calls fail: as one (`absent`, `shared`) or per Redis Cluster master; the failureScope cases assert it. */
  failureScope: FailureScopeExpectation;
  /**
   * The scopes of keys as the store that really serves the calls answers them, when `store` only forwards to one in another
   * process (failureScope is synchronous, so a forwarder cannot show it). Without it the suite reads `store.failureScope`.
   */
  scopes?: ScopeReader;
  teardown(): Promise<void>;
}

/** Builds a store whose notion of "now" is `clock`. Called once per suite run. */
export type ConformanceFactory = (clock: Clock) => Promise<ConformanceTarget>;

/** A store wrapper that counts calls, to prove the in-memory block spares the store. */
class CountingStore implements Store {
  readonly name: string;
  calls = 0;
  /** Of those, the asynchronous ones (apply, consumeAll): the calls that may wait on a remote store. */
  asks = 0;
  constructor(private readonly inner: Store) {
    this.name = inner.name;
  }
  apply(operation: Operation): Promise<Outcome> {
    this.calls++;
    this.asks++;
    return this.inner.apply(operation);
  }
  /** Present exactly when the inner store has it, so limiters see the store's real shape. */
  declare applyNow?: (operation: Operation) => Outcome | undefined;
  declare consumeAll?: (operations: readonly Operation[]) => Promise<Outcome[]>;
  declare consumeAllNow?: (operations: readonly Operation[]) => Outcome[] | undefined;
  declare failureScope?: (key: string) => string | undefined;
  static wrap(inner: Store): CountingStore {
    const counting = new CountingStore(inner);
    if (inner.applyNow !== undefined) {
      counting.applyNow = (operation) => {
        counting.calls++;
        return inner.applyNow!(operation);
      };
    }
    if (inner.consumeAll !== undefined) {
      counting.consumeAll = (operations) => {
        counting.calls++;
        counting.asks++;
        return inner.consumeAll!(operations);
      };
    }
    // A Cluster store's limiters keep one breaker per master only if they see its failureScope.
    if (inner.failureScope !== undefined) counting.failureScope = inner.failureScope.bind(inner);
    // Slot calls are not counted: only the in-memory block's savings are measured.
    for (const name of ['acquireSlot', 'releaseSlot', 'renewSlot'] as const) {
      if (inner[name] !== undefined) (counting as Store)[name] = inner[name].bind(inner) as never;
    }
    if (inner.consumeAllNow !== undefined) {
      counting.consumeAllNow = (operations) => {
        counting.calls++;
        return inner.consumeAllNow!(operations);
      };
    }
    return counting;
  }
}

const ALL: Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'];
let unique = 0;

/**
 * Registers the conformance suite for one store configuration.
 * Each test uses its own prefix, so one store instance serves the whole suite.
 */
export function runConformance(label: string, factory: ConformanceFactory): void {
  describe(`conformance: ${label}`, () => {
    // Aligned to a whole day, so sliding windows start at predictable times.
    const clock = new ManualClock(1_700_006_400_000);
    let target: ConformanceTarget;
    let counting: CountingStore;

    before(async () => {
      target = await factory(clock.now);
      counting = CountingStore.wrap(target.store);
    });
    after(async () => {
      await target.teardown();
    });

    const limiter = (options: Omit<RateLimiterOptions, 'store'>) =>
      new RateLimiter({ prefix: `c${++unique}:${process.pid}`, clock: clock.now, ...options, store: counting });

    compositeCases({ clock, limiter, calls: () => counting.calls });
    reservationCases({ clock, limiter });
    overrideCases({ clock, limiter });
    concurrencyCases({ clock, store: () => counting });
    calendarCases({ clock, limiter });
    burstCases({ clock, limiter });
    outboundCases({ clock, store: () => counting });
    failureScopeCases({
      expectation: () => target.failureScope,
      scopes: async (keys) => {
        if (target.scopes !== undefined) return target.scopes(keys);
        const { store } = target;
        return store.failureScope === undefined ? undefined : keys.map((k) => store.failureScope!(k));
      },
      limiterStore: () => counting,
      store: () => target.store,
      limiter,
      asks: () => counting.asks,
    });

    test('fixed window admits the limit, refuses the rest without spending, and opens at the first consume', async () => {
      const l = limiter({ limit: 3, window: 1000 });
      clock.advance(137); // not aligned: the window starts at the first consume
      for (let i = 2; i >= 0; i--) {
        const d = await l.consume('k');
        assert.equal(d.allowed, true);
        assert.equal(d.remaining, i);
        assert.equal(d.resetMs, 1000);
        assert.equal(d.retryAfterMs, 0);
        assert.equal(d.limit, 3);
      }
      clock.advance(400);
      const refused = await l.consume('k');
      assert.deepEqual(
        { ...refused },
        { allowed: false, limit: 3, windowMs: 1000, remaining: 0, resetMs: 600, retryAfterMs: 600, source: 'store' },
      );
      // A refused consume spent nothing: one reward makes exactly one unit available.
      await l.reward('k', 1);
      assert.equal((await l.consume('k')).allowed, true);
      assert.equal((await l.consume('k')).allowed, false);
      clock.advance(599);
      assert.equal((await l.consume('k')).allowed, false);
      clock.advance(1);
      const fresh = await l.consume('k');
      assert.equal(fresh.allowed, true);
      assert.equal(fresh.remaining, 2);
      assert.equal(fresh.resetMs, 1000);
    });

    test('costs above one, and a cost that does not fit leaves the rest usable', async () => {
      const l = limiter({ limit: 10, window: '1s' });
      assert.equal((await l.consume('k', 7)).remaining, 3);
      const big = await l.consume('k', 4);
      assert.equal(big.allowed, false);
      assert.equal(big.remaining, 3);
      assert.equal((await l.consume('k', 3)).remaining, 0);
    });

    test('keys are independent, including keys with braces, colons and non-ASCII', async () => {
      const l = limiter({ limit: 1, window: '1s' });
      for (const key of ['a', 'b', '{x}', '}y{', '~z', 'a:b', 'ключ', 'x'.repeat(300)]) {
        assert.equal((await l.consume(key)).allowed, true, key);
        assert.equal((await l.consume(key)).allowed, false, key);
      }
    });

    test('peek does not spend', async () => {
      const l = limiter({ limit: 2, window: '1s' });
      assert.deepEqual(
        { ...(await l.peek('k')) },
        { allowed: true, limit: 2, windowMs: 1000, remaining: 2, resetMs: 0, retryAfterMs: 0, source: 'store' },
      );
      await l.consume('k');
      const p = await l.peek('k');
      assert.equal(p.remaining, 1);
      assert.equal((await l.peek('k')).remaining, 1);
      await l.consume('k');
      const empty = await l.peek('k');
      assert.equal(empty.allowed, false);
      assert.equal(empty.remaining, 0);
      assert.equal(empty.retryAfterMs, 1000);
    });

    test('penalty spends past the limit and reward gives back', async () => {
      const l = limiter({ limit: 5, window: '1s' });
      assert.equal((await l.penalty('k', 7)).remaining, 0);
      assert.equal((await l.consume('k')).allowed, false);
      assert.equal((await l.reward('k', 3)).remaining, 1);
      assert.equal((await l.consume('k')).allowed, true);
      assert.equal((await l.reward('k', 100)).remaining, 5);
    });

    test('blockDuration blocks the key in the store past the window end', async () => {
      const l = limiter({ limit: 2, window: 1000, blockDuration: 5000 });
      await l.consume('k');
      await l.consume('k');
      const over = await l.consume('k');
      assert.equal(over.allowed, false);
      assert.equal(over.retryAfterMs, 5000);
      assert.equal(over.resetMs, 5000);
      clock.advance(2000); // window over, block not
      const still = await l.consume('k');
      assert.equal(still.allowed, false);
      assert.equal(still.retryAfterMs, 3000);
      assert.equal((await l.peek('k')).allowed, false);
      // Another limiter instance (another process) on the same store sees the block.
      const other = new RateLimiter({ prefix: l.prefix, clock: clock.now, limit: 2, window: 1000, blockDuration: 5000, store: counting });
      assert.equal((await other.consume('k')).allowed, false);
      clock.advance(3000);
      assert.equal((await l.consume('k')).allowed, true);
    });

    test('block(key, ms), block forever and reset', async () => {
      const l = limiter({ limit: 5, window: '1s' });
      const b = await l.block('k', '2s');
      assert.equal(b.allowed, false);
      assert.equal(b.retryAfterMs, 2000);
      assert.equal((await l.consume('k')).retryAfterMs, 2000);
      clock.advance(2000);
      assert.equal((await l.consume('k')).allowed, true);
      const forever = await l.block('k', 'forever');
      assert.equal(forever.retryAfterMs, Infinity);
      clock.advance(86_400_000);
      const stillBlocked = await l.consume('k');
      assert.equal(stillBlocked.allowed, false);
      assert.equal(stillBlocked.retryAfterMs, Infinity);
      await l.reset('k');
      const after = await l.consume('k');
      assert.equal(after.allowed, true);
      assert.equal(after.remaining, 4);
    });

    for (const algorithm of ALL) {
      test(`${algorithm}: unblock ends a block (forever or blockDuration) and keeps the count, in the store and in memory`, async () => {
        const l = limiter({ limit: 3, window: '10s', algorithm, blockDuration: '1m', inMemoryBlock: true });
        await l.consume('k');
        await l.consume('k');
        await l.block('k', 'forever');
        assert.equal((await l.consume('k')).allowed, false);
        const seen = await l.inspect('k');
        assert.equal(seen.store.allowed, false);
        assert.equal(seen.store.retryAfterMs, Infinity);
        const after = await l.unblock('k');
        assert.equal(after.allowed, true);
        assert.equal(after.remaining, 1, 'the two units spent before the block stay spent');
        const d = await l.consume('k');
        assert.equal(d.allowed, true);
        assert.equal(d.remaining, 0);
        // Over the limit: blockDuration blocks in the store and the in-memory block refuses without asking.
        assert.equal((await l.consume('k')).allowed, false);
        const blocked = await l.consume('k');
        assert.equal(blocked.source, 'memory-block');
        assert.ok((await l.inspect('k')).memoryBlockMs > 0);
        const unblocked = await l.unblock('k');
        assert.equal(unblocked.remaining, 0, 'still over its limit: unblock is no reset');
        assert.equal((await l.inspect('k')).memoryBlockMs, 0);
        // Another process on the same store sees the block gone too.
        const other = new RateLimiter({
          prefix: l.prefix,
          clock: clock.now,
          limit: 3,
          window: '10s',
          algorithm,
          blockDuration: '1m',
          store: counting,
        });
        // Two windows: a sliding window still weighs the previous one after one.
        clock.advance(20_000);
        assert.equal((await other.consume('k')).allowed, true, 'admitted once the window allows, not a minute later');
      });
    }

    test('unblock of a key never seen or not blocked changes nothing; inspect spends nothing', async () => {
      const l = limiter({ limit: 2, window: '1s' });
      assert.equal((await l.unblock('fresh')).remaining, 2);
      await l.consume('k');
      assert.equal((await l.unblock('k')).remaining, 1);
      const seen = await l.inspect('k');
      assert.equal(seen.store.remaining, 1);
      assert.equal(seen.memoryBlockMs, 0);
      assert.equal((await l.inspect('k')).store.remaining, 1);
      await assert.rejects(l.unblock(''), { code: 'FLOODGATE_INVALID_KEY' });
    });

    test('sub-second windows', async () => {
      for (const algorithm of ALL) {
        const l = limiter({ limit: 2, window: '50ms', algorithm });
        assert.equal((await l.consume('k')).allowed, true, algorithm);
        assert.equal((await l.consume('k')).allowed, true, algorithm);
        const refused = await l.consume('k');
        assert.equal(refused.allowed, false, algorithm);
        assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 100, `${algorithm}: ${refused.retryAfterMs}`);
        clock.advance(100);
        assert.equal((await l.consume('k')).allowed, true, algorithm);
      }
    });

    for (const algorithm of ALL) {
      test(`${algorithm}: admits exactly the limit in a burst and recovers with time`, async () => {
        const l = limiter({ limit: 4, window: 1000, algorithm });
        let admitted = 0;
        for (let i = 0; i < 10; i++) if ((await l.consume('k')).allowed) admitted++;
        assert.equal(admitted, 4);
        const refused = await l.consume('k');
        assert.equal(refused.allowed, false);
        assert.ok(refused.retryAfterMs > 0);
        clock.advance(refused.retryAfterMs - 1);
        assert.equal((await l.consume('k')).allowed, false, 'one ms before retryAfter');
        clock.advance(1);
        assert.equal((await l.consume('k')).allowed, true, 'at retryAfter');
        clock.advance(3000);
        assert.equal((await l.peek('k')).remaining, 4);
      });

      test(`${algorithm}: in-memory block answers without the store until the quota returns`, async () => {
        const l = limiter({ limit: 3, window: 1000, algorithm, inMemoryBlock: true });
        for (let i = 0; i < 3; i++) assert.equal((await l.consume('k')).allowed, true);
        const before = counting.calls;
        let wait = 0;
        for (let i = 0; i < 50; i++) {
          const d = await l.consume('k');
          assert.equal(d.allowed, false);
          assert.equal(d.source, 'memory-block');
          assert.ok(d.retryAfterMs > 0);
          wait = d.retryAfterMs;
        }
        assert.equal((await l.peek('k')).source, 'memory-block');
        assert.equal(counting.calls, before, 'no store calls while blocked in memory');
        clock.advance(wait);
        const d = await l.consume('k');
        assert.equal(d.allowed, true);
        assert.equal(d.source, 'store');
      });
    }

    test('token bucket refills continuously and reports exact retry times', async () => {
      const l = limiter({ limit: 3, window: 3000, algorithm: 'token-bucket' });
      await l.consume('k', 3);
      const r = await l.consume('k', 2);
      assert.equal(r.allowed, false);
      assert.equal(r.retryAfterMs, 2000);
      assert.equal(r.resetMs, 3000);
      clock.advance(1000);
      assert.equal((await l.consume('k')).remaining, 0);
    });

    test('sliding log never admits more than the limit in any window', async () => {
      const l = limiter({ limit: 3, window: 1000, algorithm: 'sliding-log' });
      await l.consume('k');
      clock.advance(600);
      await l.consume('k');
      await l.consume('k');
      const r = await l.consume('k');
      assert.equal(r.allowed, false);
      assert.equal(r.retryAfterMs, 400);
      clock.advance(400);
      assert.equal((await l.consume('k')).allowed, true);
      assert.equal((await l.consume('k')).allowed, false);
    });

    test('in-memory block honours blockDuration', async () => {
      const l = limiter({ limit: 1, window: 1000, blockDuration: 4000, inMemoryBlock: true });
      await l.consume('k');
      const over = await l.consume('k');
      assert.equal(over.source, 'store');
      assert.equal(over.retryAfterMs, 4000);
      clock.advance(2000);
      const d = await l.consume('k');
      assert.equal(d.source, 'memory-block');
      assert.equal(d.retryAfterMs, 2000);
      clock.advance(2000);
      assert.equal((await l.consume('k')).allowed, true);
    });

    test('consumeNow decides as consume does when it can, and spends nothing when it cannot', async () => {
      const l = limiter({ limit: 3, window: 1000, inMemoryBlock: true });
      const first = l.consumeNow('k');
      // A store that cannot answer now leaves the call to consume, having spent nothing.
      if (first !== undefined)
        assert.deepEqual(first, { allowed: true, limit: 3, windowMs: 1000, remaining: 2, resetMs: 1000, retryAfterMs: 0, source: 'store' });
      await l.consume('k', first === undefined ? 3 : 2);
      assert.equal((await l.peek('k')).remaining, 0);
      // Now the in-memory block knows the key, on every store.
      const refused = l.consumeNow('k');
      assert.equal(refused?.allowed, false);
      assert.equal(refused?.source, 'memory-block');
      assert.throws(() => l.consumeNow('k', 0), { code: 'FLOODGATE_INVALID_COST' });
    });

    test('concurrent consumes on one key admit exactly the limit', async () => {
      const l = limiter({ limit: 25, window: '10s' });
      const decisions = await Promise.all(Array.from({ length: 100 }, () => l.consume('hot')));
      assert.equal(decisions.filter((d) => d.allowed).length, 25);
      const remainders = decisions
        .filter((d) => d.allowed)
        .map((d) => d.remaining)
        .sort((a, b) => a - b);
      assert.deepEqual(
        remainders,
        Array.from({ length: 25 }, (_, i) => i),
      );
    });
  });
}
