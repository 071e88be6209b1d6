// RedisStore on a single Redis through node-redis v5: Lua/TypeScript parity, every operation on Redis time, coalescing and NOSCRIPT.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'redis';
import { RedisStore } from '../../src/stores/redis/index.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { checkScriptFlushRecovery, consumeTwoKeysInOneTick, differential, smokeAllOperations } from './helpers.js';

let server: RedisServer;
let client: ReturnType<typeof createClient>;

before(async () => {
  server = await startRedis();
  client = createClient({ url: server.url });
  client.on('error', () => {});
  await client.connect();
});
after(async () => {
  client.destroy();
  await server.stop();
});

describe('node-redis', () => {
  test('the store reports its client', () => {
    assert.equal(new RedisStore({ client }).clientKind, 'node-redis');
  });

  test('Lua decides exactly as applyOperation', async () => {
    const checked = await differential({
      makeStore: (clock) => new RedisStore({ client, clock }),
      seed: 11,
      policies: 16,
      ticks: 30,
      prefix: 'diff-nr',
    });
    assert.ok(checked > 1000);
  });

  test('every operation and algorithm on Redis time, with a sub-second window', async () => {
    await smokeAllOperations(new RedisStore({ client }), `smoke-nr-${Date.now()}`);
  });

  test('one script call per key per tick, in arrival order, across keys', async () => {
    const key = `coalesce-nr-${Date.now()}`;
    const { remaining, info } = await consumeTwoKeysInOneTick(new RedisStore({ client }), (args) => client.sendCommand(args), key);
    assert.match(info, /cmdstat_evalsha:calls=2,/);
    assert.deepEqual(remaining, [3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0]);
  });

  test('SCRIPT FLUSH is recovered transparently', async () => {
    await checkScriptFlushRecovery(new RedisStore({ client }), (args) => client.sendCommand(args), `noscript-nr-${Date.now()}`);
  });
});
