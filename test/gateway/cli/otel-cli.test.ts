// `floodgate serve --otel` with an SDK preloaded through NODE_OPTIONS=--import, as docs/telemetry.md tells operators: the exported numbers are those of /metrics, in one process and, summed over the workers, under --workers 2.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { get } from '../../http/support/http.js';
import { freePort } from '../../support/redis-server.js';
import { gatewayFixture, parseMetrics, serveCli, sleep, stopCli } from '../support/harness.js';

interface Exported {
  name: string;
  attributes: Record<string, string>;
  value: number | { count: number; sum: number };
}

const setup = fileURLToPath(new URL('../support/otel-setup.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'floodgate-otel-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = gatewayFixture();

/** Every process's last snapshot under `prefix`, summed series by series (histograms: their counts). */
function exported(prefix: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const name of readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith('.json'))) {
    for (const s of JSON.parse(readFileSync(join(dir, name), 'utf8')) as Exported[]) {
      const id = `${s.name}${JSON.stringify(Object.entries(s.attributes).sort())}`;
      sums.set(id, (sums.get(id) ?? 0) + (typeof s.value === 'number' ? s.value : s.value.count));
    }
  }
  return sums;
}

const decisions = (rule: string, outcome: string): string =>
  `floodgate.decisions${JSON.stringify([
    ['floodgate.outcome', outcome],
    ['floodgate.rule', rule],
  ])}`;
const upstreamResponses = `floodgate.upstream.duration${JSON.stringify([['floodgate.outcome', 'response']])}`;

describe('floodgate serve --otel with an SDK from --import', { timeout: 60_000 }, () => {
  for (const workers of [0, 2]) {
    test(
      workers === 0 ? 'one process' : `--workers ${workers}: each worker exports its own numbers, which add up to /metrics`,
      async () => {
        const prefix = `run${workers}`;
        const port = await freePort();
        const cli = await serveCli(
          [
            '--listen',
            `127.0.0.1:${port}`,
            '--upstream',
            fixture.upstream.url,
            '--limit',
            '3/1m',
            '--key',
            'header:x-api-key',
            '--otel',
            '--workers',
            String(workers),
          ],
          { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${setup}`.trim(), FLOODGATE_OTEL_OUT: join(dir, prefix) },
        );
        try {
          if (workers > 0) await cli.waitForLog(() => cli.logs.filter((l) => l.msg === 'floodgate gateway listening').length >= workers);
          const url = `http://127.0.0.1:${port}`;
          const statuses = [];
          for (let i = 0; i < 5; i++) statuses.push((await get(`${url}/x`, { headers: { 'x-api-key': 'k1' } })).status);
          assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
          // Exports run every 100 ms: wait for one that saw every request.
          let otel = exported(prefix);
          while (otel.get(decisions('default', 'limited')) !== 2 || otel.get(upstreamResponses) !== 3) {
            await sleep(50);
            otel = exported(prefix);
          }
          const prom = parseMetrics((await get(`${url}/_floodgate/metrics`)).body);
          assert.equal(prom.get('floodgate_decisions_total{rule="default",outcome="allowed"}'), 3);
          assert.equal(otel.get(decisions('default', 'allowed')), 3);
          assert.equal(prom.get('floodgate_decisions_total{rule="default",outcome="limited"}'), 2);
          assert.equal(prom.get('floodgate_upstream_duration_seconds_count{outcome="response"}'), otel.get(upstreamResponses));
          if (workers > 0) {
            // The cluster store's calls, timed in each worker.
            const storeCalls = `floodgate.store.duration${JSON.stringify([
              ['floodgate.result', 'ok'],
              ['floodgate.store.name', 'cluster'],
            ])}`;
            assert.ok((otel.get(storeCalls) ?? 0) >= 3);
            assert.equal(prom.get('floodgate_store_duration_seconds_count{store="cluster",result="ok"}'), otel.get(storeCalls));
          }
        } finally {
          assert.equal(await stopCli(cli), 0);
        }
      },
    );
  }
});
