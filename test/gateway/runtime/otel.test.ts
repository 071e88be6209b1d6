// The gateway with telemetry.otel: the numbers of /metrics again through OpenTelemetry's global providers (the real SDK, in memory), spans around Redis store calls, and nothing of OpenTelemetry loaded when it is off.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { metrics as otelMetrics, trace } from '@opentelemetry/api';
import type { Histogram, MetricData } from '@opentelemetry/sdk-metrics';
import { ErrorCode, isFloodgateError } from '../../../src/index.js';
import { packagesFor, requirePackages } from '../../../src/gateway/runtime/package-check.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { LATENCY_HISTOGRAMS, MIRRORED } from '../../../src/gateway/runtime/otel-metrics.js';
import { get } from '../../http/support/http.js';
import { otelSdk, seriesOf, type OtelSdk } from '../../support/otel.js';
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { gatewayFixture, runCli, serveCli, stopCli, writeTemp } from '../support/harness.js';

const SPAN_ERROR = 2;
let sdk: OtelSdk;
let redis: RedisServer;

before(async () => {
  sdk = otelSdk();
  // As an operator's `node --import` setup does: the SDK is registered before the gateway starts.
  assert.ok(otelMetrics.setGlobalMeterProvider(sdk.meterProvider));
  assert.ok(trace.setGlobalTracerProvider(sdk.tracerProvider));
  redis = await startRedis();
});
after(async () => {
  otelMetrics.disable();
  trace.disable();
  await sdk.shutdown();
  await redis.stop();
});

const fixture = gatewayFixture();

const RULES = `
telemetry: { otel: true }
rules:
  - name: api
    match: { path: /api/ }
    key: header:x-api-key
    policies: ["2/1m"]
`;

/** `name{a="x",b="y"}` → its name and labels. */
function parseSeries(id: string): { name: string; labels: Record<string, string> } {
  const brace = id.indexOf('{');
  if (brace < 0) return { name: id, labels: {} };
  const labels: Record<string, string> = {};
  for (const m of id.slice(brace + 1, -1).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
  return { name: id.slice(0, brace), labels };
}

/** The Prometheus text's series, parsed. */
function promSeries(text: string): Array<{ name: string; labels: Record<string, string>; value: number }> {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    out.push({ ...parseSeries(line.slice(0, space)), value: Number(line.slice(space + 1)) });
  }
  return out;
}

function renamed(
  labels: Record<string, string>,
  names: Readonly<Record<string, string>>,
  skip: readonly string[] = [],
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [label, value] of Object.entries(labels)) if (!skip.includes(label)) out[names[label] ?? `?${label}`] = value;
  return out;
}

const sameAttributes = (a: Record<string, unknown>, b: Record<string, unknown>): boolean =>
  JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/**
 * Asserts that every series of the mirrored metrics and of the latency histograms in `/metrics` has the same value
 * in OpenTelemetry (histograms: count, sum and every bucket), and that OpenTelemetry has no series `/metrics` lacks.
 * Returns how many series were compared.
 */
function assertSameNumbers(text: string, otel: Map<string, MetricData>): number {
  const prom = promSeries(text);
  let compared = 0;
  for (const m of MIRRORED) {
    const series = prom.filter((s) => s.name === m.prom);
    const points = seriesOf(otel.get(m.otel));
    assert.equal(points.length, series.length, `${m.otel}: ${JSON.stringify(points)} vs ${JSON.stringify(series)}`);
    for (const s of series) {
      const attributes = renamed(s.labels, m.labels);
      const point = points.find((p) => sameAttributes(p.attributes, attributes));
      assert.equal(point?.value, s.value, `${m.prom}${JSON.stringify(s.labels)} in ${m.otel}`);
      compared += 1;
    }
  }
  for (const h of Object.values(LATENCY_HISTOGRAMS)) {
    const counts = prom.filter((s) => s.name === `${h.prom}_count`);
    const points = seriesOf(otel.get(h.otel));
    assert.equal(points.length, counts.length, `${h.otel} series`);
    for (const c of counts) {
      const attributes = renamed(c.labels, h.labels);
      const value = points.find((p) => sameAttributes(p.attributes, attributes))?.value as Histogram | undefined;
      assert.ok(value !== undefined, `${h.prom}${JSON.stringify(c.labels)} in ${h.otel}`);
      assert.equal(value.count, c.value);
      const sum = prom.find((s) => s.name === `${h.prom}_sum` && sameAttributes(s.labels, c.labels))!.value;
      assert.ok(Math.abs((value.sum ?? NaN) - sum) <= 1e-9 * Math.max(1, sum), `${h.otel} sum ${value.sum} vs ${sum}`);
      // Same boundaries, same cumulative counts: Prometheus buckets are cumulative, OpenTelemetry's are not.
      const buckets = prom.filter((s) => s.name === `${h.prom}_bucket` && sameAttributes({ ...s.labels, le: '' }, { ...c.labels, le: '' }));
      let cumulative = 0;
      const otelBuckets = value.buckets.counts.map((n) => (cumulative += n));
      assert.deepEqual(
        buckets.map((b) => b.value),
        otelBuckets,
        `${h.otel} buckets`,
      );
      assert.deepEqual(
        buckets
          .map((b) => b.labels.le)
          .filter((le) => le !== '+Inf')
          .map(Number),
        value.buckets.boundaries,
      );
      compared += 1;
    }
  }
  return compared;
}

async function scrape(g: Gateway): Promise<string> {
  return (await g.renderMetrics()).body;
}

