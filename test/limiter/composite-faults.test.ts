// consumeAll while the store fails: the parts' fallbacks decide together (insurance all or nothing, fail-open, fail-closed, reject) and the breakers open.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { consumeAll, ErrorCode, ManualClock, MemoryStore, RateLimiter, type Store } from '../../src/index.js';
import { FlakyStore } from '../support/flaky-store.js';

test('composite on a failing store: the insurance limiters decide all or nothing on their own store', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const spare = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const make = (limit: number, insuredLimit: number) =>
    new RateLimiter({
      limit,
      window: '1m',
      store,
      clock: clock.now,
      breaker: false,
      prefix: `p${limit}`,
      insurance: new RateLimiter({ limit: insuredLimit, window: '1m', store: spare, clock: clock.now, prefix: `i${insuredLimit}` }),
    });
  const user = make(10, 5);
  const org = make(20, 2);
  store.failing = true;
  const parts = [
    { limiter: user, key: 'u' },
    { limiter: org, key: 'o' },
  ];
  const decisions = [await consumeAll(parts), await consumeAll(parts), await consumeAll(parts)];
  assert.deepEqual(
    decisions.map((d) => [d.allowed, d.source]),
    [
      [true, 'insurance'],
      [true, 'insurance'],
      [false, 'insurance'],
    ],
  );
  // The refused third spent nothing on the user's insurance either.
  assert.equal(decisions[2]!.parts[0]!.remaining, 3);
  assert.equal(decisions[2]!.decisive, 1);
  store.failing = false;
  const back = await consumeAll(parts);
  assert.deepEqual([back.allowed, back.source, back.parts[0]!.remaining], [true, 'store', 9]);
});

test('composite on a failing store: a part without insurance that rejects makes the call reject with the store error', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const open = new RateLimiter({ limit: 5, window: '1s', store, clock: clock.now, onStoreFailure: 'fail-open', prefix: 'a' });
  const strict = new RateLimiter({ limit: 5, window: '1s', store, clock: clock.now, prefix: 'b' });
  store.failing = true;
  await assert.rejects(
    consumeAll([
      { limiter: open, key: 'k' },
      { limiter: strict, key: 'k' },
    ]),
    { code: ErrorCode.STORE_ERROR },
  );
});

test('composite on a failing store: fail-closed refuses the whole, fail-open parts alone admit', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const open = new RateLimiter({ limit: 5, window: '1s', store, clock: clock.now, onStoreFailure: 'fail-open', prefix: 'a' });
  const closed = new RateLimiter({ limit: 5, window: '1s', store, clock: clock.now, onStoreFailure: 'fail-closed', prefix: 'b' });
  store.failing = true;
  const refused = await consumeAll([
    { limiter: open, key: 'k' },
    { limiter: closed, key: 'k' },
  ]);
  assert.deepEqual([refused.allowed, refused.source, refused.decisive], [false, 'fail-closed', 1]);
  assert.ok(refused.retryAfterMs > 0);
  const admitted = await consumeAll([{ limiter: open, key: 'k' }]);
  assert.deepEqual([admitted.allowed, admitted.source, admitted.remaining], [true, 'fail-open', 5]);
});

test('composite on a failing store: every part breaker opens, and then the store is not called', async () => {
  const clock = new ManualClock();
  const store = new FlakyStore(clock.now);
  const breaker = { failureThreshold: 2, cooldown: '1s' };
  const a = new RateLimiter({ limit: 5, window: '1s', store, clock: clock.now, onStoreFailure: 'fail-open', breaker, prefix: 'a' });
  const b = new RateLimiter({ limit: 5, window: '1s', store, clock: clock.now, onStoreFailure: 'fail-open', breaker, prefix: 'b' });
  const parts = [
    { limiter: a, key: 'k' },
    { limiter: b, key: 'k' },
  ];
  store.failing = true;
  await consumeAll(parts);
  await consumeAll(parts);
  assert.equal(a.circuitOpen(), true);
  assert.equal(b.circuitOpen(), true);
  const calls = store.calls;
  assert.equal((await consumeAll(parts)).source, 'fail-open');
  assert.equal(store.calls, calls);
  // After the cooldown one composite probes; the store answers and both circuits close.
  store.failing = false;
  clock.advance(1000);
  const probe = await consumeAll(parts);
  assert.equal(probe.source, 'store');
  assert.equal(a.circuitOpen() || b.circuitOpen(), false);
});

test('composite on a store without consumeAll: COMPOSITE_UNSUPPORTED, before any call', async () => {
  const inner = new MemoryStore();
  let calls = 0;
  const bare: Store = {
    name: 'bare',
    apply: (operation) => (calls++, inner.apply(operation)),
  };
  const l = new RateLimiter({ limit: 5, window: '1s', store: bare });
  await assert.rejects(consumeAll([{ limiter: l, key: 'k' }]), { code: ErrorCode.COMPOSITE_UNSUPPORTED });
  assert.equal(calls, 0);
  await inner.close();
});
