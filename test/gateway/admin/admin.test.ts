// The gateway's own endpoints: nothing internal on the proxy port when an admin listener exists, a decision endpoint at any path, readiness with an opt-in upstream check, and scrapes that share one aggregation instead of fanning out each.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Worker } from 'node:cluster';
import { describe, it } from 'node:test';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { WorkerReadiness } from '../../../src/gateway/workers/cluster-ready.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { get } from '../../http/support/http.js';
import { freePort } from '../../support/redis-server.js';
import { gatewayFixture, parseMetrics, readiness, serveCli, sleep, startUpstream, stopCli } from '../support/harness.js';

const fixture = gatewayFixture();

describe('gateway: admin endpoints and the proxy port', () => {
  it("regression: with admin set, /_floodgate/metrics, /readyz and /healthz on the proxy port are ordinary requests (counted, forwarded), not the gateway's", async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nadmin: 127.0.0.1:0\nrules:\n  - name: all\n    key: ip\n    policies: ["3/1h"]\n`,
    );
    const before = fixture.upstream.seen.length;
    const metrics = await get(`${g.url}/_floodgate/metrics`);
    assert.equal(metrics.status, 200);
    assert.equal(JSON.parse(metrics.body).url, '/_floodgate/metrics', 'the upstream answered');
    assert.equal((await get(`${g.url}/_floodgate/readyz`)).status, 200);
    assert.equal((await get(`${g.url}/_floodgate/healthz`)).status, 200);
    assert.equal((await get(`${g.url}/_floodgate/metrics`)).status, 429, 'counted like any request');
    assert.deepEqual(
      fixture.upstream.seen.slice(before).map((r) => r.url),
      ['/_floodgate/metrics', '/_floodgate/readyz', '/_floodgate/healthz'],
    );
    // The admin listener has them all.
    const m = parseMetrics((await get(`${g.adminUrl}/metrics`)).body);
    assert.equal(m.get('floodgate_decisions_total{rule="all",outcome="limited"}'), 1);
    assert.equal((await get(`${g.adminUrl}/readyz`)).status, 200);
    // The decision endpoint stays on the proxy port: nginx's auth_request calls it there.
    assert.equal((await get(`${g.url}/_floodgate/decide`, { headers: { 'x-original-uri': '/x' } })).status, 429);
  });

  it('regression: --decision-path /auth (outside /_floodgate/) is served, not forwarded upstream', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\ndecisionPath: /auth\nrules:\n  - name: api\n    match: { path: /api/ }\n    key: ip\n    policies: ["1/1h"]\n`,
    );
    const before = fixture.upstream.seen.length;
    const ask = (query = '') => get(`${g.url}/auth${query}`, { headers: { 'x-original-uri': '/api/x' } });
    assert.equal((await ask()).status, 204);
    assert.equal((await ask()).status, 429);
    assert.equal((await ask('?status=403')).status, 403);
    assert.equal(fixture.upstream.seen.length, before, 'the upstream never saw /auth');
    // Only the path itself: /authors is an ordinary request.
    assert.equal((await get(`${g.url}/authors`)).status, 200);
    assert.equal(fixture.upstream.seen.at(-1)!.url, '/authors');
    // And the old default path is no longer special.
    assert.equal(JSON.parse((await get(`${g.url}/_floodgate/decide`)).body).url, '/_floodgate/decide');
  });
});