describe("gateway with telemetry.otel (one gateway: the global meter is the process's)", () => {
  let g: Gateway;
  before(async () => {
    g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nstore: { type: redis, url: "${redis.url}", timeout: 200ms, prefix: "otel-gw-${process.pid}" }\n${RULES}`,
    );
  });

  test('after known requests, OpenTelemetry reports the numbers /metrics does; a span per store call, without the key', async () => {
    sdk.resetSpans();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get(`${g.url}/api/x`, { headers: { 'x-api-key': 'alice' } })).status);
    statuses.push((await get(`${g.url}/api/x`)).status);
    statuses.push((await get(`${g.url}/other`)).status);
    assert.deepEqual(statuses, [200, 200, 429, 401, 200]);
    const otel = await sdk.metrics();
    const text = await scrape(g);
    assert.ok(assertSameNumbers(text, otel) >= 8);
    const decisions = seriesOf(otel.get('floodgate.decisions'));
    const count = (rule: string, outcome: string): unknown =>
      decisions.find((d) => d.attributes['floodgate.rule'] === rule && d.attributes['floodgate.outcome'] === outcome)?.value;
    assert.deepEqual(
      [count('api', 'allowed'), count('api', 'limited'), count('api', 'missing_key'), count('(none)', 'unmatched')],
      [2, 1, 1, 1],
    );
    assert.equal(otel.get('floodgate.upstream.duration')?.descriptor.unit, 's');
    const spans = sdk.spans().filter((s) => s.name === 'floodgate.store.apply');
    // The refusal came from the in-memory block the second admission taught: no store call, no span.
    assert.deepEqual(
      spans.map((s) => s.attributes['floodgate.allowed']),
      [true, true],
    );
    for (const span of spans) {
      assert.equal(span.attributes['floodgate.store.name'], 'redis');
      assert.equal(span.attributes['floodgate.operation'], 'consume');
      assert.equal(span.attributes['floodgate.key.hash'], undefined);
      assert.equal(span.status.code, 0);
    }
    assert.doesNotMatch(JSON.stringify(spans.map((s) => s.attributes)), /alice/);
  });

  test('a Redis that does not answer: an error span, an error duration, and still the numbers of /metrics', async () => {
    sdk.resetSpans();
    redis.pause();
    try {
      // The default failure policy (insurance) still answers; the store call behind it failed.
      assert.equal((await get(`${g.url}/api/x`, { headers: { 'x-api-key': 'dave' } })).status, 200);
    } finally {
      redis.resume();
    }
    const failed = sdk.spans().filter((s) => s.name === 'floodgate.store.apply');
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.status.code, SPAN_ERROR);
    assert.equal(failed[0]!.attributes['error.type'], ErrorCode.STORE_TIMEOUT);
    // Counted since start, not since the last collection: a second look still matches.
    const otel = await sdk.metrics();
    assertSameNumbers(await scrape(g), otel);
    const errors = seriesOf(otel.get('floodgate.store.duration')).find(
      (s) => s.attributes['floodgate.store.name'] === 'redis' && s.attributes['floodgate.result'] === 'error',
    );
    assert.equal((errors?.value as Histogram | undefined)?.count, 1);
  });
});

describe('telemetry off by default', () => {
  const denyOtel = `--import=${fileURLToPath(new URL('../support/deny-otel.mjs', import.meta.url))}`;

  test('the settings: absent unless telemetry.otel or --otel', async () => {
    const plain = await parseConfigText('upstream: http://127.0.0.1:1\nrules: []\n', 'a.yaml');
    assert.equal(plain.telemetry, undefined);
    const on = await parseConfigText('upstream: http://127.0.0.1:1\ntelemetry: { otel: true }\nrules: []\n', 'a.yaml');
    assert.deepEqual(on.telemetry, { otel: true });
    await assert.rejects(
      parseConfigText('upstream: http://127.0.0.1:1\ntelemetry: { otel: yes please }\nrules: []\n', 'a.yaml'),
      /a\.yaml:2:.*telemetry\.otel: must be true or false/,
    );
    await assert.rejects(parseConfigText('upstream: http://127.0.0.1:1\ntelemetry: { prometheus: true }\nrules: []\n', 'a.yaml'));
    const flag = parseCommandLine(['serve', '--upstream', 'http://127.0.0.1:1', '--limit', '5/1m', '--otel']);
    assert.deepEqual(flag.kind === 'serve' ? flag.settings?.telemetry : undefined, { otel: true });
  });

  test('without --otel the gateway serves with @opentelemetry/api unresolvable (never loaded); with it, MISSING_DEPENDENCY', async () => {
    const upstream = fixture.upstream.url;
    const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} ${denyOtel}`.trim() };
    const plain = await serveCli(['--upstream', upstream, '--limit', '5/1m'], env);
    assert.equal((await get(`${plain.url}/x`)).status, 200);
    assert.equal(await stopCli(plain), 0);
    const config = writeTemp('otel.yaml', `upstream: ${upstream}\ntelemetry: { otel: true }\nrules: []\n`);
    const cli = runCli(['serve', '--listen', '127.0.0.1:0', '--config', config], env);
    assert.equal(await cli.exited, 1);
    assert.match(cli.stderr(), /needs the package "@opentelemetry\/api".*\[FLOODGATE_MISSING_DEPENDENCY\]/s);
  });

  test('the package check names @opentelemetry/api only when telemetry is on', () => {
    assert.equal(
      packagesFor({ config: true, redis: false }).some((p) => p.name === '@opentelemetry/api'),
      false,
    );
    assert.throws(
      () => requirePackages(packagesFor({ config: true, redis: false, otel: true }), 'floodgate serve', []),
      (e: unknown) =>
        isFloodgateError(e) && e.code === ErrorCode.MISSING_DEPENDENCY && /@opentelemetry\/api \(OpenTelemetry/.test(e.message),
    );
  });
});
