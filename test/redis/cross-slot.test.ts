// RedisStore crossSlot: 'split' on a real 3-master Redis Cluster: a composite over several slots is never admitted past any part's limit, a refusal gives back what other slots spent, and 8 concurrent clients keep both.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster } from 'ioredis';
import { consumeAll, ErrorCode, FloodgateError, MemoryStore, RateLimiter } from '../../src/index.js';
import type { Operation, Policy } from '../../src/index.js';
import { LocalFirstStore, RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { keySlot } from '../../src/stores/redis/key-slot.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-server.js';
import { connectCluster } from '../support/redis-clients.js';

let cluster: RedisCluster;
let io: Cluster;

before(async () => {
  cluster = await startRedisCluster();
  io = await connectCluster(cluster);
});
after(async () => {
  io?.disconnect();
  await cluster?.stop();
});

const policy = (limit: number): Policy => ({ algorithm: 'fixed-window', limit, windowMs: 60_000, blockMs: 0 });
const consume = (key: string, limit: number, amount = 1): Operation => ({ kind: 'consume', key, amount, policy: policy(limit) });
const slotOf = (key: string): number => keySlot(redisKeys(key).state);

/** Two keys in different slots, unique to this run. */
function twoSlots(name: string): [string, string] {
  const a = `split:${name}:${process.pid}:${Date.now()}:a`;
  for (let i = 0; ; i++) {
    const b = `split:${name}:${process.pid}:${Date.now()}:b${i}`;
    if (slotOf(b) !== slotOf(a)) return [a, b];
  }
}

describe('RedisStore crossSlot on Redis Cluster', () => {
  test('default crossSlot: reject still refuses a composite over two slots with CROSS_SLOT', async () => {
    const store = new RedisStore({ client: io, timeoutMs: 5000 });
    const [a, b] = twoSlots('reject');
    await assert.rejects(
      store.consumeAll([consume(a, 5), consume(b, 5)]),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.CROSS_SLOT,
    );
  });

  test('crossSlot: split admits a composite over two slots and spends in both', async () => {
    const store = new RedisStore({ client: io, crossSlot: 'split', timeoutMs: 5000 });
    const [a, b] = twoSlots('admit');
    const outcomes = await store.consumeAll([consume(a, 5, 2), consume(b, 3)]);
    assert.deepEqual(
      outcomes.map((o) => [o.allowed, o.remaining]),
      [
        [true, 3],
        [true, 2],
      ],
    );
  });

  test('crossSlot: split gives back what the admitting slot spent when the other slot refuses (nothing spent as a whole)', async () => {
    const store = new RedisStore({ client: io, crossSlot: 'split', timeoutMs: 5000 });
    const [a, b] = twoSlots('giveback');
    // b is at its limit of 1; a has room.
    assert.equal((await store.apply(consume(b, 1))).allowed, true);
    const outcomes = await store.consumeAll([consume(a, 5, 2), consume(b, 1)]);
    assert.equal(outcomes[1]!.allowed, false, 'b refuses');
    assert.equal(outcomes[0]!.allowed, true, 'a was not the reason');
    assert.equal(outcomes[0]!.remaining, 5, 'a reports its units given back');
    const peek = await store.apply({ kind: 'peek', key: a, amount: 0, policy: policy(5) });
    assert.equal(peek.remaining, 5, 'a has all 5 units after the refusal');
  });

  test('crossSlot: split with 8 concurrent clients on one pair of slots: never over either limit, and each admission spent in both', async () => {
    const store = new RedisStore({ client: io, crossSlot: 'split', timeoutMs: 5000 });
    const [a, b] = twoSlots('hammer');
    const perClient = 25;
    let admitted = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < perClient; i++) {
          const outcomes = await store.consumeAll([consume(a, 40), consume(b, 30)]);
          if (outcomes.every((o) => o.allowed)) admitted++;
        }
      }),
    );
    const [pa, pb] = await Promise.all([
      store.apply({ kind: 'peek', key: a, amount: 0, policy: policy(40) }),
      store.apply({ kind: 'peek', key: b, amount: 0, policy: policy(30) }),
    ]);
    console.log(
      `8 clients × ${perClient} composites over 2 slots (limits 40 and 30): admitted ${admitted}; left a=${pa.remaining} b=${pb.remaining}`,
    );
    assert.ok(admitted <= 30, `never over the smaller limit: ${admitted}`);
    // Every admission spent one unit in each slot, and every refusal gave its other unit back.
    assert.equal(30 - pb.remaining, admitted);
    assert.equal(40 - pa.remaining, admitted);
    // Under-admission is bounded by units held for one round trip; with 200 tries against 30, all 30 are taken.
    assert.equal(admitted, 30);
  });

  test('crossSlot: split on a single-slot composite is the one atomic script as before', async () => {
    const store = new RedisStore({ client: io, crossSlot: 'split', timeoutMs: 5000 });
    const tag = `{org-${process.pid}-${Date.now()}}`;
    const outcomes = await store.consumeAll([consume(`${tag}:u1`, 2), consume(tag, 1)]);
    assert.deepEqual(
      outcomes.map((o) => o.allowed),
      [true, true],
    );
    const refused = await store.consumeAll([consume(`${tag}:u1`, 2), consume(tag, 1)]);
    assert.equal(refused[1]!.allowed, false);
    assert.equal(refused[0]!.remaining, 1, 'u1 keeps its unit: nothing spent');
  });

  test('LocalFirstStore with crossSlot: split decides composites over two slots, never past either limit', async () => {
    const store = new LocalFirstStore({ client: io, crossSlot: 'split', timeoutMs: 5000 });
    try {
      const [a, b] = twoSlots('local-first');
      let admitted = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < 25; i++) {
            const outcomes = await store.consumeAll([consume(a, 40), consume(b, 30)]);
            if (outcomes.every((o) => o.allowed)) admitted++;
          }
        }),
      );
      console.log(`local-first: 8 clients × 25 composites over 2 slots (limits 40 and 30): admitted ${admitted}`);
      assert.ok(admitted <= 30, `never over the smaller limit: ${admitted}`);
      assert.ok(admitted >= 25, `leases and give-backs strand at most a few units: ${admitted}`);
    } finally {
      await store.close();
    }
  });

  test('LocalFirstStore without crossSlot still refuses a composite over two slots with CROSS_SLOT', async () => {
    const store = new LocalFirstStore({ client: io, timeoutMs: 5000 });
    try {
      const [a, b] = twoSlots('local-first-reject');
      await assert.rejects(
        store.consumeAll([consume(a, 5), consume(b, 5)]),
        (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.CROSS_SLOT,
      );
    } finally {
      await store.close();
    }
  });

  test("limiters with one hashTag keep one key's counters in one slot: a composite over them is one atomic script (crossSlot: reject)", async () => {
    const store = new RedisStore({ client: io, timeoutMs: 5000 });
    const run = `${process.pid}-${Date.now()}`;
    const perMinute = new RateLimiter({ store, limit: 3, window: 60_000, prefix: `m${run}`, hashTag: 'rule-a' });
    const perHour = new RateLimiter({ store, limit: 5, window: 3_600_000, prefix: `h${run}`, hashTag: 'rule-a' });
    const keys = ['alice', 'bob', 'x}y', '{carol}', ''];
    for (const key of keys.filter((k) => k !== '')) {
      assert.equal(slotOf(perMinute.storeKey(key)), slotOf(perHour.storeKey(key)), `one slot for ${JSON.stringify(key)}`);
      const d = await consumeAll([
        { limiter: perMinute, key },
        { limiter: perHour, key },
      ]);
      assert.equal(d.allowed, true);
    }
    // A key that holds braces cannot end the tag early and share another key's slot by choice: its tag is encoded.
    assert.match(perMinute.storeKey('x}y'), /:\{~[A-Za-z0-9_-]+\}$/);
    const slots = new Set(Array.from({ length: 64 }, (_, i) => slotOf(perMinute.storeKey(`client-${i}`))));
    assert.ok(slots.size > 40, `different clients spread over slots: ${slots.size} of 64`);
    const untagged = new RateLimiter({ store, limit: 3, window: 60_000, prefix: `u${run}` });
    const untagged2 = new RateLimiter({ store, limit: 5, window: 3_600_000, prefix: `v${run}` });
    let sameSlot = 0;
    for (let i = 0; i < 16; i++) if (slotOf(untagged.storeKey(`k${i}`)) === slotOf(untagged2.storeKey(`k${i}`))) sameSlot++;
    assert.ok(sameSlot < 4, "without hashTag one key's counters of two limiters land in different slots");
  });

  test('hashTag with a prefix holding braces is a typed error naming the prefix', () => {
    assert.throws(
      () => new RateLimiter({ store: new MemoryStore(), limit: 1, window: 1000, prefix: 'a{b}', hashTag: 'r' }),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS && /a\{b\}/.test(e.message),
    );
    assert.throws(
      () => new RateLimiter({ store: new MemoryStore(), limit: 1, window: 1000, hashTag: '' }),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS,
    );
  });

  test('a bad crossSlot is a typed error, not a silent default', () => {
    assert.throws(
      () => new RedisStore({ client: io, crossSlot: 'sometimes' as 'split' }),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS && /crossSlot/.test(e.message),
    );
  });
});
