// A penalty far beyond the limit on a sliding log, against a real Redis and the memory store: the log stays bounded by the limit and the key is refused for a window, as with any larger penalty.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { ErrorCode, MemoryStore, RateLimiter, isFloodgateError } from '../../src/index.js';
import { RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { redisFixture } from '../support/redis-clients.js';

let client: Redis;
redisFixture((open) => {
  client = open();
});

test('regression: penalty(1_000_000) on a Redis sliding log stores at most limit entries, refuses the key for a window, and Redis stays responsive', async () => {
  const limiter = new RateLimiter({ store: new RedisStore({ client }), algorithm: 'sliding-log', limit: 100, window: '1m', prefix: 'pen' });
  await limiter.consume('k', 3);
  const d = await limiter.penalty('k', 1_000_000);
  assert.equal(d.allowed, false);
  assert.equal(d.remaining, 0);
  // Before the bound, the log held 1 000 003 timestamps (and the script blocked Redis for about 1/3 s).
  const length = await client.llen(redisKeys('pen:k').log);
  assert.ok(length <= 103, `the log holds ${length} entries`);
  assert.equal(await client.ping(), 'PONG');
  const refused = await limiter.consume('k');
  assert.equal(refused.allowed, false);
  assert.ok(
    refused.retryAfterMs > 59_000 && refused.retryAfterMs <= 60_000,
    `retry after ${refused.retryAfterMs} ms: the penalty's units leave the window a full window from now`,
  );
  // The penalty counted as the limit (100 points): a reward of 50 leaves 3 + 50 units in the window.
  assert.equal((await limiter.reward('k', 50)).remaining, 47);
});

test('a penalty beyond the limit on a memory-store sliding log refuses the key the same way, and bad points still throw INVALID_COST', async () => {
  const limiter = new RateLimiter({ store: new MemoryStore(), algorithm: 'sliding-log', limit: 100, window: '1m' });
  const d = await limiter.penalty('k', 1_000_000);
  assert.equal(d.allowed, false);
  assert.equal((await limiter.consume('k')).allowed, false);
  for (const points of [0, -1, 1.5, Number.NaN, 2 ** 53]) {
    await assert.rejects(limiter.penalty('k', points), (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_COST));
  }
});
