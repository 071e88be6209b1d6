// RedisStore and LocalFirstStore on a real Redis: two limiters with different options whose prefixes collide on one store fail loudly with CONFLICTING_OPTIONS instead of sharing a counter.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { ErrorCode, ManualClock, RateLimiter, isFloodgateError } from '../../src/index.js';
import { LocalFirstStore, RedisStore } from '../../src/stores/redis/index.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';

let server: RedisServer;
let client: Redis;
redisFixture((open, started) => {
  server = started;
  client = open();
});

const conflicting = (e: unknown) =>
  isFloodgateError(e, ErrorCode.CONFLICTING_OPTIONS) && /give each limiter its own prefix/.test(e.message);

test('regression: two RedisStore limiters with different policies on colliding prefixes ("a" + "b:c", "a:b" + "c") reject with CONFLICTING_OPTIONS', async () => {
  const store = new RedisStore({ client });
  const strict = new RateLimiter({ store, limit: 2, window: '1m', prefix: 'a' });
  const loose = new RateLimiter({ store, limit: 100, window: '1m', prefix: 'a:b' });
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    assert.equal((await strict.consume('b:c')).allowed, true);
    // Before the check, the loose limiter spent the strict one's counter (and was told 97 remain of its 100).
    await assert.rejects(loose.consume('c'), conflicting);
    await assert.rejects(loose.peek('c'), conflicting);
    await assert.rejects(loose.penalty('c', 5), conflicting);
    assert.equal((await strict.consume('b:c')).remaining, 0, 'the strict limiter counted only its own consumes');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(
      warnings.filter((w) => (w as { code?: string }).code === ErrorCode.CONFLICTING_OPTIONS).length,
      1,
      'one warning per pair of policies',
    );
    // Keys that do not collide, and the same options on a shared prefix, are fine.
    assert.equal((await loose.consume('other')).allowed, true);
    const twin = new RateLimiter({ store, limit: 2, window: '1m', prefix: 'a' });
    assert.equal((await twin.peek('b:c')).remaining, 0);
  } finally {
    process.off('warning', onWarning);
  }
});

test('a key whose usage under one policy has lapsed may be used under another', async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const store = new RedisStore({ client, clock: clock.now });
  const first = new RateLimiter({ store, clock: clock.now, limit: 2, window: '1s', prefix: 'lapse' });
  const second = new RateLimiter({ store, clock: clock.now, limit: 5, window: '1s', prefix: 'lapse' });
  await first.consume('k');
  await assert.rejects(second.consume('k'), conflicting);
  clock.advance(1000);
  assert.equal((await second.consume('k')).remaining, 4);
  // Reset forgets the key's usage, so the other limiter may take it at once.
  await second.reset('k');
  assert.equal((await first.consume('k')).remaining, 1);
});

test('regression: LocalFirstStore refuses a colliding prefix with other options the same way, for consumes and other operations', async () => {
  const local = new Redis(server.url);
  const store = new LocalFirstStore({ client: local, channel: `conflict-${process.pid}` });
  try {
    const strict = new RateLimiter({ store, limit: 2, window: '1m', prefix: 'lf' });
    const loose = new RateLimiter({ store, limit: 100, window: '1m', prefix: 'lf:b' });
    assert.equal((await strict.consume('b:c')).allowed, true);
    await assert.rejects(loose.consume('c'), conflicting);
    await assert.rejects(loose.penalty('c'), conflicting);
    assert.equal((await strict.consume('b:c')).remaining, 0, 'the strict limiter counted only its own consumes');
  } finally {
    await store.close();
    local.disconnect();
  }
});
