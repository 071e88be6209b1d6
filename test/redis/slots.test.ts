// Concurrency slots on real Redis without a store clock: Redis TIME decides expiry, the slot set's layout and TTL, and hash-tagged keys on a Cluster through ioredis and node-redis.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { createCluster } from 'redis';
import { ConcurrencyLimiter } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { redisKeys } from '../../src/stores/redis/key-names.js';
import { startRedis, startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis-server.js';
import { connectCluster } from '../support/redis-clients.js';

let server: RedisServer;
let cluster: RedisCluster;
let client: Redis;
before(async () => {
  [server, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  client = new Redis({ port: server.port, host: server.host });
});
after(async () => {
  client.disconnect();
  await Promise.all([server.stop(), cluster.stop()]);
});

test('the slot set: owner ids scored by expiry on Redis time, a TTL of the latest expiry, deleted once empty', async () => {
  const store = new RedisStore({ client });
  const before = Date.now();
  const owner = 'a'.repeat(32);
  assert.deepEqual(await store.acquireSlot('fg:concurrency:2:alice', 2, owner, 5000), { admitted: true, inUse: 1, retryAfterMs: 0 });
  const set = redisKeys('fg:concurrency:2:alice').slots;
  assert.equal(set, '{fg:concurrency:2:alice}:s');
  const [member, score] = await client.zrange(set, 0, -1, 'WITHSCORES');
  assert.equal(member, owner);
  // Redis and this process share a host clock here.
  assert.ok(Number(score) >= before + 5000 && Number(score) <= Date.now() + 5000, `score ${score}`);
  const ttl = await client.pttl(set);
  assert.ok(ttl > 4000 && ttl <= 5000, `pttl ${ttl}`);
  assert.equal(await store.renewSlot('fg:concurrency:2:alice', owner, 60_000), true);
  assert.ok((await client.pttl(set)) > 55_000, 'a renewal past the TTL extends the set');
  assert.equal(await store.releaseSlot('fg:concurrency:2:alice', owner), true);
  assert.equal(await client.exists(set), 0);
  await store.close();
});

test('without a store clock, a slot expires by Redis TIME: a holder that stops renewing loses it at its ttl', async () => {
  const store = new RedisStore({ client });
  const l = new ConcurrencyLimiter({ limit: 1, ttl: '1s', store, heartbeat: false, prefix: 'time' });
  const first = await l.acquire('k');
  assert.equal(first.allowed, true);
  const refused = await l.acquire('k');
  assert.equal(refused.allowed, false);
  assert.ok(refused.retryAfterMs > 800 && refused.retryAfterMs <= 1000, `retryAfterMs ${refused.retryAfterMs}`);
  await sleep(1050);
  assert.equal((await l.acquire('k')).allowed, true);
  assert.equal(await first.release(), false, 'the old holder frees nothing of the new one');
  await store.close();
});

test('hash-tagged keys on Redis Cluster (ioredis and node-redis): the slot set keeps the tag, so it lives in the tag slot', async () => {
  const io = await connectCluster(cluster);
  const nr = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  nr.on('error', () => {});
  await nr.connect();
  try {
    for (const [name, store] of [
      ['ioredis', new RedisStore({ client: io })],
      ['node-redis', new RedisStore({ client: nr })],
    ] as const) {
      const l = new ConcurrencyLimiter({ limit: 2, store, prefix: `{org9}:${name}` });
      const slots = await Promise.all([l.acquire('u1'), l.acquire('u1'), l.acquire('u1')]);
      assert.deepEqual(slots.map((s) => s.allowed).sort(), [false, true, true], name);
      assert.equal(redisKeys(`{org9}:${name}:u1`).slots, `{org9}s#{org9}:${name}:u1`);
      assert.equal(await io.zcard(`{org9}s#{org9}:${name}:u1`), 2, name);
      assert.deepEqual(await Promise.all(slots.map((s) => s.release())).then((r) => r.sort()), [false, true, true]);
      assert.equal(await io.exists(`{org9}s#{org9}:${name}:u1`), 0);
      await store.close();
    }
  } finally {
    io.disconnect();
    nr.destroy();
  }
});
