// The gateway end to end on the memory store: a real upstream behind an in-process gateway built from YAML; limits per API key and per IP, rules, shadow mode, the decision endpoint, metrics, proxying details and upstream faults.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { get, statuses } from '../../http/support/http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { gatewayFixture, parseMetrics, startUpstream } from '../support/harness.js';

const fixture = gatewayFixture();

function gateway(yaml: string): Promise<Gateway> {
  return fixture.start(`upstream: ${fixture.upstream.url}\n${yaml}`);
}

const RULES = `
rules:
  - name: v2-shadow
    match: { pathPattern: "^/v2/" }
    key: header:x-api-key
    shadow: true
    policies: ["1/1m"]
  - name: login
    match: { methods: [POST], path: /login }
    key: ip
    policies: ["2/1m"]
  - name: tenant-beta
    match: { headers: { x-tenant: beta } }
    key: header:x-api-key
    policies: [{ name: beta, limit: 1, window: 1m }]
  - name: api
    match: { path: /api/, host: "*.example.test" }
    key: header:x-api-key
    policies: ["3/1m", { name: daily, limit: 100, window: 1d }]
`;

describe('gateway: limits', () => {
  it('limits per API key: each key gets its own quota, 429s carry RateLimit and Retry-After, the upstream never sees them', async () => {
    const g = await gateway(RULES);
    const host = { host: 'shop.example.test' };
    const alice = await statuses(`${g.url}/api/orders`, 4, { headers: { ...host, 'x-api-key': 'alice' } });
    const bob = await statuses(`${g.url}/api/orders`, 2, { headers: { ...host, 'x-api-key': 'bob' } });
    assert.deepEqual(alice, [200, 200, 200, 429]);
    assert.deepEqual(bob, [200, 200]);
    const refused = await get(`${g.url}/api/orders`, { headers: { ...host, 'x-api-key': 'alice' } });
    assert.equal(refused.status, 429);
    // Refused again, now by the in-memory block, which spares the store the call that would read "daily" (on every
    // store, so the memory store's answer is Redis's): the fields name the refusing policy alone.
    assert.equal(refused.headers['ratelimit-policy'], '"3-per-1m";q=3;w=60');
    assert.match(String(refused.headers.ratelimit), /^"3-per-1m";r=0;t=\d+$/);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    assert.equal(JSON.parse(refused.body).status, 429);
    const ok = await get(`${g.url}/api/x`, { headers: { ...host, 'x-api-key': 'carol' } });
    assert.equal(ok.headers['ratelimit-policy'], '"3-per-1m";q=3;w=60, "daily";q=100;w=86400', 'admitted answers carry the fields too');
    assert.equal(fixture.upstream.seen.filter((r) => r.headers['x-api-key'] === 'alice').length, 3);
    // A request without the key header is answered 401 by the gateway.
    const missing = await get(`${g.url}/api/orders`, { headers: host });
    assert.equal(missing.status, 401);
    assert.equal(missing.headers['www-authenticate'], 'ApiKey header="x-api-key"');
  });

  it('limits per IP, only for the matching method and path; other requests pass unlimited', async () => {
    const g = await gateway(RULES);
    assert.deepEqual(await statuses(`${g.url}/login`, 3, { method: 'POST' }), [200, 200, 429]);
    assert.deepEqual(await statuses(`${g.url}/login`, 3), [200, 200, 200], 'GET /login matches no rule');
    assert.deepEqual(
      await statuses(`${g.url}/api/orders`, 4, { headers: { 'x-api-key': 'k' } }),
      [200, 200, 200, 200],
      'host does not match',
    );
  });

  it('matches on a header value; every matching enforced rule applies, the first refusal answers', async () => {
    const g = await gateway(RULES);
    const h = { 'x-tenant': 'beta', 'x-api-key': 'z', host: 'a.example.test' };
    assert.deepEqual(await statuses(`${g.url}/api/orders`, 2, { headers: h }), [200, 429]);
  });

  it('shadow mode: counts and reports (Floodgate-Shadow, metrics) but never refuses', async () => {
    const g = await gateway(RULES);
    const replies = [];
    for (let i = 0; i < 3; i += 1) replies.push(await get(`${g.url}/v2/items`, { headers: { 'x-api-key': 'sam' } }));
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200, 200],
    );
    assert.deepEqual(
      replies.map((r) => r.headers['floodgate-shadow']),
      ['"v2-shadow";outcome=allowed', '"v2-shadow";outcome=limited', '"v2-shadow";outcome=limited'],
    );
    // With an enforced rule after it, both apply: the shadow reports, the enforced one decides.
    const both = await get(`${g.url}/v2/items`, { headers: { 'x-api-key': 'sam', 'x-tenant': 'beta' } });
    assert.equal(both.status, 200);
    assert.equal(both.headers['floodgate-shadow'], '"v2-shadow";outcome=limited');
    assert.equal(both.headers['ratelimit-policy'], '"beta";q=1;w=60');
    const m = parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body);
    assert.equal(m.get('floodgate_decisions_total{rule="v2-shadow",outcome="shadow_limited"}'), 3);
    assert.equal(m.get('floodgate_decisions_total{rule="v2-shadow",outcome="shadow_allowed"}'), 1);
  });
});

