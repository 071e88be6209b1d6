// The shared conformance suite against LocalFirstStore on a real Redis (ioredis, node-redis and valkey-glide), driven by the suite's ManualClock.
import { after, before } from 'node:test';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { GlideClient } from '@valkey/valkey-glide';
import { LocalFirstStore } from '../../src/stores/redis/index.js';
import { runConformance, type ConformanceFactory } from '../conformance/suite.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { untilLive } from '../support/local-first.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** One Redis node: the store fails as one. */
const ABSENT = { kind: 'absent' } as const;

const ioredis: ConformanceFactory = async (clock) => {
  const client = new Redis({ port: server.port, host: server.host });
  const store = new LocalFirstStore({ client, clock, channel: `conf-io-${process.pid}` });
  await untilLive(store);
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.disconnect()) };
};

const nodeRedis: ConformanceFactory = async (clock) => {
  const client = createClient({ url: server.url });
  client.on('error', () => {});
  await client.connect();
  const store = new LocalFirstStore({ client, clock, channel: `conf-nr-${process.pid}` });
  await untilLive(store);
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.destroy()) };
};

const glide: ConformanceFactory = async (clock) => {
  const config = { addresses: [{ host: server.host, port: server.port }], requestTimeout: 2000 };
  const [client, subscriber] = await Promise.all([GlideClient.createClient(config), GlideClient.createClient(config)]);
  const store = new LocalFirstStore({ client, subscriber, clock, channel: `conf-gl-${process.pid}` });
  await untilLive(store);
  return { store, failureScope: ABSENT, teardown: async () => (await store.close(), client.close(), subscriber.close()) };
};

runConformance('redis-local-first (ioredis)', ioredis);
runConformance('redis-local-first (node-redis)', nodeRedis);
runConformance('redis-local-first (valkey-glide)', glide);
