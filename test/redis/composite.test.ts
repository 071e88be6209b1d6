// RedisStore.consumeAll on a real Redis and Redis Cluster: Lua vs applyComposite over random mixed composites, the slot rule, CROSS_SLOT, NOSCRIPT, one round trip.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { createCluster } from 'redis';
import { ErrorCode, FloodgateError, isStoreFailure } from '../../src/core/errors.js';
import { consumeAll, ManualClock, MemoryStore, RateLimiter, type Operation, type Policy } from '../../src/index.js';
import { ALGORITHMS } from '../../src/core/policy.js';
import { RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { crc16, keySlot } from '../../src/stores/redis/key-slot.js';
import { startRedis, startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis-server.js';
import { connectCluster } from '../support/redis-clients.js';

let server: RedisServer;
let cluster: RedisCluster;
let admin: Redis;
let io: Cluster;
let nr: ReturnType<typeof createCluster>;

before(async () => {
  [server, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  admin = new Redis({ port: server.port, host: server.host });
  io = await connectCluster(cluster);
  nr = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  nr.on('error', () => {});
  await nr.connect();
});
after(async () => {
  admin?.disconnect();
  io?.disconnect();
  nr?.destroy();
  await Promise.all([server?.stop(), cluster?.stop()]);
});

/** Mulberry32: the same start gives the same steps on every run. */
function random(state: number): () => number {
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Calls of each command since the last CONFIG RESETSTAT, from INFO commandstats. */
async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
  return calls;
}

describe('the slot rule', () => {
  test('crc16 is CRC16/XMODEM (the check value of "123456789" is 0x31c3)', () => {
    assert.equal(crc16(Buffer.from('123456789')), 0x31c3);
  });

  test('keySlot agrees with CLUSTER KEYSLOT, for tagged, untagged and odd keys and for the store key layout', async () => {
    const keys = ['', 'a', 'foo', '{user1000}.following', 'foo{}{bar}', 'foo{{bar}}zap', 'foo{bar}{zap}', '{}', '}{a}', 'ünï{cödé}👍'];
    const storeKeys = ['fg:fixed-window:10:1000:0:alice', 'fg:x:{org9}:u1', 'fg:x:{org9}', 'a{}b', '~x', 'x{\uD800}y', 'a{b'];
    for (const k of storeKeys) keys.push(redisKeys(k).state, redisKeys(k).log, redisKeys(k).slots);
    for (const key of keys) {
      const slot = Number(await io.cluster('KEYSLOT', key));
      assert.equal(keySlot(key), slot, `slot of ${JSON.stringify(key)}`);
    }
  });

  test('store keys that share a {tag} share a slot; untagged keys keep the old layout', () => {
    const u = redisKeys('fg:sliding-log:5:1000:0:{org9}:u1');
    const o = redisKeys('fg:fixed-window:50:60000:0:{org9}');
    assert.deepEqual(u, {
      state: '{org9}#fg:sliding-log:5:1000:0:{org9}:u1',
      log: '{org9}l#fg:sliding-log:5:1000:0:{org9}:u1',
      slots: '{org9}s#fg:sliding-log:5:1000:0:{org9}:u1',
    });
    assert.equal(keySlot(u.state), keySlot(o.state));
    assert.equal(keySlot(u.log), keySlot(o.state));
    assert.equal(keySlot(u.slots), keySlot(o.state));
    assert.deepEqual(redisKeys('fg:fixed-window:10:1000:0:alice'), {
      state: '{fg:fixed-window:10:1000:0:alice}',
      log: '{fg:fixed-window:10:1000:0:alice}:l',
      slots: '{fg:fixed-window:10:1000:0:alice}:s',
    });
    // No tag ("{}" is empty, "}{" has no close after the open): encoded as before.
    assert.equal(redisKeys('a{}b').state, `{~${Buffer.from('a{}b').toString('base64url')}}`);
  });

  test('the layout stays injective across tagged, untagged, encoded and lone-surrogate keys', () => {
    const keys = [
      '{t}',
      '{t}:l',
      '{t}l',
      '{t}#x',
      'x{t}',
      'x{t}:l',
      '{t}x',
      '{t}l#x',
      '~{t}',
      'a{b}',
      '~YXtifQ',
      '{~YXtifQ}',
      'x{\uD800}',
      'x{\uDC00}',
    ];
    keys.push('{t}\uD800', '{t}\uDC00', '', '~', '{', '}', '{}', '{{}}', 'l#{t}', '{t}~');
    keys.push('{t}:s', '{t}s', '{t}s#x', 's#{t}', 'x{t}:s', '{t}s~');
    const seen = new Map<string, string>();
    for (const k of keys) {
      const { state, log, slots } = redisKeys(k);
      for (const r of [state, log, slots]) {
        assert.equal(seen.get(r), undefined, `${JSON.stringify(k)} and ${JSON.stringify(seen.get(r))} share ${r}`);
        seen.set(r, k);
      }
    }
  });
});

describe('RedisStore.consumeAll on a single node', () => {
  test('the Lua composite decides as applyComposite over random mixed-algorithm composites (one fixed random sequence, 400 steps)', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const redis = new RedisStore({ client: admin, clock: () => clock.now() });
    const memory = new MemoryStore({ clock: () => clock.now() });
    const rnd = random(18);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const run = `p${process.pid}:${Date.now()}`;
    // Six keys, each with its own fixed policy, so no two limiters ever share a key.
    const keys = Array.from({ length: 6 }, (_, i) => {
      const policy: Policy = Object.freeze({
        algorithm: ALGORITHMS[i % ALGORITHMS.length]!,
        limit: pick([1, 3, 5, 10]),
        windowMs: pick([1000, 2500, 10_000]),
        blockMs: pick([0, 0, 700, 3000]),
      });
      return { key: `${run}:{g}:k${i}`, policy };
    });
    const seen = { admitted: 0, refused: 0, blocked: 0 };
    for (let step = 0; step < 400; step++) {
      clock.advance(pick([0, 0, 1, 50, 200, 999, 1700]));
      const n = 1 + Math.floor(rnd() * 4);
      const chosen = [...keys].sort(() => rnd() - 0.5).slice(0, n);
      if (rnd() < 0.15) {
        // A single operation between composites, so states also come from the per-algorithm scripts.
        const k = chosen[0]!;
        const op: Operation = {
          kind: pick(['consume', 'peek', 'penalty', 'reward'] as const),
          key: k.key,
          amount: pick([1, 2]),
          policy: k.policy,
        };
        assert.deepEqual(await redis.apply(op), await memory.apply(op), `step ${step}: ${op.kind}`);
        continue;
      }
      const ops: Operation[] = chosen.map((k) => ({ kind: 'consume', key: k.key, amount: pick([1, 1, 2, 3]), policy: k.policy }));
      const outcomes = await redis.consumeAll(ops);
      assert.deepEqual(outcomes, memory.consumeAllSync(ops, clock.now()), `step ${step}`);
      if (outcomes.every((o) => o.allowed)) seen.admitted++;
      else seen.refused++;
      if (ops.some((o, i) => !outcomes[i]!.allowed && o.policy.blockMs > 0)) seen.blocked++;
    }
    // The walk must reach every branch: all admit, some refuse, refusals that block.
    assert.ok(seen.admitted > 50 && seen.refused > 50 && seen.blocked > 5, JSON.stringify(seen));
    await redis.close();
  });

  test('NOSCRIPT after SCRIPT FLUSH: the composite is re-sent by text and decides', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new RedisStore({ client: admin, clock: () => clock.now() });
    const policy: Policy = { algorithm: 'sliding-log', limit: 2, windowMs: 1000, blockMs: 0 };
    const ops: Operation[] = [
      { kind: 'consume', key: `ns:${process.pid}:a`, amount: 1, policy },
      { kind: 'consume', key: `ns:${process.pid}:b`, amount: 1, policy: { ...policy, algorithm: 'token-bucket' } },
    ];
    assert.equal((await store.consumeAll(ops))[0]!.remaining, 1);
    await admin.script('FLUSH');
    assert.deepEqual(
      (await store.consumeAll(ops)).map((o) => [o.allowed, o.remaining]),
      [
        [true, 0],
        [true, 0],
      ],
    );
    await store.close();
  });

  test('one composite is one round trip: one EVALSHA, whatever its parts', async () => {
    const client = new Redis({ port: server.port, host: server.host });
    const store = new RedisStore({ client });
    const ops: Operation[] = ALGORITHMS.map((algorithm, i) => ({
      kind: 'consume',
      key: `rt:${process.pid}:${i}`,
      amount: 1,
      policy: { algorithm, limit: 5, windowMs: 60_000, blockMs: 0 },
    }));
    await store.consumeAll(ops); // loads the script
    await admin.config('RESETSTAT');
    await store.consumeAll(ops);
    const calls = await commandCalls(admin);
    assert.equal(calls.get('evalsha'), 1);
    assert.equal(calls.get('eval'), undefined);
    await store.close();
    client.disconnect();
  });

  test('a paused Redis: STORE_TIMEOUT after timeoutMs, as apply; a closed store: CLOSED', async () => {
    const client = new Redis({ port: server.port, host: server.host });
    const store = new RedisStore({ client, timeoutMs: 100 });
    const ops: Operation[] = [
      { kind: 'consume', key: `to:${process.pid}`, amount: 1, policy: { algorithm: 'fixed-window', limit: 5, windowMs: 1000, blockMs: 0 } },
    ];
    server.pause();
    try {
      const error = await store.consumeAll(ops).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof FloodgateError && error.code === ErrorCode.STORE_TIMEOUT && isStoreFailure(error));
    } finally {
      server.resume();
    }
    await store.close();
    await assert.rejects(store.consumeAll(ops), (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.CLOSED);
    client.disconnect();
  });

  test('a key used by two limiters with different options: CONFLICTING_OPTIONS, as apply', async () => {
    const store = new RedisStore({ client: admin });
    const key = `conf:${process.pid}`;
    const a: Policy = { algorithm: 'fixed-window', limit: 5, windowMs: 60_000, blockMs: 0 };
    await store.apply({ kind: 'consume', key, amount: 1, policy: a });
    await assert.rejects(
      store.consumeAll([{ kind: 'consume', key, amount: 1, policy: { ...a, limit: 6 } }]),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.CONFLICTING_OPTIONS,
    );
    await store.close();
  });
});

describe('RedisStore.consumeAll on Redis Cluster', () => {
  for (const [name, client] of [
    ['ioredis', () => io],
    ['node-redis', () => nr],
  ] as const) {
    test(`${name}: keys in different slots reject with CROSS_SLOT, naming keys and slots and the {tag} fix, before anything is sent`, async () => {
      const store = new RedisStore({ client: client() });
      const policy: Policy = { algorithm: 'fixed-window', limit: 5, windowMs: 60_000, blockMs: 0 };
      const ops: Operation[] = [
        { kind: 'consume', key: 'fg:u:alice', amount: 1, policy },
        { kind: 'consume', key: 'fg:o:acme', amount: 1, policy },
      ];
      const slots = ops.map((o) => keySlot(redisKeys(o.key).state));
      assert.notEqual(slots[0], slots[1]);
      const error = await store.consumeAll(ops).then(
        () => assert.fail('a cross-slot composite must reject'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof FloodgateError);
      assert.equal(error.code, ErrorCode.CROSS_SLOT);
      assert.equal(isStoreFailure(error), false);
      assert.equal(
        error.message,
        `consumeAll on Redis Cluster needs every part's key in one slot, but the keys "fg:u:alice" (slot ${slots[0]}), "fg:o:acme" (slot ${slots[1]}) are in different slots. ` +
          'Put a common hash tag in the keys (or prefixes), e.g. "{org9}:u1" and "{org9}": store keys holding {tag} share its slot.',
      );
      assert.equal(await io.exists(redisKeys('fg:u:alice').state), 0);
      await store.close();
    });

    test(`${name}: keys with a common {tag} decide together, over every algorithm`, async () => {
      const store = new RedisStore({ client: client() });
      const tag = `{${name}:${process.pid}}`;
      const ops: Operation[] = ALGORITHMS.map((algorithm, i) => ({
        kind: 'consume',
        key: `fg:${i}:${tag}:u1`,
        amount: 2,
        policy: { algorithm, limit: 3, windowMs: 60_000, blockMs: 0 },
      }));
      assert.deepEqual(
        (await store.consumeAll(ops)).map((o) => [o.allowed, o.remaining]),
        ops.map(() => [true, 1]),
      );
      assert.deepEqual(
        (await store.consumeAll(ops)).map((o) => o.allowed),
        ops.map(() => false),
      );
      await store.close();
    });
  }

  test('CROSS_SLOT through the public consumeAll: a typed rejection, not answered by insurance', async () => {
    const store = new RedisStore({ client: io });
    const insurance = new RateLimiter({ limit: 100, window: '1m', store: new MemoryStore() });
    const a = new RateLimiter({ limit: 5, window: '1m', store, prefix: 'cs-a', insurance });
    const b = new RateLimiter({ limit: 5, window: '1m', store, prefix: 'cs-b', insurance });
    await assert.rejects(
      consumeAll([
        { limiter: a, key: 'alice' },
        { limiter: b, key: 'acme' },
      ]),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.CROSS_SLOT && /\{org9\}/.test(e.message),
    );
    await store.close();
  });
});