describe('gateway: decision endpoint', () => {
  it('answers 204 or 429 for the request described by X-Original-*, with the RateLimit fields, without calling the upstream', async () => {
    const g = await gateway(RULES);
    const before = fixture.upstream.seen.length;
    const ask = (extra: Record<string, string> = {}, query = '') =>
      get(`${g.url}/_floodgate/decide${query}`, { headers: { 'x-original-uri': '/login?next=/', 'x-original-method': 'POST', ...extra } });
    const answers = [await ask(), await ask(), await ask(), await ask({}, '?status=403')];
    assert.deepEqual(
      answers.map((a) => a.status),
      [204, 204, 429, 403],
    );
    assert.match(String(answers[0]!.headers.ratelimit), /^"2-per-1m";r=1;t=\d+$/);
    assert.ok(Number(answers[2]!.headers['retry-after']) >= 1);
    // A described request that no rule matches is allowed.
    assert.equal((await ask({ 'x-original-method': 'GET' })).status, 204);
    assert.equal(fixture.upstream.seen.length, before);
  });
});

describe('gateway: metrics and health', () => {
  it('exports decisions by rule and outcome, store and upstream latency, in-flight and health', async () => {
    const g = await gateway(RULES);
    await statuses(`${g.url}/login`, 3, { method: 'POST' });
    await get(`${g.url}/other`);
    const reply = await get(`${g.url}/_floodgate/metrics`);
    assert.equal(reply.status, 200);
    assert.match(String(reply.headers['content-type']), /^text\/plain/);
    const m = parseMetrics(reply.body);
    assert.equal(m.get('floodgate_decisions_total{rule="login",outcome="allowed"}'), 2);
    assert.equal(m.get('floodgate_decisions_total{rule="login",outcome="limited"}'), 1);
    assert.equal(m.get('floodgate_decisions_total{rule="(none)",outcome="unmatched"}'), 1);
    // The embedded memory store is not timed (its calls take about a microsecond); test/gateway/store/redis.test.ts checks Redis's.
    assert.ok(![...m.keys()].some((name) => name.startsWith('floodgate_store_duration_seconds_count{store="memory"')));
    assert.equal(m.get('floodgate_upstream_duration_seconds_count{outcome="response"}'), 3);
    assert.ok(m.has('floodgate_requests_in_flight'));
    assert.ok(m.has('process_cpu_seconds_total'));
    assert.equal((await get(`${g.url}/_floodgate/healthz`)).status, 200);
    assert.equal((await get(`${g.url}/_floodgate/readyz`)).status, 200);
  });

  it('serves the admin endpoints on a separate listener with admin:', async () => {
    const g = await gateway(`admin: 127.0.0.1:0\nrules: []\n`);
    assert.ok(g.adminUrl);
    assert.equal((await get(`${g.adminUrl}/metrics`)).status, 200);
    assert.equal((await get(`${g.adminUrl}/readyz`)).status, 200);
    assert.equal((await get(`${g.adminUrl}/nope`)).status, 404);
  });
});

