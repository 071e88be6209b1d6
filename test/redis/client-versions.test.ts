// The client majors a user may hold, installed from npm into a scratch directory and run against a real redis-server: node-redis 4 and 6, ioredis 6 and valkey-glide 2.3 drive RedisStore and LocalFirstStore; ioredis 4, node-redis 3 and valkey-glide 2.2 are refused naming the version to use.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ErrorCode, RateLimiter, isFloodgateError } from '../../src/index.js';
import { LocalFirstStore, RedisStore } from '../../src/stores/redis/index.js';
import { installMode, npm, unreachable } from '../packaging/npm.js';
import { untilLive } from '../support/local-first.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { smokeAllOperations } from './helpers.js';

/** Aliases, so that several majors of one package sit side by side in one install. */
const CLIENTS = [
  'redis4@npm:redis@4',
  'redis6@npm:redis@6',
  'redis3@npm:redis@3',
  'ioredis4@npm:ioredis@4',
  'ioredis6@npm:ioredis@6',
  'glide22@npm:@valkey/valkey-glide@2.2',
  'glide23@npm:@valkey/valkey-glide@2.3',
];

/** The slice of node-redis (any supported major) this file uses. */
interface NodeRedisClient {
  on(event: 'error', listener: () => void): unknown;
  connect(): Promise<unknown>;
  quit(): Promise<unknown>;
}
/** The slice of ioredis (any major) this file uses. */
interface IoredisClient {
  on(event: 'error', listener: () => void): unknown;
  disconnect(): void;
}
type IoredisClass = new (url: string, options?: object) => IoredisClient;
/** The slice of valkey-glide (2.x) this file uses. */
interface GlideModule {
  GlideClient: { createClient(config: { addresses: { host: string; port: number }[] }): Promise<{ close(): void }> };
}

let dir = '';
let skipReason: string | undefined;
let load: NodeJS.Require;
let server: RedisServer;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'floodgate-clients-'));
  const mode = await installMode(dir);
  await npm(['init', '-y'], dir);
  const install = await npm(['install', ...CLIENTS, ...mode.flags, '--no-audit', '--no-fund'], dir);
  if (unreachable(install)) skipReason = `npm could not fetch the clients from ${mode.describe}`;
  else assert.ok(install.ok, `npm install of the clients failed:\n${install.stderr}`);
  load = createRequire(join(dir, 'package.json'));
  server = await startRedis();
});

