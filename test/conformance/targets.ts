// Store factories for the conformance suite and the vectors: Redis single node and Cluster, through ioredis, node-redis and valkey-glide.
import { after, before } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { GlideClient, GlideClusterClient } from '@valkey/valkey-glide';
import { RedisStore } from '../../src/stores/redis/index.js';
import { startRedis, startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis-server.js';
import type { ConformanceFactory } from './suite.js';
import { clusterMasters, type FailureScopeExpectation } from './failure-scope.js';

/** A single node fails as one; so does a Cluster reached through a client whose slot map the store cannot read. */
const ABSENT: FailureScopeExpectation = { kind: 'absent' };

let server: Promise<RedisServer> | undefined;
let cluster: Promise<RedisCluster> | undefined;

/**
 * Starts one redis-server and one 3-master cluster for the calling test file
 * and stops them after all its tests. Call at the file's top level, before
 * the suites that use the factories below.
 */
export function useRedis(what: { single?: boolean; cluster?: boolean }): void {
  before(() => {
    if (what.single) server = startRedis();
    if (what.cluster) cluster = startRedisCluster();
  });
  after(async () => {
    await Promise.all([server?.then((s) => s.stop()), cluster?.then((c) => c.stop())]);
  });
}

function sharedServer(): Promise<RedisServer> {
  if (!server) throw new Error('call useRedis({ single: true }) at the top of the test file');
  return server;
}

function sharedCluster(): Promise<RedisCluster> {
  if (!cluster) throw new Error('call useRedis({ cluster: true }) at the top of the test file');
  return cluster;
}

/** RedisStore over ioredis on a single node. */
export const ioredisSingle: ConformanceFactory = async (clock) => {
  const { port, host } = await sharedServer();
  const client = new Redis({ port, host });
  const store = new RedisStore({ client, clock });
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.disconnect()) };
};

/** RedisStore over node-redis on a single node. */
export const nodeRedisSingle: ConformanceFactory = async (clock) => {
  const { url } = await sharedServer();
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  const store = new RedisStore({ client, clock });
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.destroy()) };
};

/** RedisStore over an ioredis Cluster of 3 masters. */
export const ioredisCluster: ConformanceFactory = async (clock) => {
  const fixture = await sharedCluster();
  const client = new Cluster(fixture.nodes);
  client.on('error', () => {});
  await new Promise<void>((resolve) => client.once('ready', resolve));
  const store = new RedisStore({ client, clock });
  // ioredis keeps the slot map the store reads: one scope per master.
  return { store, failureScope: clusterMasters(fixture), teardown: async () => (await store.close(), client.disconnect()) };
};

/** RedisStore over a node-redis cluster of 3 masters. */
export const nodeRedisCluster: ConformanceFactory = async (clock) => {
  const { nodes } = await sharedCluster();
  const client = createCluster({ rootNodes: nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  client.on('error', () => {});
  await client.connect();
  const store = new RedisStore({ client, clock });
  // RedisStore reads no slot map from this cluster client: its calls count against one breaker.
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.destroy()) };
};

// glide's own requestTimeout (250 ms by default) raised above the store's timeoutMs, so a busy test machine meets the store's timer, not glide's.

/** RedisStore over a valkey-glide GlideClient on a single node. */
export const glideSingle: ConformanceFactory = async (clock) => {
  const { port, host } = await sharedServer();
  const client = await GlideClient.createClient({ addresses: [{ host, port }], requestTimeout: 2000 });
  const store = new RedisStore({ client, clock });
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.close()) };
};

/** RedisStore over a valkey-glide GlideClusterClient on 3 masters. */
export const glideCluster: ConformanceFactory = async (clock) => {
  const { nodes } = await sharedCluster();
  const client = await GlideClusterClient.createClient({ addresses: nodes, requestTimeout: 2000 });
  const store = new RedisStore({ client, clock });
  // RedisStore reads no slot map from this cluster client: its calls count against one breaker.
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.close()) };
};
