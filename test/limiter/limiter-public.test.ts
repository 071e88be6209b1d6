// RateLimiter's public health(), forgetMemoryBlock() and forgetMemoryBlocks(): what the gateway's dashboard and admin API read instead of the library's internals.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, MemoryStore, RateLimiter } from '../../src/index.js';
import { FlakyStore } from '../support/flaky-store.js';

test('LIMITER_INTERNALS: the dashboard reads a limiter’s breaker and fallback through health()', async () => {
  const clock = new ManualClock(1_000_000);
  const store = new FlakyStore(clock.now);
  const limiter = new RateLimiter({
    limit: 5,
    window: '1m',
    store,
    clock: clock.now,
    onStoreFailure: 'fail-open',
    breaker: { failureThreshold: 2, cooldown: '2s' },
  });
  const rows: Array<{ step: string; breaker: string; retryInMs: number; fallback: string }> = [];
  const read = (step: string): void => void rows.push({ step, ...limiter.health() });

  read('store up');
  store.failing = true;
  await limiter.consume('k');
  await limiter.consume('k');
  read('after 2 failures');
  clock.advance(2000);
  read('cooldown over');
  store.failing = false;
  const probe = limiter.consume('k');
  read('probe out');
  await probe;
  read('probe answered');
  console.table(rows);

  assert.deepEqual(rows, [
    { step: 'store up', breaker: 'closed', retryInMs: 0, fallback: 'fail-open' },
    { step: 'after 2 failures', breaker: 'open', retryInMs: 2000, fallback: 'fail-open' },
    { step: 'cooldown over', breaker: 'closed', retryInMs: 0, fallback: 'fail-open' },
    { step: 'probe out', breaker: 'probing', retryInMs: 0, fallback: 'fail-open' },
    { step: 'probe answered', breaker: 'closed', retryInMs: 0, fallback: 'fail-open' },
  ]);

  const insured = new RateLimiter({ limit: 5, window: '1m', insurance: new RateLimiter({ limit: 5, window: '1m' }), breaker: false });
  assert.deepEqual(insured.health(), { breaker: 'off', retryInMs: 0, fallback: 'insurance' });
  assert.equal(new RateLimiter({ limit: 5, window: '1m' }).health().fallback, 'reject');
});

test('LIMITER_INTERNALS: a reset made by another process reaches this one’s in-memory block through forgetMemoryBlock()', async () => {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const options = { limit: 2, window: '1m', store, prefix: 'shared', clock: clock.now } as const;
  const here = new RateLimiter({ ...options, inMemoryBlock: true });
  const elsewhere = new RateLimiter(options);

  await here.consume('k');
  await here.consume('k');
  assert.equal((await here.consume('k')).source, 'memory-block', 'the spent key is refused from memory');
  await elsewhere.reset('k');
  assert.equal((await here.consume('k')).source, 'memory-block', 'the other process’s reset is not seen here');
  assert.ok((await here.inspect('k')).memoryBlockMs > 0);

  here.forgetMemoryBlock('k');
  assert.equal((await here.inspect('k')).memoryBlockMs, 0);
  const after = await here.consume('k');
  assert.equal(after.allowed, true, 'the next consume asks the store, which was reset');
  assert.equal(after.source, 'store');
});

test('forgetMemoryBlocks(): after a missed announcement every key’s in-memory block goes; a key still over its limit is blocked again by the store', async () => {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const options = { limit: 1, window: '1m', store, prefix: 'shared', clock: clock.now } as const;
  const here = new RateLimiter({ ...options, inMemoryBlock: true });
  const elsewhere = new RateLimiter(options);
  for (const key of ['a', 'b']) {
    await here.consume(key);
    assert.equal((await here.consume(key)).source, 'memory-block');
  }
  await elsewhere.reset('a');
  here.forgetMemoryBlocks();
  assert.deepEqual([(await here.inspect('a')).memoryBlockMs, (await here.inspect('b')).memoryBlockMs], [0, 0]);
  const [a, b] = [await here.consume('a'), await here.consume('b')];
  assert.deepEqual([a.allowed, a.source], [true, 'store'], 'the reset key is admitted by the store');
  assert.deepEqual([b.allowed, b.source], [false, 'store'], 'the other asks the store once, which still refuses');
  assert.equal((await here.consume('b')).source, 'memory-block', 'and is blocked in memory again');
});

test('a limiter given a clock and no store: its default MemoryStore counts on that clock (it kept wall-clock windows)', async () => {
  const clock = new ManualClock(Date.now() + 86_400_000);
  const limiter = new RateLimiter({ limit: 2, window: '1m', clock: clock.now });
  assert.deepEqual(
    [(await limiter.consume('k')).allowed, (await limiter.consume('k')).allowed, (await limiter.consume('k')).allowed],
    [true, true, false],
  );
  const refused = await limiter.consume('k');
  assert.equal(refused.resetMs, 60_000, 'the window ends a minute after the manual clock’s now');
  clock.advance(60_000);
  assert.equal((await limiter.consume('k')).allowed, true, 'a new window on the limiter’s clock');
});
