// A process killed while it holds an outbound reservation and slot, on a real Redis: its estimate stays charged until its window ends and its slot comes back after its ttl, as the reservation and slot rules say; nothing is lost or held for good.
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { nextMessage } from '../support/child-messages.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { OutboundLimiter } from '../../src/egress/index.js';

const CHILD = fileURLToPath(new URL('../support/egress-holder.ts', import.meta.url));

let redis: RedisServer;
let client: Redis;
before(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
after(async () => {
  client.disconnect();
  await redis.stop();
});

test('a process killed mid-call: its tokens come back when their window ends, its slot when its ttl ends', async (t) => {
  const prefix = `killed:${process.pid}`;
  const child = fork(CHILD, [redis.url, prefix], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await nextMessage(child, 'holding');
  const killedAt = Date.now();
  child.kill('SIGKILL');
  const survivor = new OutboundLimiter({
    store: new RedisStore({ client }),
    prefix,
    tokens: { limit: 100, window: '2s' },
    concurrency: { limit: 1, ttl: '3s' },
  });
  // 50 tokens do not fit beside the dead call's 80 until its window ends, and its slot is held until its ttl ends.
  const startedAfter = await survivor.schedule('api', () => Date.now() - killedAt, { cost: 50, timeout: '10s' });
  t.diagnostic(`the survivor started ${startedAfter} ms after the kill (window 2 s, slot ttl 3 s)`);
  assert.ok(startedAfter >= 2000, `started ${startedAfter} ms after the kill, before the dead call's slot or tokens came back`);
  assert.ok(startedAfter < 4500, `started only ${startedAfter} ms after the kill`);
});
