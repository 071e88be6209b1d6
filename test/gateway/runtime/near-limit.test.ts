// floodgate_near_limit_total{rule,policy} through /metrics, on the memory store and on Redis: admitted requests that leave
// their key at or past the rule's nearLimit share of a policy's limit, with no label per key.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get, statuses } from '../../http/support/http.js';
import { parseMetrics, type GatewayFixture } from '../support/harness.js';
import { gatewayFixture } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const rules = `rules:
  - name: api
    match: { path: /api }
    key: header:x-api-key
    policies: [{ name: per-minute, limit: 10, window: 1m }, { name: per-hour, limit: 100, window: 1h }]
  - name: login
    match: { path: /login }
    key: header:x-api-key
    nearLimit: 0.5
    policies: [{ limit: 4, window: 1h }]
    count: { status: [2xx] }
`;

async function nearLimit(gw: Gateway): Promise<Map<string, number>> {
  const text = (await get(`${gw.url}/_floodgate/metrics`)).body;
  assert.ok(!/floodgate_near_limit_total\{[^}]*key=/.test(text), 'no key label');
  return parseMetrics(text);
}

function suite(name: string, fixture: () => GatewayFixture & { store: () => string }): void {
  describe(`floodgate_near_limit_total on ${name}`, () => {
    const f = fixture();
    it('counts per rule and policy the admitted requests at or past the ratio (0.8 by default, the rule’s nearLimit)', async () => {
      const gw = await f.start(`upstream: ${f.upstream.url}\n${f.store()}${rules}`);
      const headers = { 'x-api-key': 'k1' };
      // 12 requests of one key against 10/min: requests 8, 9 and 10 leave 8, 9 and 10 of 10 used (≥ 0.8); 11 and 12 are refused.
      const answered = await statuses(`${gw.url}/api`, 12, { headers });
      assert.deepEqual(answered, [...Array<number>(10).fill(200), 429, 429]);
      // Another key at 3 of 10: nowhere near.
      await statuses(`${gw.url}/api`, 3, { headers: { 'x-api-key': 'k2' } });
      let m = await nearLimit(gw);
      assert.equal(m.get('floodgate_near_limit_total{rule="api",policy="per-minute"}'), 3);
      assert.equal(m.get('floodgate_near_limit_total{rule="api",policy="per-hour"}'), undefined);
      // The rule's own nearLimit: 0.5 of 4, reached by the 2nd and 3rd answers that count.
      for (let i = 0; i < 3; i++) assert.equal((await get(`${gw.url}/login`, { headers })).status, 200);
      m = await nearLimit(gw);
      assert.equal(m.get('floodgate_near_limit_total{rule="login",policy="4-per-1h"}'), 2);
    });
  });
}

suite('memory', () => Object.assign(gatewayFixture(), { store: () => '' }));
suite('redis', () => {
  const f = redisGatewayFixture();
  return Object.assign(f, { store: () => `store: { type: redis, url: "${f.redis.url}" }\n` });
});
