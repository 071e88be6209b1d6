// A reload that replaces the upstream pool while decisions are pending on a stalled real Redis: the requests decided on the old pool are still forwarded on it, none gets 502.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get } from '../http/support/http.js';
import type { Gateway } from '../../src/gateway/serve/gateway.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { sleep, startGateway, startUpstream, type Upstream } from './support/harness.js';

let upstream: Upstream;
let redis: RedisServer;
let gateway: Gateway | undefined;
before(async () => {
  [upstream, redis] = await Promise.all([startUpstream(), startRedis()]);
});
after(async () => {
  await gateway?.shutdown();
  await upstream.close();
  await redis.stop();
});

describe('gateway: reload and the upstream pool', () => {
  it('regression: a reload that replaces the upstream pool while decisions are pending gives no 502', async () => {
    const g = await startGateway(
      `upstream: ${upstream.url}\nstore: { type: redis, url: "${redis.url}", timeout: 10s }\nrules: [{ name: all, key: ip, policies: ["1000/1m"] }]`,
    );
    gateway = g;
    for (let i = 0; i < 50 && (await get(`${g.url}/_floodgate/readyz`)).status !== 200; i += 1) await sleep(20);
    assert.equal((await get(`${g.url}/warm`)).status, 200);
    redis.pause();
    let replies: Array<Promise<{ status: number }>>;
    try {
      // Every one of these is waiting for its decision (Redis is stopped) when the pool is replaced.
      replies = Array.from({ length: 20 }, (_, i) => get(`${g.url}/pending/${i}`, { timeoutMs: 8000 }));
      await sleep(200);
      g.apply({ ...g.current, proxy: { ...g.current.proxy, connections: g.current.proxy.connections + 1 } });
    } finally {
      redis.resume();
    }
    const statuses = (await Promise.all(replies)).map((r) => r.status);
    assert.deepEqual(
      statuses,
      Array.from({ length: 20 }, () => 200),
    );
    assert.equal((await get(`${g.url}/after`)).status, 200, 'the new pool serves');
  });
});
