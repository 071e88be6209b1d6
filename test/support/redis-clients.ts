// A redis-server for a test file or suite, and the ioredis clients its tests open on it, disconnected before the server stops.
import { after, before } from 'node:test';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { startRedis, type RedisCluster, type RedisServer } from './redis-server.js';

/** Opens an ioredis client on the fixture's server; the fixture disconnects it in its `after` hook. */
export type OpenClient = (options?: RedisOptions) => Redis;

/** What a test registers with {@link redisFixture} as it goes. */
export interface RedisFixture {
  /** Runs `fn` in the `after` hook, last registered first, while the clients and the server are still up (to close stores on them). */
  cleanup(fn: () => unknown): void;
}

/**
 * Registers `before`/`after` hooks in the current suite (or file). Before: starts a redis-server and hands `ready` a way to open
 * clients on it and the server (the file keeps them in its own variables). After: runs the cleanups, disconnects every client
 * opened, then stops the server.
 */
export function redisFixture(ready: (open: OpenClient, server: RedisServer) => void): RedisFixture {
  let server: RedisServer | undefined;
  const clients: Redis[] = [];
  const cleanups: Array<() => unknown> = [];
  before(async () => {
    const started = await startRedis();
    server = started;
    const open: OpenClient = (options = {}) => {
      const client = new Redis(started.url, options);
      clients.push(client);
      return client;
    };
    ready(open, started);
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    for (const client of clients) client.disconnect();
    await server?.stop();
  });
  return { cleanup: (fn) => void cleanups.push(fn) };
}

/** An ioredis Cluster client on `cluster`, ready (its slot map read), with its connection errors swallowed; the caller disconnects it. */
export async function connectCluster(cluster: RedisCluster): Promise<Cluster> {
  const io = new Cluster(cluster.nodes);
  io.on('error', () => {});
  await new Promise<void>((resolve) => io.once('ready', resolve));
  return io;
}
