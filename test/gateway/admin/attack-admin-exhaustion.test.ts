// Attacks that try to exhaust the admin listener on real sockets: slow heads, endless or trickled bodies with and without the token, more connections than it holds, and many admin requests at once, each while the proxy port must keep answering.
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { describe, it } from 'node:test';
import { ADMIN_MAX_CONNECTIONS, MAX_PIPELINED } from '../../../src/gateway/serve/listeners.js';
import { get } from '../../http/support/http.js';
import { freePort } from '../../support/redis-server.js';
import { gatewayFixture, serveCli, sleep, stopCli, writeTemp } from '../support/harness.js';
import { adminBlock } from '../support/admin.js';
import { requestBytes, sendRaw } from '../support/raw.js';
import { open, pour, trickleUntilClosed } from '../support/slow-client.js';

const fixture = gatewayFixture();
const TOKEN = 'attack-admin-token-0123456789abcdef';
const AUTH = `Authorization: Bearer ${TOKEN}`;

const CONFIG = (upstream: string, proxy = '') =>
  `upstream: ${upstream}\n${adminBlock(TOKEN)}${proxy}` +
  'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { limit: 1000, window: 1h }\n';

describe('attack: exhausting the admin listener', { timeout: 300_000 }, () => {
  it(
    'regression: a head sent one byte at a time is cut with 408 after proxy.clientHeadersTimeout, as on the proxy port (it had node’s 60 s and more)',
    { timeout: 20_000 },
    async () => {
      const g = await fixture.start(CONFIG(fixture.upstream.url, 'proxy: { clientHeadersTimeout: 1s }\n'));
      const slow = open(g.adminUrl!);
      slow.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      // Node's default (60 s, checked every 30 s) would outlast this test's timeout.
      await trickleUntilClosed(slow, 200);
      assert.match(slow.reply(), /^HTTP\/1\.1 408 /);
    },
  );

  it(
    `regression: the admin listener holds at most ${ADMIN_MAX_CONNECTIONS} connections, so idle ones cannot take the proxy port's file descriptors; the proxy answers meanwhile`,
    { timeout: 20_000 },
    async () => {
      const g = await fixture.start(CONFIG(fixture.upstream.url));
      const held = Array.from({ length: ADMIN_MAX_CONNECTIONS }, () => open(g.adminUrl!));
      try {
        await Promise.all(held.map((h) => new Promise((r) => (h.socket.connecting ? h.socket.once('connect', r) : r(undefined)))));
        // Each sends part of a head and stalls.
        for (const h of held) h.socket.write('GET /metrics HTTP/1.1\r\n');
        for (let i = 0; i < 100; i += 1) {
          const n = await new Promise<number>((resolve) => g.adminServer!.getConnections((_e, c) => resolve(c)));
          if (n === ADMIN_MAX_CONNECTIONS) break;
          await sleep(20);
        }
        const extra = Array.from({ length: 50 }, () => open(g.adminUrl!));
        // Past the cap, node closes a new connection as soon as it is accepted, without reading it.
        await Promise.all(extra.map((e) => e.closed));
        assert.ok(
          extra.every((e) => e.reply() === ''),
          'nothing was answered past the cap',
        );
        const n = await new Promise<number>((resolve) => g.adminServer!.getConnections((_e, c) => resolve(c)));
        assert.ok(n <= ADMIN_MAX_CONNECTIONS, `${n} admin connections held`);
        const proxied = await get(`${g.url}/while-admin-is-full`, { headers: { 'x-api-key': 'k' } });
        assert.equal(proxied.status, 200, 'the proxy port answers while the admin listener is full');
      } finally {
        for (const h of held) h.socket.destroy();
      }
      for (let i = 0; i < 100; i += 1) {
        if ((await get(`${g.adminUrl!}/healthz`).catch(() => ({ status: 0 }))).status === 200) break;
        await sleep(20);
      }
      assert.equal((await get(`${g.adminUrl!}/healthz`)).status, 200, 'the admin listener answers again once they are gone');
    },
  );

  it(
    `regression: a connection pipelining 5 000 requests for /metrics without reading is cut past ${MAX_PIPELINED} unanswered (node queued an answer for each: about 10 MB per connection)`,
    { timeout: 20_000 },
    async () => {
      const g = await fixture.start(CONFIG(fixture.upstream.url));
      const c = open(g.adminUrl!);
      c.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(5_000));
      await c.closed;
      const answers = c.reply().match(/^HTTP\/1\.1 /gm)?.length ?? 0;
      assert.ok(answers <= MAX_PIPELINED, `${answers} answers`);
      assert.equal((await get(`${g.adminUrl!}/healthz`)).status, 200, 'others are served');
    },
  );

  it(
    `regression: on the proxy port too, 5 000 pipelined requests without reading cut the connection past ${MAX_PIPELINED} (each was parsed and forwarded: about 160 MB held per connection)`,
    { timeout: 20_000 },
    async () => {
      const g = await fixture.start(CONFIG(fixture.upstream.url));
      const before = fixture.upstream.seen.length;
      const c = open(g.url);
      c.socket.write('GET /piped HTTP/1.1\r\nHost: x\r\nX-Api-Key: piped\r\n\r\n'.repeat(5_000));
      await c.closed;
      // Requests already forwarded finish at the upstream after the cut.
      await sleep(200);
      const forwarded = fixture.upstream.seen.slice(before).filter((r) => r.url === '/piped').length;
      assert.ok(forwarded <= MAX_PIPELINED, `${forwarded} forwarded`);
      assert.equal((await get(`${g.url}/after`, { headers: { 'x-api-key': 'other' } })).status, 200);
    },
  );

  it(
    'regression: a client that pipelines requests and leaves brings the in-flight count back to 0 (node never closed the answers queued behind the first), and frees its concurrency slots',
    { timeout: 20_000 },
    async () => {
      const g = await fixture.start(
        `upstream: ${fixture.upstream.url}\nrules:\n  - name: api\n    key: { header: x-api-key }\n    concurrency: { limit: 3, ttl: 10m }\n    policies: ["1000/1h"]\n`,
      );
      const c = open(g.url);
      c.socket.write('GET /slow?ms=300 HTTP/1.1\r\nHost: x\r\nX-Api-Key: piper\r\n\r\n'.repeat(3));
      // All three slots are taken while the upstream answers slowly; then the client is gone.
      for (let i = 0; i < 100 && fixture.upstream.seen.filter((r) => r.headers['x-api-key'] === 'piper').length < 1; i += 1)
        await sleep(10);
      c.socket.destroy();
      await sleep(600);
      const after = await get(`${g.url}/x`, { headers: { 'x-api-key': 'piper' } });
      assert.equal(after.status, 200, 'the slots were freed, not held until their ttl');
      const metrics = await get(`${g.url}/_floodgate/metrics`, { headers: { 'x-api-key': 'm' } });
      assert.match(metrics.body, /^floodgate_requests_in_flight 0$/m, 'nothing left in flight');
    },
  );

  it(`holds: ${MAX_PIPELINED} pipelined requests on one connection are all answered, in order`, async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const paths = Array.from({ length: MAX_PIPELINED }, (_, i) => ['/healthz', '/metrics', '/readyz', '/admin/rules'][i % 4]!);
    const r = await sendRaw(
      g.adminUrl!,
      paths
        .map((p, i) =>
          i === paths.length - 1 ? requestBytes(`GET ${p} HTTP/1.1`, [AUTH]) : `GET ${p} HTTP/1.1\r\nHost: x\r\n${AUTH}\r\n\r\n`,
        )
        .join(''),
    );
    assert.deepEqual(
      r.statuses,
      paths.map(() => 200),
    );
    const proxied = await sendRaw(
      g.url,
      Array.from({ length: MAX_PIPELINED - 1 }, (_, i) => `GET /p${i} HTTP/1.1\r\nHost: x\r\nX-Api-Key: many\r\n\r\n`).join('') +
        requestBytes('GET /last HTTP/1.1', ['X-Api-Key: many']),
    );
    assert.deepEqual(
      proxied.statuses,
      paths.map(() => 200),
    );
  });

  it.todo(
    `a client holding all ${ADMIN_MAX_CONNECTIONS} admin connections with slow heads, again and again, locks operators out (each is cut after clientHeadersTimeout, but reopened); a cap per client address would need a setting, and the admin listener belongs on an address only operators reach`,
  );

  for (const [what, head] of [
    ['POST .../reset without the token', 'POST /admin/rules/api/keys/k/reset HTTP/1.1'],
    ['GET /metrics (no token needed)', 'GET /metrics HTTP/1.1'],
    ['GET /admin/dashboard', 'GET /admin/dashboard HTTP/1.1'],
  ] as const) {
    it(
      `regression: an endless chunked body on ${what} gets its answer and the connection closed, instead of node reading and dropping it until the request timeout`,
      { timeout: 20_000 },
      async () => {
        const g = await fixture.start(CONFIG(fixture.upstream.url));
        const c = open(g.adminUrl!);
        c.socket.write(`${head}\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`);
        // Far more than any socket buffer: before, the listener read all of it (gigabytes in seconds, one core busy).
        const limit = 512 * 1024 * 1024;
        const sent = await pour(c.socket, c.closed, limit);
        await c.closed;
        assert.ok(sent < limit, `the listener kept reading: ${sent} bytes sent`);
        assert.match(c.reply(), /^HTTP\/1\.1 (200|401) /);
        assert.match(c.reply(), /\r\nConnection: close\r\n/i);
      },
    );
  }

  it(
    'regression: a body trickled without the token gets 401 and the connection closed at once, not held until the request timeout',
    { timeout: 20_000 },
    async () => {
      const g = await fixture.start(CONFIG(fixture.upstream.url));
      const c = open(g.adminUrl!);
      c.socket.write('POST /admin/rules/api/keys/k/block HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n');
      await trickleUntilClosed(c, 100);
      assert.match(c.reply(), /^HTTP\/1\.1 401 /);
    },
  );

  it('regression: a block body over 4096 bytes with the token is answered 413 (the answer was lost to a destroyed socket)', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const body = JSON.stringify({ duration: '10m', pad: 'y'.repeat(20_000) });
    const r = await sendRaw(
      g.adminUrl!,
      `POST /admin/rules/api/keys/k/block HTTP/1.1\r\nHost: x\r\n${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    assert.deepEqual(r.statuses, [413]);
    assert.match(r.text, /"field":"body"/);
    // And nothing was blocked.
    const inspect = await get(`${g.adminUrl!}/admin/rules/api/keys/k`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(JSON.parse(inspect.body).policies[0].allowed, true);
  });

  it('a small block body with the token still works on a kept-alive client, and its connection is closed after the answer', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const r = await sendRaw(
      g.adminUrl!,
      `POST /admin/rules/api/keys/k/block HTTP/1.1\r\nHost: x\r\n${AUTH}\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n{"duration":"10m"}\n` +
        requestBytes('GET /admin/rules/api/keys/k HTTP/1.1', [AUTH]),
    );
    assert.deepEqual(r.statuses, [200], 'one answer: the connection closed after the body-bearing request');
    assert.match(r.text, /"blockedForMs":600000/);
    const after = await get(`${g.url}/x`, { headers: { 'x-api-key': 'k' } });
    assert.equal(after.status, 429, 'the block holds on the proxy port');
  });

  it('holds: 2 000 admin requests over 32 kept-alive connections all answer, and the proxy answers meanwhile', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    const { hostname, port } = new URL(g.adminUrl!);
    const paths = ['/admin/rules', '/admin/limited', '/admin/stats', '/admin/rules/api/keys/k', '/metrics'];
    const one = (i: number): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = request(
          { host: hostname, port, path: paths[i % paths.length], agent, headers: { authorization: `Bearer ${TOKEN}` } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end();
      });
    const all = Promise.all(Array.from({ length: 2000 }, (_, i) => one(i)));
    const proxied = await get(`${g.url}/during`, { headers: { 'x-api-key': 'k' } });
    const statuses = await all;
    agent.destroy();
    assert.equal(proxied.status, 200);
    assert.deepEqual([...new Set(statuses)], [200]);
  });

  it(
    'regression: under --workers the primary’s admin listener has the same limits: a slow head cut with 408, an endless body closed after its answer',
    { timeout: 30_000 },
    async () => {
      const [port, adminPort] = [await freePort(), await freePort()];
      const config = writeTemp(
        'workers.yaml',
        `upstream: ${fixture.upstream.url}\nworkers: 1\nlisten: 127.0.0.1:${port}\nadmin: 127.0.0.1:${adminPort}\n` +
          'proxy: { clientHeadersTimeout: 1s }\nrules: []\n',
      );
      const cli = await serveCli(['--config', config]);
      try {
        await cli.waitForLog((l) => l.msg === 'floodgate primary started');
        const base = `http://127.0.0.1:${adminPort}`;
        assert.equal((await get(`${base}/healthz`)).status, 200);
        const slow = open(base);
        slow.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ');
        await trickleUntilClosed(slow, 200);
        assert.match(slow.reply(), /^HTTP\/1\.1 408 /);
        const c = open(base);
        c.socket.write('POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
        const limit = 512 * 1024 * 1024;
        const sent = await pour(c.socket, c.closed, limit);
        await c.closed;
        assert.ok(sent < limit, `the primary kept reading: ${sent} bytes sent`);
        assert.match(c.reply(), /^HTTP\/1\.1 200 /);
      } finally {
        assert.equal(await stopCli(cli), 0);
      }
    },
  );
});
