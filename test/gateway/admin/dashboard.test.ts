// The live dashboard's endpoints on real sockets: the page on the admin listener only, its stats behind the admin token, and numbers that equal /metrics; on Redis, the breaker and fallback as the store goes away and comes back.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { DashboardStats } from '../../../src/gateway/admin/dashboard-stats.js';
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { gatewayFixture, parseMetrics, untilReady } from '../support/harness.js';

const fixture = gatewayFixture();
const TOKEN = 'dashboard-token-0123456789abcdef';

const config = (upstream: string, extra = '', token = `  token: ${TOKEN}\n`): string =>
  `upstream: ${upstream}\nadmin:\n  listen: 127.0.0.1:0\n${token}${extra}rules:\n` +
  '  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { name: burst, limit: 3, window: 1h }\n';

async function stats(g: Gateway, token: string | null = TOKEN): Promise<{ status: number; headers: Headers; json: DashboardStats }> {
  const res = await fetch(`${g.adminUrl}/admin/stats`, token === null ? {} : { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, headers: res.headers, json: (await res.json()) as DashboardStats };
}

async function metrics(g: Gateway): Promise<Map<string, number>> {
  return parseMetrics((await get(`${g.adminUrl}/metrics`)).body);
}

/** Each latency series of the stats equals its /metrics series: count, sum and every bucket. */
function assertLatencyMatches(s: DashboardStats, m: Map<string, number>): void {
  for (const l of s.store.latency) {
    const labels = `store="${l.store}",result="${l.result}"`;
    assert.equal(m.get(`floodgate_store_duration_seconds_count{${labels}}`), l.count, labels);
    assert.equal(m.get(`floodgate_store_duration_seconds_sum{${labels}}`), l.sumSeconds, labels);
    for (const b of l.buckets)
      assert.equal(m.get(`floodgate_store_duration_seconds_bucket{le="${b.le}",${labels}}`), b.count, `${labels} ${b.le}`);
    assert.deepEqual(
      l.buckets.map((b) => b.le),
      [...l.buckets.map((b) => b.le)].sort((x, y) => x - y),
    );
  }
}

const send = (g: Gateway, key?: string) => get(`${g.url}/x`, key === undefined ? {} : { headers: { 'x-api-key': key } });

describe('gateway: dashboard', () => {
  it('serves the page on the admin listener without a token, with a policy that lets only its own script and style run', async () => {
    const g = await fixture.start(config(fixture.upstream.url));
    const page = await get(`${g.adminUrl}/admin/dashboard`);
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.match(page.body, /<table id="decisions">/);
    assert.doesNotMatch(page.body, /https?:\/\//, 'nothing is loaded from elsewhere');
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /frame-ancestors 'none'/);
    // The hashes must be of exactly what the page inlines, or a browser would run none of it.
    const digest = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    const script = /<script>([\s\S]*)<\/script>/.exec(page.body)![1]!;
    const style = /<style>([\s\S]*)<\/style>/.exec(page.body)![1]!;
    assert.ok(csp.includes(`script-src ${digest(script)}`), csp);
    assert.ok(csp.includes(`style-src ${digest(style)}`), csp);
    const posted = await get(`${g.adminUrl}/admin/dashboard`, { method: 'POST' });
    assert.equal(posted.status, 405);
    assert.equal(posted.headers.allow, 'GET, HEAD');
    const head = await get(`${g.adminUrl}/admin/dashboard`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    assert.equal(Number(head.headers['content-length']), Buffer.byteLength(page.body));
  });

  it('is not on the proxy port: there both paths are requests like any other, forwarded upstream', async () => {
    const g = await fixture.start(config(fixture.upstream.url));
    for (const path of ['/admin/dashboard', '/admin/stats']) {
      const r = await get(`${g.url}${path}`, { headers: { 'x-api-key': 'k', authorization: `Bearer ${TOKEN}` } });
      assert.equal(r.status, 200);
      assert.equal(JSON.parse(r.body).url, path, 'the upstream answered');
    }
  });

  it('answers neither path when the admin listener has no token', async () => {
    const g = await fixture.start(config(fixture.upstream.url, '', ''));
    assert.equal((await get(`${g.adminUrl}/admin/dashboard`)).status, 404);
    assert.equal((await stats(g)).status, 404);
  });

  it('GET /admin/stats: 401 without the token or with a wrong one', async () => {
    const g = await fixture.start(config(fixture.upstream.url));
    for (const token of [null, 'wrong', `${TOKEN}x`]) {
      const r = await stats(g, token);
      assert.equal(r.status, 401, String(token));
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="floodgate admin"');
      assert.match(String((r.json as unknown as { error: string }).error), /bearer token/);
    }
    assert.equal((await stats(g)).status, 200);
    // The token first: without it not even a wrong method is told.
    assert.equal((await get(`${g.adminUrl}/admin/stats`, { method: 'POST' })).status, 401);
    const posted = await get(`${g.adminUrl}/admin/stats`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(posted.status, 405);
  });

  it('counts equal /metrics after a known number of requests; the most-limited keys and each policy are listed', async () => {
    const g = await fixture.start(config(fixture.upstream.url));
    const statuses = [];
    for (let i = 0; i < 5; i += 1) statuses.push((await send(g, 'alpha')).status);
    statuses.push((await send(g, 'beta')).status, (await send(g)).status);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429, 200, 401]);

    const r = await stats(g);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    const s = r.json;
    assert.ok(Math.abs(s.at - Date.now()) < 60_000, 'at is a time in ms since the epoch');
    // A series appears with its first decision, in the stats as in /metrics.
    const count = (outcome: string) => s.decisions.find((d) => d.rule === 'api' && d.outcome === outcome)?.count ?? 0;
    assert.deepEqual([count('allowed'), count('limited'), count('missing_key'), count('store_error')], [4, 2, 1, 0]);
    const m = await metrics(g);
    for (const d of s.decisions)
      assert.equal(m.get(`floodgate_decisions_total{rule="${d.rule}",outcome="${d.outcome}"}`) ?? 0, d.count, `${d.rule} ${d.outcome}`);

    assert.deepEqual(s.limited, { minutes: 5, rules: [{ rule: 'api', keys: [{ policy: 'burst', key: 'alpha', refusals: 2 }] }] });
    assert.deepEqual(s.rules, [
      {
        rule: 'api',
        shadow: false,
        policies: [{ policy: 'burst', breaker: 'closed', retryInMs: 0, fallback: 'reject', fallbackInUse: false }],
      },
    ]);
    assert.equal(s.store.connected, true);
    assert.match(s.store.description, /^memory/);
    assert.deepEqual(s.store.latency, [], 'the embedded memory store answers in the process: nothing to time');
  });
});

describe('gateway: dashboard on Redis', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });

  it('shows the breaker open and the insurance answering while Redis is down, and the store back after', async () => {
    const g = await fixture.start(
      // readiness.store: /readyz then says when Redis is connected and the breaker past its cooldown, which the test waits for.
      config(
        fixture.upstream.url,
        `store: { type: redis, url: "${redis.url}", timeout: 200ms, onFailure: insurance }\nreadiness: { store: true }\n`,
      ),
    );
    await untilReady(`${g.adminUrl}/readyz`);
    for (let i = 0; i < 4; i += 1) assert.equal((await send(g, `k${i}`)).status, 200);
    let s = (await stats(g)).json;
    assert.equal(s.store.connected, true);
    assert.deepEqual(
      s.store.latency.map((l) => [l.result, l.count]),
      [['ok', 4]],
      'one timed Redis call per request',
    );
    assertLatencyMatches(s, await metrics(g));
    assert.equal(s.store.latency[0]!.buckets.length, 13);
    assert.match(s.store.description, /^redis /);
    assert.deepEqual(s.rules[0]!.policies, [
      { policy: 'burst', breaker: 'closed', retryInMs: 0, fallback: 'insurance', fallbackInUse: false },
    ]);

    await redis.kill();
    try {
      // The breaker opens after five failed calls in a row; each request makes one.
      for (let i = 0; i < 5; i += 1) await send(g, `down-${i}`);
      s = (await stats(g)).json;
      assert.equal(s.store.connected, false);
      const p = s.rules[0]!.policies[0]!;
      assert.equal(p.breaker, 'open');
      assert.ok(p.retryInMs > 0);
      assert.equal(p.fallbackInUse, true);
      assert.ok((s.store.latency.find((l) => l.result === 'error')?.count ?? 0) > 0, 'the failed calls are timed too');
      assertLatencyMatches(s, await metrics(g));
    } finally {
      await redis.restart();
    }
    // Back: once connected and past the cooldown, the next request is the probe that closes the breaker.
    await untilReady(`${g.adminUrl}/readyz`, 200, 25);
    assert.equal((await send(g, 'after')).status, 200);
    s = (await stats(g)).json;
    assert.equal(s.store.connected, true);
    assert.deepEqual(s.rules[0]!.policies[0], {
      policy: 'burst',
      breaker: 'closed',
      retryInMs: 0,
      fallback: 'insurance',
      fallbackInUse: false,
    });
  });
});
