// LocalFirstStore on an ioredis Cluster of 3 masters: the conformance suite, and a broadcast between two stores; node-redis clusters are refused with a typed error.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { ErrorCode, RateLimiter, isFloodgateError } from '../../src/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';
import { runConformance, type ConformanceFactory } from '../conformance/suite.js';
import { until, untilLive } from '../support/local-first.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-server.js';

let cluster: RedisCluster;
const cleanups: (() => unknown)[] = [];
before(async () => {
  cluster = await startRedisCluster();
});
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await cluster.stop();
});

async function clusterStore(clock?: () => number): Promise<LocalFirstStore> {
  const client = new Cluster(cluster.nodes);
  client.on('error', () => {});
  await new Promise<void>((resolve) => client.once('ready', resolve));
  const store = new LocalFirstStore({ client, channel: `cl-${process.pid}`, ...(clock ? { clock } : {}) });
  cleanups.push(async () => {
    await store.close();
    client.disconnect();
  });
  await untilLive(store, 10_000);
  return store;
}

const factory: ConformanceFactory = async (clock) => ({ store: await clusterStore(clock), teardown: async () => {} });
runConformance('redis-local-first (ioredis Cluster)', factory);

test('ioredis Cluster: exhaustion published on one node reaches a store subscribed on another', async () => {
  const [a, b] = [await clusterStore(), await clusterStore()];
  const la = new RateLimiter({ store: a, limit: 20, window: '10s', prefix: 'clb' });
  const lb = new RateLimiter({ store: b, limit: 20, window: '10s', prefix: 'clb' });
  for (const key of ['a', 'b', 'c', 'd', 'e']) {
    for (let i = 0; i < 20; i++) assert.equal((await la.consume(key)).allowed, true);
    await until(`B hears ${key} is exhausted`, async () => {
      const calls = b.stats().leaseCalls;
      return !(await lb.consume(key)).allowed && b.stats().leaseCalls === calls;
    });
  }
});

test('node-redis clusters are refused with INVALID_CLIENT', async () => {
  const client = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  assert.throws(
    () => new LocalFirstStore({ client }),
    (e) => isFloodgateError(e, ErrorCode.INVALID_CLIENT),
  );
});

test('ioredis Cluster: a composite over keys in different slots rejects with CROSS_SLOT even when both leases cover it', async () => {
  const store = await clusterStore();
  const policy = Object.freeze({ algorithm: 'fixed-window' as const, limit: 100, windowMs: 60_000, blockMs: 0 });
  const ops = ['cs:alice', 'cs:acme'].map((key) => ({ kind: 'consume' as const, key, amount: 1, policy }));
  for (let i = 0; i < 5; i++) await Promise.all(ops.map((op) => store.apply(op)));
  assert.equal(store.consumeAllNow(ops), undefined);
  await assert.rejects(store.consumeAll(ops), (e: unknown) => isFloodgateError(e) && e.code === ErrorCode.CROSS_SLOT);
});
