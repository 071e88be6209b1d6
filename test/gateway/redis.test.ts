// The gateway on a real Redis: one quota shared by two gateway instances, and what each failure policy does when Redis is SIGKILLed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get, statuses } from '../http/support/http.js';
import type { Gateway } from '../../src/gateway/server.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { parseMetrics, sleep, startGateway, startUpstream, type Upstream } from './support/harness.js';

let upstream: Upstream;
let redis: RedisServer;
const gateways: Gateway[] = [];
before(async () => {
  [upstream, redis] = await Promise.all([startUpstream(), startRedis()]);
});
after(async () => {
  await Promise.all(gateways.map((g) => g.shutdown()));
  await upstream.close();
  await redis.stop();
});

async function gateway(store: string, rules: string, logLines?: Array<Record<string, unknown>>): Promise<Gateway> {
  const g = await startGateway(`upstream: ${upstream.url}\nstore: { type: redis, url: "${redis.url}", timeout: 200ms ${store} }\n${rules}`, {}, logLines);
  gateways.push(g);
  // readyz turns 200 once the Redis client is connected.
  for (let i = 0; i < 50 && (await get(`${g.url}/_floodgate/readyz`)).status !== 200; i += 1) await sleep(20);
  return g;
}

describe('gateway on Redis', () => {
  it('shares one quota per API key across two instances (and per IP)', async () => {
    const rules = `rules:
  - { name: keyed, match: { path: /api/ }, key: "header:x-api-key", policies: ["3/1m"] }
  - { name: by-ip, key: ip, policies: ["2/1m"] }`;
    const [a, b] = [await gateway('', rules), await gateway('', rules)];
    const h = { headers: { 'x-api-key': 'shared-key' } };
    const seq = [
      (await get(`${a.url}/api/x`, h)).status,
      (await get(`${b.url}/api/x`, h)).status,
      (await get(`${a.url}/api/x`, h)).status,
      (await get(`${b.url}/api/x`, h)).status,
    ];
    assert.deepEqual(seq, [200, 200, 200, 429]);
    assert.equal((await get(`${b.url}/api/x`, { headers: { 'x-api-key': 'other' } })).status, 200);
    assert.deepEqual([...(await statuses(`${a.url}/home`, 1)), ...(await statuses(`${b.url}/home`, 2))], [200, 200, 429]);
    const m = parseMetrics((await get(`${a.url}/_floodgate/metrics`)).body);
    assert.ok((m.get('floodgate_store_duration_seconds_count{store="redis",result="ok"}') ?? 0) >= 3);
  });

  it('runs on the local-first store (localFirst: true) with the same limits', async () => {
    const rules = 'rules: [{ name: lf, key: "header:x-api-key", policies: ["3/1m"] }]';
    const [a, b] = [await gateway(', localFirst: true', rules), await gateway(', localFirst: true', rules)];
    const h = { headers: { 'x-api-key': 'lf-key' } };
    const seq = [...(await statuses(`${a.url}/`, 2, h)), ...(await statuses(`${b.url}/`, 3, h))];
    assert.deepEqual(seq.filter((s) => s === 200).length, 3, `3 admitted across both instances: ${seq}`);
  });

  it('falls back per store.onFailure when Redis is SIGKILLed: insurance, fail-open, fail-closed, reject', async () => {
    const rules = 'rules: [{ name: r, key: "header:x-api-key", policies: ["2/1m"] }]';
    // Each logs the outage once (not once per request), whatever decides meanwhile.
    const logs = { insured: [], open: [], closed: [], reject: [] } as Record<string, Array<Record<string, unknown>>>;
    const insured = await gateway(', onFailure: insurance', rules, logs.insured);
    const open = await gateway(', onFailure: fail-open', rules, logs.open);
    const closed = await gateway(', onFailure: fail-closed', rules, logs.closed);
    const reject = await gateway(', onFailure: reject', rules, logs.reject);
    const h = (k: string) => ({ headers: { 'x-api-key': k } });
    assert.equal((await get(`${insured.url}/`, h('before'))).status, 200);

    await redis.kill();
    try {
      // Insurance: the per-instance memory limiter takes over with the same policy.
      assert.deepEqual(await statuses(`${insured.url}/`, 3, h('during')), [200, 200, 429]);
      assert.deepEqual(await statuses(`${open.url}/`, 3, h('during')), [200, 200, 200]);
      const refused = await get(`${closed.url}/`, h('during'));
      assert.equal(refused.status, 429);
      assert.match(JSON.parse(refused.body).type, /temporary-reduced-capacity/);
      assert.equal((await get(`${reject.url}/`, h('during'))).status, 503);
      assert.equal((await get(`${insured.url}/_floodgate/readyz`)).status, 503, 'not ready while the store is down');
      assert.equal((await get(`${insured.url}/_floodgate/healthz`)).status, 200, 'but alive');
      for (const [mode, lines] of Object.entries(logs)) {
        assert.equal(lines.filter((l) => l.msg === 'rate-limit store problem').length, 1, `${mode}: ${JSON.stringify(lines)}`);
      }
    } finally {
      await redis.restart();
    }
  });
});