describe('gateway: proxying', () => {
  it('streams bodies, drops the hop-by-hop headers both ways (not the names a client lists in Connection), and sets X-Forwarded-*', async () => {
    const g = await gateway('rules: []');
    const port = new URL(g.url).port;
    const reply = await get(`${g.url}/echo?q=1`, {
      method: 'POST',
      headers: {
        connection: 'keep-alive, x-hop',
        'x-hop': 'keep me',
        'x-keep': 'yes',
        'x-forwarded-for': '203.0.113.9',
        te: 'trailers',
        'content-type': 'text/plain',
      },
    });
    const echoed = JSON.parse(reply.body);
    assert.equal(echoed.url, '/echo?q=1');
    assert.equal(echoed.headers['x-hop'], 'keep me', 'a client naming an end-to-end header in Connection does not remove it');
    assert.equal(echoed.headers.te, undefined);
    assert.equal(echoed.headers['x-keep'], 'yes');
    assert.equal(echoed.headers['x-forwarded-for'], '127.0.0.1', "an untrusted peer's X-Forwarded-For is replaced by its address");
    assert.equal(echoed.headers['x-forwarded-proto'], 'http');
    assert.equal(echoed.headers['x-forwarded-host'], `127.0.0.1:${port}`);
    const streamed = await get(`${g.url}/stream`);
    assert.equal(streamed.body, 'part1;part2');
    assert.equal(streamed.headers['x-upstream-hop'], undefined, 'a header the upstream lists in Connection is hop-by-hop');
  });

  it("adds its RateLimit fields to the upstream's own: IETF lists combined, legacy fields replaced, repeated fields kept", async () => {
    const g = await gateway('headers: [ietf, legacy]\nrules: [{ name: all, key: ip, policies: [{ limit: 5, window: 1m, name: gw }] }]');
    const reply = await get(`${g.url}/own-limits`);
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'own');
    assert.equal(reply.headers['ratelimit-policy'], '"app";q=50;w=60, "gw";q=5;w=60');
    assert.equal(reply.headers['ratelimit'], '"app";r=49;t=60, "gw";r=4;t=60');
    assert.equal(reply.headers['x-ratelimit-limit'], '5');
    assert.deepEqual(reply.headers['set-cookie'], ['a=1', 'b=2']);
  });

  it('forwards a large request body intact', async () => {
    const g = await gateway('rules: []');
    const big = 'x'.repeat(3_000_000);
    const { request } = await import('node:http');
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(`${g.url}/upload`, { method: 'PUT', agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      });
      req.on('error', reject);
      req.end(big);
    });
    assert.equal(JSON.parse(body).body.length, big.length);
  });

  it('answers 431 to oversized request headers (proxy.maxHeaderSize)', async () => {
    const g = await gateway('proxy: { maxHeaderSize: 2048 }\nrules: []');
    const reply = await rawRequest(g.url, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4000)}\r\n\r\n`);
    assert.match(reply, /^HTTP\/1.1 431/);
  });

  it('passes a WebSocket upgrade through, after the rate-limit decision', async () => {
    const g = await gateway('rules: [{ name: ws, key: ip, policies: ["1/1m"] }]');
    const first = await rawRequest(g.url, WS_HANDSHAKE, 'ping');
    assert.match(first, /^HTTP\/1.1 101/);
    assert.match(first, /RateLimit: "1-per-1m";r=0/);
    assert.match(first, /echo:ping/);
    const second = await rawRequest(g.url, WS_HANDSHAKE);
    assert.match(second, /^HTTP\/1.1 429/);
  });
});

describe('gateway: upstream faults', () => {
  it('answers 502 when the upstream is down, keeping the RateLimit fields', async () => {
    const dead = await startUpstream();
    await dead.close();
    const g = await fixture.start(`upstream: ${dead.url}\nrules: [{ name: all, policies: ["100/1m"] }]`);
    const reply = await get(`${g.url}/`);
    assert.equal(reply.status, 502);
    assert.equal(JSON.parse(reply.body).title, 'Bad Gateway');
    assert.match(String(reply.headers.ratelimit), /r=99/);
    const m = parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body);
    assert.equal(m.get('floodgate_upstream_errors_total{kind="connect"}'), 1);
  });

  it('answers 504 when the upstream is slower than proxy.headersTimeout', async () => {
    const g = await gateway('proxy: { headersTimeout: 200ms }\nrules: []');
    const started = Date.now();
    const reply = await get(`${g.url}/slow?ms=1500`);
    assert.equal(reply.status, 504);
    assert.ok(Date.now() - started < 1400, 'answered at the timeout, not when the upstream finished');
    assert.equal((await get(`${g.url}/slow?ms=10`)).status, 200, 'a fast answer still passes');
  });
});

const WS_HANDSHAKE =
  'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';

/** Sends raw bytes on a new connection and collects what comes back for a moment (or until the server closes). */
function rawRequest(base: string, head: string, after?: string): Promise<string> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    socket.on('data', (d: Buffer) => {
      data += d.toString('utf8');
      if (after !== undefined && data.includes('\r\n\r\n') && data.startsWith('HTTP/1.1 101')) {
        socket.write(after);
        after = undefined;
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(data));
    socket.write(head);
    setTimeout(() => socket.destroy(), 400);
  });
}