describe('gateway: readiness', () => {
  it('regression: readiness.upstream turns /readyz 503 while the upstream refuses connections, and 200 once it is back (default: the upstream is not checked)', async () => {
    const upstream = await startUpstream();
    const checked = await fixture.start(`upstream: ${upstream.url}\nreadiness:\n  upstream: true\nrules: []\n`);
    const unchecked = await fixture.start(`upstream: ${upstream.url}\nrules: []\n`);
    const until = async (url: string, want: number): Promise<{ status: number; reason: string | undefined }> => {
      const started = Date.now();
      let r = await readiness(url);
      while (r.status !== want && Date.now() - started < 10_000) {
        await sleep(50);
        r = await readiness(url);
      }
      return r;
    };
    assert.deepEqual(await readiness(`${checked.url}/_floodgate/readyz`), { status: 200, reason: undefined });
    await upstream.close();
    const down = await until(`${checked.url}/_floodgate/readyz`, 503);
    assert.equal(down.status, 503);
    assert.match(String(down.reason), new RegExp(`^upstream 127\\.0\\.0\\.1:${upstream.port} not reachable \\(ECONNREFUSED\\)$`));
    assert.equal((await readiness(`${unchecked.url}/_floodgate/readyz`)).status, 200, "without the option readiness is the gateway's own");
    upstream.server.listen(upstream.port, '127.0.0.1');
    try {
      assert.equal((await until(`${checked.url}/_floodgate/readyz`, 200)).status, 200);
    } finally {
      await upstream.close();
    }
  });

  it('readiness.upstream and proxy.maxConnections are validated like the other fields; --ready-upstream sets the check', async () => {
    await assert.rejects(
      parseConfigText('readiness:\n  upstream: true\ndecisionPath: /d\n', 'f.yaml'),
      /f\.yaml:2:13: readiness\.upstream: needs an upstream to probe/,
    );
    await assert.rejects(
      parseConfigText('upstream: http://127.0.0.1:1\nreadiness: { upstream: yes please }\n', 'f.yaml'),
      /readiness\.upstream: must be true or false/,
    );
    await assert.rejects(
      parseConfigText('upstream: http://127.0.0.1:1\nreadiness: { probe: true }\n', 'f.yaml'),
      /readiness\.probe: unknown field "probe"; known fields here: upstream, store/,
    );
    await assert.rejects(
      parseConfigText('upstream: http://127.0.0.1:1\nproxy: { maxConnections: 0 }\n', 'f.yaml'),
      /proxy\.maxConnections: /,
    );
    const command = parseCommandLine(['serve', '--upstream', 'http://127.0.0.1:1', '--limit', '1/1s', '--ready-upstream']);
    assert.equal(command.kind === 'serve' && command.settings?.readiness.upstream, true);
    assert.equal((await parseConfigText('upstream: http://127.0.0.1:1\n', 'f.yaml')).proxy.maxConnections, 10_000);
  });

  it('regression: concurrent /readyz probes under --workers share one round of questions to the workers, reused for a second', async () => {
    const calls = [0, 0];
    const fakeWorker = (id: number): Worker => {
      const events = new EventEmitter();
      return Object.assign(events, {
        id,
        isConnected: () => true,
        send(message: Record<string, { id: number }>, _a: unknown, _b: unknown, callback: (error: Error | null) => void) {
          calls[id - 1]! += 1;
          const [tag, call] = Object.entries(message)[0]!;
          callback(null);
          // Answer a little later, as a worker across the IPC channel would.
          setTimeout(() => events.emit('message', { [tag]: { kind: 'answer', id: call.id, value: null } }), 20);
          return true;
        },
      }) as unknown as Worker;
    };
    const readinessOf = new WorkerReadiness(2);
    readinessOf.listeningOn(fakeWorker(1));
    readinessOf.listeningOn(fakeWorker(2));
    const answers = await Promise.all(Array.from({ length: 50 }, () => readinessOf.notReady()));
    assert.deepEqual(new Set(answers), new Set([undefined]));
    assert.deepEqual(calls, [1, 1], '50 probes, one question to each worker');
    assert.equal(await readinessOf.notReady(), undefined);
    assert.deepEqual(calls, [1, 1], 'a probe right after reuses the answer');
  });
});

describe('gateway: scrapes under --workers (CLI child process)', () => {
  it('regression: a burst of /_floodgate/metrics scrapes under --workers shares one aggregation instead of fanning out to every worker per scrape', async () => {
    const port = await freePort();
    const cli = await serveCli([
      '--upstream',
      fixture.upstream.url,
      '--limit',
      '100/1m',
      '--workers',
      '2',
      '--listen',
      `127.0.0.1:${port}`,
    ]);
    try {
      await cli.waitForLog(() => cli.logs.filter((x) => x.msg === 'floodgate gateway listening').length >= 2);
      for (let i = 0; i < 4; i += 1) assert.equal((await get(`http://127.0.0.1:${port}/`)).status, 200);
      // Fresh connections, spread over both workers; every one of them gets the same aggregate (the process
      // metrics in it change from one aggregation to the next, so one body means one aggregation).
      const scrapes = await Promise.all(Array.from({ length: 30 }, () => get(`http://127.0.0.1:${port}/_floodgate/metrics`)));
      assert.deepEqual(new Set(scrapes.map((r) => r.status)), new Set([200]));
      assert.equal(new Set(scrapes.map((r) => r.body)).size, 1, 'one aggregation served all 30 scrapes');
      const m = parseMetrics(scrapes[0]!.body);
      assert.equal(m.get('floodgate_decisions_total{rule="default",outcome="allowed"}'), 4, 'the aggregate counts both workers');
      // Decisions still flow while scrapes come in.
      assert.equal((await get(`http://127.0.0.1:${port}/`)).status, 200);
    } finally {
      assert.equal(await stopCli(cli), 0);
    }
  });
});
