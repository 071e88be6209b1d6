// The CLI as a child process: SIGHUP and file-change reloads (a bad file keeps the last good config), SIGTERM under load (nothing cut, exit 0), and --workers sharing counts through the cluster store, showing one aggregate on --admin, and answering /readyz for every worker.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { get, statuses } from '../../http/support/http.js';
import { freePort, startRedis } from '../../support/redis-server.js';
import { parseMetrics, readiness, serveCli, sleep, startUpstream, stopCli, writeTemp, type Upstream } from '../support/harness.js';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

const config = (limit: string) =>
  `upstream: ${upstream.url}\nrules:\n  - name: api\n    key: "header:x-api-key"\n    policies: ["${limit}"]\n`;

describe('gateway lifecycle (CLI child process)', () => {
  it('reloads on SIGHUP and on file change; a malformed file is logged with file:line and the last good config stays', async () => {
    const file = writeTemp('floodgate.yaml', config('1/1m'));
    const cli = await serveCli(['--config', file]);
    try {
      const h = (k: string) => ({ headers: { 'x-api-key': k } });
      assert.deepEqual(await statuses(`${cli.url}/`, 2, h('a')), [200, 429]);

      writeFileSync(file, config('3/1m'));
      cli.child.kill('SIGHUP');
      await cli.waitForLog((l) => l.msg === 'config reloaded');
      assert.deepEqual(await statuses(`${cli.url}/`, 4, h('b')), [200, 200, 200, 429]);

      writeFileSync(file, `${config('3/1m')}    shadow: maybe\n`);
      const failure = await cli.waitForLog((l) => l.msg === 'config reload failed; keeping the last good config');
      assert.equal(failure.code, 'FLOODGATE_INVALID_CONFIG');
      assert.match(String(failure.error), /floodgate\.yaml:6:13: rules\[0\]\.shadow: must be true or false/);
      assert.deepEqual(await statuses(`${cli.url}/`, 4, h('c')), [200, 200, 200, 429], 'the last good config (3/1m) still applies');

      writeFileSync(file, config('2/1m'));
      await cli.waitForLog((l) => l.msg === 'config reloaded' && l.trigger === 'file change');
      assert.deepEqual(await statuses(`${cli.url}/`, 3, h('d')), [200, 200, 429]);

      const m = parseMetrics((await get(`${cli.url}/_floodgate/metrics`)).body);
      assert.equal(m.get('floodgate_config_reloads_total{result="success"}'), 2);
      assert.equal(m.get('floodgate_config_reloads_total{result="failure"}'), 1);
      assert.equal(m.get('floodgate_config_last_reload_success'), 1);
    } finally {
      assert.equal(await stopCli(cli), 0);
    }
  });

  it('SIGTERM under load: stops accepting, finishes every in-flight request, exits 0', async () => {
    const cli = await serveCli(['--upstream', upstream.url, '--limit', '1000/1m']);
    const agent = new Agent({ keepAlive: true, maxSockets: 40 });
    const seenBefore = upstream.seen.length;
    try {
      const inFlight = Array.from(
        { length: 40 },
        (_, i) =>
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = request(`${cli.url}/slow?ms=${300 + (i % 5) * 50}`, { agent }, (res) => {
              let body = '';
              res.on('data', (c: Buffer) => (body += c.toString('utf8')));
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
              res.on('error', reject);
            });
            req.on('error', reject);
            req.end();
          }),
      );
      // SIGTERM once all 40 are at the upstream, i.e. truly in flight (a request still in the accept backlog is not).
      while (upstream.seen.length < seenBefore + 40) await sleep(10);
      cli.child.kill('SIGTERM');
      const results = await Promise.all(inFlight);
      assert.deepEqual(new Set(results.map((r) => r.status)), new Set([200]), 'no request cut or refused');
      assert.ok(results.every((r) => JSON.parse(r.body).url.startsWith('/slow')));
      assert.equal(await cli.exited, 0);
      await assert.rejects(get(`${cli.url}/`), /ECONNREFUSED/);
    } finally {
      agent.destroy();
      await stopCli(cli);
    }
  });

  it('--workers 2 share one quota through the cluster store, show aggregated metrics on the admin listener (not the proxy port), and stop on SIGTERM', async () => {
    const port = await freePort();
    const adminPort = await freePort();
    const cli = await serveCli([
      '--upstream',
      upstream.url,
      '--limit',
      '3/1m',
      '--workers',
      '2',
      '--listen',
      `127.0.0.1:${port}`,
      '--admin',
      `127.0.0.1:${adminPort}`,
    ]);
    try {
      await cli.waitForLog(
        (l) =>
          l.msg === 'floodgate gateway listening' &&
          l.worker !== undefined &&
          cli.logs.filter((x) => x.msg === 'floodgate gateway listening').length >= 2,
      );
      // Fresh connections, so node:cluster spreads them over both workers.
      const seen = await statuses(`http://127.0.0.1:${port}/`, 6);
      assert.deepEqual(seen, [200, 200, 200, 429, 429, 429]);
      const pids = new Set(cli.logs.filter((l) => l.msg === 'floodgate gateway listening').map((l) => l.pid));
      assert.equal(pids.size, 2);
      // The primary's admin listener counts all six decisions, three each way.
      const scrapes = [`http://127.0.0.1:${adminPort}/metrics`];
      for (const url of scrapes) {
        const m = parseMetrics((await get(url)).body);
        const total = (outcome: string): number =>
          [...m]
            .filter(([name]) => name.startsWith('floodgate_decisions_total{') && name.includes(`outcome="${outcome}"`))
            .reduce((sum, [, n]) => sum + n, 0);
        assert.equal(total('allowed'), 3);
        assert.equal(total('limited'), 3);
        // A gauge that is 1 per worker is not summed: it stays 1 (or 0 if any worker's reload failed).
        assert.equal(m.get('floodgate_config_last_reload_success'), 1);
      }
      // With --admin the proxy port has no internal endpoints: the path is an ordinary request, here refused by the spent quota.
      assert.equal((await get(`http://127.0.0.1:${port}/_floodgate/metrics`)).status, 429);
    } finally {
      assert.equal(await stopCli(cli), 0);
    }
  });

  it('--workers 2 --lease: workers spend leased quota without a call per request and never admit more than the limit', async () => {
    const port = await freePort();
    const adminPort = await freePort();
    const cli = await serveCli([
      '--upstream',
      upstream.url,
      '--limit',
      '20/1m',
      '--workers',
      '2',
      '--lease',
      '200ms',
      '--listen',
      `127.0.0.1:${port}`,
      '--admin',
      `127.0.0.1:${adminPort}`,
    ]);
    try {
      await cli.waitForLog(
        (l) => l.msg === 'floodgate gateway listening' && cli.logs.filter((x) => x.msg === 'floodgate gateway listening').length >= 2,
      );
      assert.ok(
        cli.logs.some((l) => String(l.store ?? '').includes('leases of 200 ms')),
        'the store says it leases',
      );
      const seen = await statuses(`http://127.0.0.1:${port}/`, 40);
      // Fresh connections alternate between the workers, so each spends every unit leased to it: exactly the limit.
      assert.equal(seen.filter((s) => s === 200).length, 20);
      assert.equal(seen.filter((s) => s === 429).length, 20);
      const m = parseMetrics((await get(`http://127.0.0.1:${adminPort}/metrics`)).body);
      const calls = [...m]
        .filter(([name]) => name.startsWith('floodgate_store_duration_seconds_count{'))
        .reduce((sum, [, n]) => sum + n, 0);
      assert.ok(calls < 20, `${calls} calls to the primary for 20 admitted requests: leased units were spent without one`);
    } finally {
      assert.equal(await stopCli(cli), 0);
    }
  });

  it("--workers 2: the primary's /readyz asks every worker, so a worker without its Redis or a dead worker turns it 503 until it is back", async () => {
    const redis = await startRedis();
    const port = await freePort();
    const adminPort = await freePort();
    const cli = await serveCli([
      '--upstream',
      upstream.url,
      '--limit',
      '100/1m',
      '--redis',
      redis.url,
      // The store counts for readiness under reject (docs/gateway.md): a worker without Redis is then not ready.
      '--on-store-failure',
      'reject',
      '--workers',
      '2',
      '--listen',
      `127.0.0.1:${port}`,
      '--admin',
      `127.0.0.1:${adminPort}`,
    ]);
    const readyz = () => readiness(`http://127.0.0.1:${adminPort}/readyz`);
    const until = async (want: (r: { status: number; reason: string | undefined }) => boolean, what: string) => {
      const started = Date.now();
      let r = await readyz();
      while (!want(r)) {
        assert.ok(Date.now() - started < 10_000, `${what}; last answer ${JSON.stringify(r)}`);
        await sleep(50);
        r = await readyz();
      }
      return r;
    };
    try {
      await cli.waitForLog(() => cli.logs.filter((x) => x.msg === 'floodgate gateway listening').length >= 2);
      await until((r) => r.status === 200, 'ready once both workers listen with Redis connected');

      // Only the workers hold Redis clients: the primary learns of the outage by asking them.
      await redis.kill();
      const down = await until((r) => r.status === 503, 'not ready while Redis is down');
      assert.match(String(down.reason), /^worker \d+: store not connected$/);
      await redis.restart();
      await until((r) => r.status === 200, 'ready again by itself once Redis is back');

      // A worker that dies no longer counts, until the one started in its place listens.
      const pid = Number(cli.logs.find((l) => l.msg === 'floodgate gateway listening')!.pid);
      process.kill(pid, 'SIGKILL');
      await until((r) => r.reason === '1 of 2 workers listening', 'not ready while a worker is missing');
      await until((r) => r.status === 200, 'ready again once the new worker listens');
      assert.equal((await get(`http://127.0.0.1:${port}/`)).status, 200);
      // The new worker is wired up as its predecessor was: the primary's aggregate reaches it.
      assert.match((await get(`http://127.0.0.1:${adminPort}/metrics`)).body, /floodgate_decisions_total\{/);
    } finally {
      assert.equal(await stopCli(cli), 0);
      await redis.stop();
    }
  });
});
