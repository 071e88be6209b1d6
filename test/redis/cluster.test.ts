// RedisStore on a three-master Redis Cluster through ioredis Cluster and node-redis createCluster: parity, every operation, keys spread over slots, NOSCRIPT per node.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import type { Policy, Store } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-server.js';
import { differential, smokeAllOperations } from './helpers.js';

let cluster: RedisCluster;
let io: Cluster;
let nr: ReturnType<typeof createCluster>;

before(async () => {
  cluster = await startRedisCluster();
  io = new Cluster(cluster.nodes);
  io.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    io.once('ready', resolve);
    io.once('end', () => reject(new Error('ioredis Cluster could not connect')));
  });
  nr = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  nr.on('error', () => {});
  await nr.connect();
});
after(async () => {
  io?.disconnect();
  nr?.destroy();
  await cluster?.stop();
});

const policy = (algorithm: Policy['algorithm'], limit: number, windowMs: number): Policy =>
  Object.freeze({ algorithm, limit, windowMs, blockMs: 0 });

/** SCRIPT FLUSH on every master, so each node's next EVALSHA meets NOSCRIPT. */
async function flushScripts(): Promise<void> {
  await Promise.all(io.nodes('master').map((node) => node.script('FLUSH')));
}

/** Many keys in one tick land on every master, and each keeps its own count. */
async function spreadAcrossSlots(store: Store, prefix: string): Promise<void> {
  const p = policy('sliding-log', 3, 60_000);
  const keys = Array.from({ length: 40 }, (_, i) => `${prefix}:${i}`);
  const first = await Promise.all(keys.flatMap((key) => [1, 2].map(() => store.apply({ kind: 'consume', key, amount: 1, policy: p }))));
  assert.deepEqual(
    first.map((o) => o.remaining),
    keys.flatMap(() => [2, 1]),
  );
  await flushScripts();
  const second = await Promise.all(keys.map((key) => store.apply({ kind: 'consume', key, amount: 1, policy: p })));
  assert.deepEqual(
    second.map((o) => [o.allowed, o.remaining]),
    keys.map(() => [true, 0]),
  );
}

describe('ioredis Cluster', () => {
  test('the store reports its client', () => {
    assert.equal(new RedisStore({ client: io }).clientKind, 'ioredis-cluster');
  });
  test('Lua decides exactly as applyOperation', async () => {
    const checked = await differential({
      makeStore: (clock) => new RedisStore({ client: io, clock }),
      seed: 21,
      policies: 12,
      ticks: 25,
      prefix: 'diff-ioc',
    });
    assert.ok(checked > 500);
  });
  test('every operation and algorithm on Redis time', async () => {
    await smokeAllOperations(new RedisStore({ client: io }), `smoke-ioc-${Date.now()}`);
  });
  test('keys on every master, and NOSCRIPT after SCRIPT FLUSH on every node', async () => {
    await spreadAcrossSlots(new RedisStore({ client: io }), `spread-ioc-${Date.now()}`);
  });
});

describe('node-redis cluster', () => {
  test('the store reports its client', () => {
    assert.equal(new RedisStore({ client: nr }).clientKind, 'node-redis-cluster');
  });
  test('Lua decides exactly as applyOperation', async () => {
    const checked = await differential({
      makeStore: (clock) => new RedisStore({ client: nr, clock }),
      seed: 31,
      policies: 12,
      ticks: 25,
      prefix: 'diff-nrc',
    });
    assert.ok(checked > 500);
  });
  test('every operation and algorithm on Redis time', async () => {
    await smokeAllOperations(new RedisStore({ client: nr }), `smoke-nrc-${Date.now()}`);
  });
  test('keys on every master, and NOSCRIPT after SCRIPT FLUSH on every node', async () => {
    await spreadAcrossSlots(new RedisStore({ client: nr }), `spread-nrc-${Date.now()}`);
  });
});
