// A reload that replaces the upstream pool while decisions are pending on a stalled real Redis: the requests decided on the old pool are still forwarded on it, none gets 502.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { sleep, untilReady } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const fixture = redisGatewayFixture();

describe('gateway: reload and the upstream pool', () => {
  it('regression: a reload that replaces the upstream pool while decisions are pending gives no 502', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nstore: { type: redis, url: "${fixture.redis.url}", timeout: 10s }\nrules: [{ name: all, key: ip, policies: ["1000/1m"] }]`,
    );
    await untilReady(`${g.url}/_floodgate/readyz`);
    assert.equal((await get(`${g.url}/warm`)).status, 200);
    fixture.redis.pause();
    let replies: Array<Promise<{ status: number }>>;
    try {
      // Every one of these is waiting for its decision (Redis is stopped) when the pool is replaced.
      replies = Array.from({ length: 20 }, (_, i) => get(`${g.url}/pending/${i}`, { timeoutMs: 8000 }));
      await sleep(200);
      g.apply({ ...g.current, proxy: { ...g.current.proxy, connections: g.current.proxy.connections + 1 } });
    } finally {
      fixture.redis.resume();
    }
    const statuses = (await Promise.all(replies)).map((r) => r.status);
    assert.deepEqual(
      statuses,
      Array.from({ length: 20 }, () => 200),
    );
    assert.equal((await get(`${g.url}/after`)).status, 200, 'the new pool serves');
  });
});
