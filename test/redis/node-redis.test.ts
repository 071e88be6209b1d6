// RedisStore on a single Redis through node-redis v5: Lua/TypeScript parity, every operation on Redis time, coalescing and NOSCRIPT.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'redis';
import type { Policy } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { differential, smokeAllOperations } from './helpers.js';

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

const policy = (algorithm: Policy['algorithm'], limit: number, windowMs: number): Policy =>
  Object.freeze({ algorithm, limit, windowMs, blockMs: 0 });

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
    const store = new RedisStore({ client });
    const p = policy('fixed-window', 4, 60_000);
    const key = `coalesce-nr-${Date.now()}`;
    await client.sendCommand(['CONFIG', 'RESETSTAT']);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => store.apply({ kind: 'consume', key: `${key}:${i % 2}`, amount: 1, policy: p })),
    );
    const info = String(await client.sendCommand(['INFO', 'commandstats']));
    assert.match(info, /cmdstat_evalsha:calls=2,/);
    assert.deepEqual(
      results.map((o) => o.remaining),
      [3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0],
    );
  });

  test('SCRIPT FLUSH is recovered transparently', async () => {
    const store = new RedisStore({ client });
    const p = policy('sliding-log', 5, 60_000);
    const key = `noscript-nr-${Date.now()}`;
    assert.equal((await store.apply({ kind: 'consume', key, amount: 1, policy: p })).remaining, 4);
    await client.sendCommand(['SCRIPT', 'FLUSH']);
    const both = await Promise.all([
      store.apply({ kind: 'consume', key, amount: 1, policy: p }),
      store.apply({ kind: 'consume', key: `${key}:2`, amount: 1, policy: p }),
    ]);
    assert.deepEqual(
      both.map((o) => o.remaining),
      [3, 4],
    );
  });
});