after(async () => {
  await server?.stop();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

/** An ioredis class from its module, which exports it as the module itself (4) or also as `Redis` (5+). */
function ioredis(alias: string): IoredisClass {
  const mod = load(alias) as IoredisClass & { Redis?: IoredisClass };
  return mod.Redis ?? mod;
}

/** Three consumes of one key under a limit of 2 on `store`: admitted, admitted, refused. */
async function limitsAtTwo(store: RedisStore | LocalFirstStore, prefix: string): Promise<void> {
  const limiter = new RateLimiter({ store, limit: 2, window: '1m', prefix });
  const allowed = [];
  for (let i = 0; i < 3; i++) allowed.push((await limiter.consume('k')).allowed);
  assert.deepEqual(allowed, [true, true, false]);
}

for (const alias of ['redis4', 'redis6']) {
  describe(`node-redis ${alias.slice(5)}`, () => {
    test('drives RedisStore (every operation of every algorithm) and LocalFirstStore', async (t) => {
      if (skipReason !== undefined) return t.skip(skipReason);
      const { createClient } = load(alias) as { createClient(options: { url: string }): NodeRedisClient };
      const client = createClient({ url: server.url });
      client.on('error', () => {});
      await client.connect();
      try {
        const store = new RedisStore({ client });
        assert.equal(store.clientKind, 'node-redis');
        await smokeAllOperations(store, `${alias}-${Date.now()}`);
        const local = new LocalFirstStore({ client, channel: `${alias}-${process.pid}` });
        try {
          await untilLive(local);
          await limitsAtTwo(local, `${alias}-lf-${Date.now()}`);
        } finally {
          await local.close();
        }
      } finally {
        await client.quit();
      }
    });
  });
}

describe('ioredis 6', () => {
  test('drives RedisStore (every operation of every algorithm) and LocalFirstStore', async (t) => {
    if (skipReason !== undefined) return t.skip(skipReason);
    const Redis = ioredis('ioredis6');
    const client = new Redis(server.url);
    client.on('error', () => {});
    try {
      const store = new RedisStore({ client });
      assert.equal(store.clientKind, 'ioredis');
      await smokeAllOperations(store, `ioredis6-${Date.now()}`);
      const local = new LocalFirstStore({ client, channel: `ioredis6-${process.pid}` });
      try {
        await untilLive(local);
        await limitsAtTwo(local, `ioredis6-lf-${Date.now()}`);
      } finally {
        await local.close();
      }
    } finally {
      client.disconnect();
    }
  });
});

test('an ioredis 4 client is refused: INVALID_CLIENT "ioredis 4 is not supported: use ioredis 5 or later"', (t) => {
  if (skipReason !== undefined) return t.skip(skipReason);
  const Redis = ioredis('ioredis4');
  const client = new Redis(server.url, { lazyConnect: true });
  const refused = (e: unknown) =>
    isFloodgateError(e, ErrorCode.INVALID_CLIENT) && e.message.includes('ioredis 4 is not supported: use ioredis 5 or later');
  assert.throws(() => new RedisStore({ client }), refused);
  assert.throws(() => new LocalFirstStore({ client }), refused);
  client.disconnect();
});

test('a node-redis 3 client is refused: INVALID_CLIENT "node-redis 3 is not supported: use node-redis 4 or later"', (t) => {
  if (skipReason !== undefined) return t.skip(skipReason);
  const { createClient } = load('redis3') as { createClient(options: object): IoredisClient & { quit(): unknown } };
  // node-redis 3 connects at once; pointed at the test server, and quit at the end.
  const client = createClient({ url: server.url });
  client.on('error', () => {});
  assert.throws(
    () => new RedisStore({ client }),
    (e: unknown) =>
      isFloodgateError(e, ErrorCode.INVALID_CLIENT) && e.message.includes('node-redis 3 is not supported: use node-redis 4 or later'),
  );
  client.quit();
});

describe('valkey-glide 2.3', () => {
  test('drives RedisStore (every operation of every algorithm) and LocalFirstStore', async (t) => {
    if (skipReason !== undefined) return t.skip(skipReason);
    const { GlideClient } = load('glide23') as GlideModule;
    const config = { addresses: [{ host: server.host, port: server.port }] };
    const [client, subscriber] = await Promise.all([GlideClient.createClient(config), GlideClient.createClient(config)]);
    try {
      const store = new RedisStore({ client });
      assert.equal(store.clientKind, 'glide');
      await smokeAllOperations(store, `glide23-${Date.now()}`);
      const local = new LocalFirstStore({ client, subscriber, channel: `glide23-${process.pid}` });
      try {
        await untilLive(local);
        await limitsAtTwo(local, `glide23-lf-${Date.now()}`);
      } finally {
        await local.close();
      }
    } finally {
      client.close();
      subscriber.close();
    }
  });
});

test('a valkey-glide 2.2 client is refused: INVALID_CLIENT "valkey-glide older than 2.3 is not supported"', async (t) => {
  if (skipReason !== undefined) return t.skip(skipReason);
  const { GlideClient } = load('glide22') as GlideModule;
  const client = await GlideClient.createClient({ addresses: [{ host: server.host, port: server.port }] });
  try {
    const refused = (e: unknown) =>
      isFloodgateError(e, ErrorCode.INVALID_CLIENT) &&
      e.message.includes('valkey-glide older than 2.3 is not supported: use valkey-glide 2.3 or later');
    assert.throws(() => new RedisStore({ client }), refused);
    assert.throws(() => new LocalFirstStore({ client, subscriber: client }), refused);
  } finally {
    client.close();
  }
});
