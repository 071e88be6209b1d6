// RedisStore on a single Redis through ioredis: Lua/TypeScript parity, every operation on Redis time, key layout and TTLs, coalescing, NOSCRIPT, close.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { ErrorCode, ManualClock, RateLimiter, isFloodgateError, type Operation, type Policy } from '../../src/index.js';
import { RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { startDelayProxy } from '../support/delay-proxy.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';
import { differential, smokeAllOperations } from './helpers.js';

let server: RedisServer;
let client: Redis;
let admin: Redis;
redisFixture((open, started) => {
  server = started;
  client = open();
  admin = open();
});

const policy = (algorithm: Policy['algorithm'], limit: number, windowMs: number, blockMs = 0): Policy =>
  Object.freeze({ algorithm, limit, windowMs, blockMs });

async function evalshaCalls(): Promise<number> {
  const info = await admin.info('commandstats');
  const match = /cmdstat_evalsha:calls=(\d+)/.exec(info);
  return match ? Number(match[1]) : 0;
}

describe('ioredis', () => {
  test('the store reports its client', () => {
    assert.equal(new RedisStore({ client }).clientKind, 'ioredis');
  });

  for (const seed of [1, 2, 3, 4]) {
    test(`Lua decides exactly as applyOperation (seed ${seed})`, async () => {
      const checked = await differential({
        makeStore: (clock) => new RedisStore({ client, clock }),
        seed,
        policies: 24,
        ticks: 40,
        prefix: 'diff-io',
      });
      assert.ok(checked > 2000);
    });
  }

  test('every operation and algorithm on Redis time, with a sub-second window', async () => {
    await smokeAllOperations(new RedisStore({ client }), `smoke-io-${Date.now()}`);
  });

  test('state lives in a hash-tagged hash (plus a list for the sliding log) with a TTL at its expiry', async () => {
    const clock = new ManualClock(1_700_006_400_000);
    const store = new RedisStore({ client });
    const key = `layout-${Date.now()}`;
    await store.apply({ kind: 'consume', key, amount: 2, policy: policy('fixed-window', 5, 30_000) });
    const { state } = redisKeys(key);
    assert.equal(state, `{${key}}`);
    const fields = await admin.hgetall(state);
    assert.equal(fields.c, '2');
    assert.match(fields.r!, /^\d{13}$/);
    const ttl = await admin.pttl(state);
    assert.ok(ttl > 29_000 && ttl <= 30_000, `ttl ${ttl}`);

    const logKey = `${key}-log`;
    await store.apply({ kind: 'consume', key: logKey, amount: 3, policy: policy('sliding-log', 5, 20_000) });
    const keys = redisKeys(logKey);
    assert.equal(await admin.exists(keys.state), 0);
    assert.equal(await admin.llen(keys.log), 3);
    const logTtl = await admin.pttl(keys.log);
    assert.ok(logTtl > 19_000 && logTtl <= 20_000, `log ttl ${logTtl}`);

    // A forever block has no TTL; reset deletes everything.
    await store.apply({ kind: 'block', key, amount: -1, policy: policy('fixed-window', 5, 30_000) });
    assert.equal(await admin.pttl(state), -1);
    assert.equal((await admin.hgetall(state)).b, '-1');
    await store.apply({ kind: 'reset', key, amount: 0, policy: policy('fixed-window', 5, 30_000) });
    await store.apply({ kind: 'reset', key: logKey, amount: 0, policy: policy('sliding-log', 5, 20_000) });
    assert.equal(await admin.exists(state, keys.state, keys.log), 0);

    // With a client clock, timestamps are the clock's and TTLs at least a minute.
    const clocked = new RedisStore({ client, clock: clock.now });
    await clocked.apply({ kind: 'consume', key, amount: 1, policy: policy('fixed-window', 5, 100) });
    assert.equal((await admin.hgetall(state)).r, String(1_700_006_400_100));
    assert.ok((await admin.pttl(state)) > 59_000);
    await admin.del(state);
  });

  test('a write that keeps the expiry keeps the TTL it set; a block or a new window sets it again', async () => {
    const store = new RedisStore({ client });
    const key = `ttl-${Date.now()}`;
    const fw = policy('fixed-window', 5, 30_000);
    const { state } = redisKeys(key);
    await store.apply({ kind: 'consume', key, amount: 1, policy: fw });
    const first = await admin.pttl(state);
    await new Promise((resolve) => setTimeout(resolve, 30));
    // The second consume counts in the same window: the hash is written in place and its TTL is still the window end.
    await store.apply({ kind: 'consume', key, amount: 1, policy: fw });
    const second = await admin.pttl(state);
    assert.ok(second > 0 && second <= first - 20, `ttl ${first} then ${second}`);
    assert.equal((await admin.hgetall(state)).c, '2');
    await store.apply({ kind: 'block', key, amount: 60_000, policy: fw });
    const blocked = await admin.pttl(state);
    assert.ok(blocked > 59_000 && blocked <= 60_000, `blocked ttl ${blocked}`);
    await admin.del(state);
  });

  test('keys with braces, a leading ~ or lone surrogates are encoded and never collide', async () => {
    const store = new RedisStore({ client });
    const p = policy('fixed-window', 10, 10_000);
    const base = `enc-${Date.now()}`;
    const keys = [`${base}{a}`, `${base}}{`, `~${base}`, `${base}\uD800`, `${base}\uDBFF`, `${base}\uFFFD`, `${base}`];
    for (const [i, key] of keys.entries()) {
      const outcome = await store.apply({ kind: 'consume', key, amount: i + 1, policy: p });
      assert.equal(outcome.remaining, 10 - (i + 1), JSON.stringify(key));
    }
    const names = keys.map((k) => redisKeys(k).state);
    assert.equal(new Set(names).size, keys.length);
    // A key holding a hash tag ({a}) hashes by it; every other key is one whole {…} tag.
    assert.equal(names[0], `{a}#${base}{a}`);
    for (const name of names.slice(1)) assert.match(name, /^\{[^{}]+\}$/);
    await admin.del(...names);
  });

  test('operations on one key in one tick become one script call, applied in arrival order', async () => {
    const store = new RedisStore({ client });
    const p = policy('token-bucket', 10, 60_000);
    const key = `coalesce-${Date.now()}`;
    await admin.config('RESETSTAT');
    const results = await Promise.all(Array.from({ length: 25 }, () => store.apply({ kind: 'consume', key, amount: 1, policy: p })));
    assert.equal(await evalshaCalls(), 1);
    assert.deepEqual(
      results.map((o) => o.remaining),
      [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, ...Array(15).fill(0)],
    );
    assert.deepEqual(
      results.map((o) => o.allowed),
      [...Array(10).fill(true), ...Array(15).fill(false)],
    );

    // Ten keys in one tick: ten script calls, still one flush.
    await admin.config('RESETSTAT');
    const many = await Promise.all(
      Array.from({ length: 30 }, (_, i) => store.apply({ kind: 'consume', key: `${key}:${i % 10}`, amount: 1, policy: p })),
    );
    assert.equal(await evalshaCalls(), 10);
    assert.deepEqual(
      many.map((o) => o.remaining),
      [...Array(10).fill(9), ...Array(10).fill(8), ...Array(10).fill(7)],
    );
  });

  test('mixed operations and policies on one key keep their arrival order', async () => {
    const store = new RedisStore({ client });
    const key = `order-${Date.now()}`;
    const a = policy('fixed-window', 5, 60_000);
    const b = policy('fixed-window', 3, 60_000);
    const op = (kind: Operation['kind'], amount: number, p = a): Operation => ({ kind, key, amount, policy: p });
    const results = await Promise.all([
      store.apply(op('consume', 2)),
      store.apply(op('consume', 1, b)), // different policy: a separate call, still in order
      store.apply(op('peek', 0)),
      store.apply(op('penalty', 1)),
      store.apply(op('reward', 2)),
      store.apply(op('block', -1)),
      store.apply(op('consume', 1)),
      store.apply(op('reset', 0)),
      store.apply(op('consume', 1)),
    ]);
    assert.deepEqual(
      results.map((o) => [o.allowed, o.remaining]),
      [
        [true, 3],
        [true, 0],
        [true, 2],
        [true, 1],
        [true, 3],
        [false, 0],
        [false, 0],
        [true, 5],
        [true, 4],
      ],
    );
    assert.equal(results[6]!.retryAfterMs, Infinity);
  });

  test('more than 500 operations on one key are split across calls without losing order', async () => {
    const store = new RedisStore({ client });
    const p = policy('fixed-window', 1000, 60_000);
    const key = `big-${Date.now()}`;
    const results = await Promise.all(Array.from({ length: 1200 }, () => store.apply({ kind: 'consume', key, amount: 1, policy: p })));
    assert.deepEqual(
      results.map((o) => o.remaining),
      Array.from({ length: 1200 }, (_, i) => Math.max(0, 999 - i)),
    );
  });

  test('SCRIPT FLUSH is recovered transparently, alone and inside a pipeline', async () => {
    const store = new RedisStore({ client });
    const p = policy('sliding-window', 10, 60_000);
    const key = `noscript-${Date.now()}`;
    assert.equal((await store.apply({ kind: 'consume', key, amount: 1, policy: p })).remaining, 9);
    await admin.script('FLUSH');
    assert.equal((await store.apply({ kind: 'consume', key, amount: 1, policy: p })).remaining, 8);
    await admin.script('FLUSH');
    const many = await Promise.all(
      [0, 1, 2, 0, 1, 2].map((i) => store.apply({ kind: 'consume', key: `${key}:${i}`, amount: 1, policy: p })),
    );
    assert.deepEqual(
      many.map((o) => o.remaining),
      [9, 9, 9, 8, 8, 8],
    );
  });

  test('a script error rejects with STORE_ERROR and leaves other keys of the flush alone', async () => {
    const store = new RedisStore({ client });
    const p = policy('fixed-window', 10, 60_000);
    const key = `wrongtype-${Date.now()}`;
    await admin.set(redisKeys(key).state, 'not a hash');
    const [bad, good] = await Promise.allSettled([
      store.apply({ kind: 'consume', key, amount: 1, policy: p }),
      store.apply({ kind: 'consume', key: `${key}-ok`, amount: 1, policy: p }),
    ]);
    assert.equal(bad.status, 'rejected');
    assert.ok(isFloodgateError((bad as PromiseRejectedResult).reason, ErrorCode.STORE_ERROR));
    assert.match(String((bad as PromiseRejectedResult).reason.message), /WRONGTYPE/);
    assert.equal(good.status, 'fulfilled');
    await admin.del(redisKeys(key).state);
  });

  test('close rejects queued operations with CLOSED, later ones too, and leaves the client open', async () => {
    const store = new RedisStore({ client });
    const p = policy('fixed-window', 10, 60_000);
    const pending = store.apply({ kind: 'consume', key: `close-${Date.now()}`, amount: 1, policy: p });
    await store.close();
    await store.close();
    await assert.rejects(pending, (e: unknown) => isFloodgateError(e, ErrorCode.CLOSED));
    await assert.rejects(store.apply({ kind: 'peek', key: 'x', amount: 0, policy: p }), (e: unknown) =>
      isFloodgateError(e, ErrorCode.CLOSED),
    );
    assert.equal(await client.ping(), 'PONG');
  });

  test("when a hot key's in-memory block ends, one script call decides it again, however many turns wait for Redis", async () => {
    // 25 ms each way, so several event-loop turns pass while the first call is out, as under load.
    const proxy = await startDelayProxy({ targetPort: server.port, delayMs: 25 });
    const remote = new Redis(proxy.url);
    try {
      const l = new RateLimiter({
        store: new RedisStore({ client: remote }),
        limit: 5,
        window: '500ms',
        inMemoryBlock: true,
        prefix: `lapse-${Date.now()}`,
      });
      const fill = await Promise.all(Array.from({ length: 6 }, () => l.consume('hot')));
      assert.equal(fill.filter((d) => d.allowed).length, 5);
      await new Promise((resolve) => setTimeout(resolve, fill[5]!.retryAfterMs + 5));
      await admin.config('RESETSTAT');

      const pending = [];
      for (let turn = 0; turn < 5; turn++) {
        if (turn > 0) await new Promise((resolve) => setImmediate(resolve));
        for (let i = 0; i < 10; i++) pending.push(l.consume('hot'));
      }
      const decisions = await Promise.all(pending);

      assert.equal(decisions.filter((d) => d.allowed).length, 5);
      assert.equal(await evalshaCalls(), 1, "the first turn's ten consumes in one call; the forty after it refused from memory");
      assert.ok(decisions.slice(10).every((d) => d.source === 'memory-block'));
    } finally {
      remote.disconnect();
      await proxy.stop();
    }
  });

  test('a RateLimiter with a custom prefix shares counters across stores on one Redis', async () => {
    const prefix = `shared-${Date.now()}`;
    const a = new RateLimiter({ store: new RedisStore({ client }), limit: 3, window: '1m', prefix });
    const b = new RateLimiter({ store: new RedisStore({ client: admin }), limit: 3, window: '1m', prefix });
    assert.equal((await a.consume('u', 2)).remaining, 1);
    assert.equal((await b.consume('u')).remaining, 0);
    assert.equal((await a.consume('u')).allowed, false);
  });

  test('ioredis with stringNumbers still decodes outcomes', async () => {
    const strings = new Redis(server.url, { stringNumbers: true });
    try {
      const store = new RedisStore({ client: strings });
      const o = await store.apply({ kind: 'consume', key: `strnum-${Date.now()}`, amount: 1, policy: policy('fixed-window', 3, 1000) });
      assert.deepEqual([o.allowed, o.remaining, o.resetMs], [true, 2, 1000]);
    } finally {
      strings.disconnect();
    }
  });
});
