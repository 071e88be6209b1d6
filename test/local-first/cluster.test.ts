// LocalFirstStore on an ioredis Cluster and a valkey-glide GlideClusterClient of 3 masters: the conformance suite, and a broadcast between two stores; node-redis clusters are refused with a typed error.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { GlideClusterClient } from '@valkey/valkey-glide';
import { ErrorCode, RateLimiter, isFloodgateError } from '../../src/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';
import { runConformance, type ConformanceFactory } from '../conformance/suite.js';
import { clusterMasters } from '../conformance/failure-scope.js';
import { until, untilHeardExhausted, untilLive } from '../support/local-first.js';
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

/** A LocalFirstStore on two GlideClusterClients (commands, subscriber), and its teardown. */
async function glideClusterPair(
  clock?: () => number,
  leaseMs?: number,
): Promise<{ store: LocalFirstStore; client: GlideClusterClient; teardown: () => Promise<void> }> {
  const config = { addresses: cluster.nodes, requestTimeout: 2000 };
  const [client, subscriber] = await Promise.all([GlideClusterClient.createClient(config), GlideClusterClient.createClient(config)]);
  const store = new LocalFirstStore({
    client,
    subscriber,
    channel: `cl-${process.pid}`,
    ...(clock ? { clock } : {}),
    ...(leaseMs ? { leaseMs } : {}),
  });
  const teardown = async (): Promise<void> => {
    await store.close();
    client.close();
    subscriber.close();
  };
  await untilLive(store, 10_000);
  return { store, client, teardown };
}

async function glideClusterStore(): Promise<LocalFirstStore> {
  const { store, teardown } = await glideClusterPair();
  cleanups.push(teardown);
  return store;
}

// Its RedisStore reads the ioredis slot map: one scope per master.
const factory: ConformanceFactory = async (clock) => ({
  store: await clusterStore(clock),
  failureScope: clusterMasters(cluster),
  teardown: async () => {},
});
runConformance('redis-local-first (ioredis Cluster)', factory);
// RedisStore reads no slot map from a GlideClusterClient: its calls count against one breaker.
const glideFactory: ConformanceFactory = async (clock) => ({ ...(await glideClusterPair(clock)), failureScope: { kind: 'absent' } });

test('GlideClusterClient: CLIENT KILL TYPE pubsub on every node: the store notices, gives its lease back and resubscribes', async () => {
  // The sweeper waits a minute, so only the store noticing the reconnection gives the lease back.
  const { store, client, teardown } = await glideClusterPair(undefined, 60_000);
  cleanups.push(teardown);
  assert.equal(store.clientKind, 'glide-cluster');
  const limiter = new RateLimiter({ store, limit: 1000, window: '10s', prefix: 'clk' });
  for (let i = 0; i < 100; i++) await limiter.consume('k');
  assert.equal(store.stats().returnCalls, 0);
  await client.customCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub'], { route: 'allNodes' });
  await until('the store resubscribes', () => store.stats().live && store.stats().returnCalls > 0, 10_000);
});
runConformance('redis-local-first (valkey-glide GlideClusterClient)', glideFactory);

for (const [name, make] of [
  ['ioredis Cluster', clusterStore],
  ['GlideClusterClient', glideClusterStore],
] as const) {
  test(`${name}: exhaustion published on one node reaches a store subscribed on another`, async () => {
    await exhaustionReaches(await make(), await make(), `clb-${name.slice(0, 2)}`);
  });
}

/** Exhausts five keys through `a`; `b` refuses each from memory once it heard. */
async function exhaustionReaches(a: LocalFirstStore, b: LocalFirstStore, prefix: string): Promise<void> {
  const la = new RateLimiter({ store: a, limit: 20, window: '10s', prefix });
  const lb = new RateLimiter({ store: b, limit: 20, window: '10s', prefix });
  for (const key of ['a', 'b', 'c', 'd', 'e']) {
    for (let i = 0; i < 20; i++) assert.equal((await la.consume(key)).allowed, true);
    await untilHeardExhausted(`B hears ${key} is exhausted`, b, lb, key);
  }
}

test('node-redis clusters are refused with INVALID_CLIENT', async () => {
  const client = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  assert.throws(
    () => new LocalFirstStore({ client }),
    (e) => isFloodgateError(e, ErrorCode.INVALID_CLIENT),
  );
});

for (const [name, make] of [
  ['ioredis Cluster', clusterStore],
  ['GlideClusterClient', glideClusterStore],
] as const) {
  test(`${name}: a composite over keys in different slots rejects with CROSS_SLOT even when both leases cover it`, async () => {
    const store = await make();
    const policy = Object.freeze({ algorithm: 'fixed-window' as const, limit: 100, windowMs: 60_000, blockMs: 0 });
    const ops = ['cs:alice', 'cs:acme'].map((key) => ({ kind: 'consume' as const, key, amount: 1, policy }));
    for (let i = 0; i < 5; i++) await Promise.all(ops.map((op) => store.apply(op)));
    assert.equal(store.consumeAllNow(ops), undefined);
    await assert.rejects(store.consumeAll(ops), (e: unknown) => isFloodgateError(e) && e.code === ErrorCode.CROSS_SLOT);
  });
}
