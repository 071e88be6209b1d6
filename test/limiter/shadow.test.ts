// Shadow mode (the dry run) of RateLimiter and ConcurrencyLimiter: decides and counts as enforcing would, never refuses; on memory and a real Redis.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { ConcurrencyLimiter, ErrorCode, ManualClock, MemoryStore, RateLimiter, instrumentLimiter, type Store } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { otelSdk, valueWhere } from '../support/otel.js';

let server: RedisServer;
let client: Redis;
before(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: server.host });
});
after(async () => {
  client.disconnect();
  await server.stop();
});

let unique = 0;
const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['redis', () => new RedisStore({ client })],
];

for (const [name, makeStore] of stores) {
  describe(`shadow mode on ${name}`, () => {
    test('a consume the policy would refuse is admitted, marked shadowLimited with the refusal’s numbers, and spends nothing', async () => {
      const limiter = new RateLimiter({
        limit: 2,
        window: '1m',
        store: makeStore(),
        prefix: `shadow-${++unique}-${process.pid}`,
        shadow: true,
      });
      const decisions = [];
      for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('k'));
      assert.deepEqual(
        decisions.map((d) => [d.allowed, d.remaining, d.shadowLimited === true]),
        [
          [true, 1, false],
          [true, 0, false],
          [true, 0, true],
          [true, 0, true],
        ],
      );
      assert.ok(decisions[2]!.retryAfterMs > 0 && decisions[2]!.retryAfterMs <= 60_000, 'the wait the refusal would have asked');
      assert.equal(decisions[0]!.shadowLimited, undefined, 'absent, not false, on an admission');
      // Counted exactly as an enforcing limiter counts: two units, the refusals none.
      const peek = await limiter.peek('k');
      assert.deepEqual([peek.allowed, peek.remaining], [false, 0], 'peek reports the real state');
    });

    test('consumeNow and the in-memory block answer marked too, and the block still spares the store', async () => {
      const limiter = new RateLimiter({
        limit: 1,
        window: '1m',
        store: makeStore(),
        prefix: `shadow-${++unique}-${process.pid}`,
        shadow: true,
        inMemoryBlock: true,
      });
      assert.equal((await limiter.consume('k')).shadowLimited, undefined);
      const now = limiter.consumeNow('k');
      assert.ok(now !== undefined, 'the block knows the key is spent');
      assert.deepEqual([now.allowed, now.shadowLimited, now.source], [true, true, 'memory-block']);
      const later = await limiter.consume('k');
      assert.deepEqual([later.allowed, later.shadowLimited, later.source], [true, true, 'memory-block']);
    });

    test('a reserve the policy would refuse holds nothing: commit and cancel settle nothing', async () => {
      const limiter = new RateLimiter({
        limit: 5,
        window: '1m',
        store: makeStore(),
        prefix: `shadow-${++unique}-${process.pid}`,
        shadow: true,
      });
      await limiter.consume('k', 5);
      const reservation = await limiter.reserve('k', 3);
      assert.deepEqual([reservation.allowed, reservation.decision.shadowLimited], [true, true]);
      assert.deepEqual(await reservation.commit(1), { status: 'settled', charged: 0 });
      assert.equal((await limiter.peek('k')).remaining, 0, 'no give-back of units never taken');
    });

    test('ConcurrencyLimiter shadow: with no slot free the acquire goes on holding nothing', async () => {
      const slots = new ConcurrencyLimiter({
        limit: 1,
        store: makeStore(),
        prefix: `shadow-slots-${++unique}-${process.pid}`,
        shadow: true,
      });
      const first = await slots.acquire('k');
      assert.deepEqual([first.allowed, first.shadowLimited], [true, undefined]);
      const second = await slots.acquire('k');
      assert.deepEqual([second.allowed, second.shadowLimited, second.inFlight], [true, true, 1]);
      assert.equal(await second.release(), false, 'it held nothing to free');
      assert.equal(await first.release(), true);
      const third = await slots.acquire('k');
      assert.deepEqual([third.allowed, third.shadowLimited], [true, undefined]);
      await third.release();
    });
  });
}

test('shadow: bad values and conflicts are typed errors', () => {
  assert.throws(() => new RateLimiter({ limit: 1, window: '1s', shadow: 'yes' as never }), { code: ErrorCode.INVALID_OPTIONS });
  assert.throws(() => new RateLimiter({ limit: 1, window: '1s', shadow: true, wait: { timeout: '1s' } }), {
    code: ErrorCode.CONFLICTING_OPTIONS,
    message: /shadow: true never refuses, so no call of it waits/,
  });
  assert.throws(() => new RateLimiter({ limit: 1, window: '1s', shadow: true, execEvenly: true }), { code: ErrorCode.CONFLICTING_OPTIONS });
  assert.throws(() => new ConcurrencyLimiter({ limit: 1, shadow: true, wait: { timeout: '1s' } }), { code: ErrorCode.CONFLICTING_OPTIONS });
  assert.throws(() => new RateLimiter({ limit: 1, window: '1s', dryRun: true } as never), { code: ErrorCode.UNKNOWN_OPTION });
  // Off is the default, and shadow: false is off.
  assert.equal(new RateLimiter({ limit: 1, window: '1s', shadow: false }).shadow, false);
});

test('instrumentLimiter counts a shadow limiter’s would-be refusals under outcome shadow_limited', async () => {
  const sdk = otelSdk();
  try {
    const clock = new ManualClock(1_000_000);
    const limiter = new RateLimiter({ limit: 1, window: '1m', clock: clock.now, shadow: true, prefix: 'otel-shadow' });
    instrumentLimiter(limiter, { meter: sdk.meter, name: 'new-limit' });
    for (let i = 0; i < 3; i++) assert.equal((await limiter.consume('k')).allowed, true);
    const decisions = (await sdk.metrics()).get('floodgate.decisions');
    assert.equal(valueWhere(decisions, { 'floodgate.limiter': 'new-limit', 'floodgate.outcome': 'allowed' }), 1);
    assert.equal(valueWhere(decisions, { 'floodgate.limiter': 'new-limit', 'floodgate.outcome': 'shadow_limited' }), 2);
    assert.equal(valueWhere(decisions, { 'floodgate.limiter': 'new-limit', 'floodgate.outcome': 'limited' }), undefined);
  } finally {
    await sdk.shutdown();
  }
});
