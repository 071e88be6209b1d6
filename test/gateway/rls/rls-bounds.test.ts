// Regression tests for what a caller of the rate limit service can make it keep: counters, metric series and log lines stay bounded whatever descriptors, values and limits it sends (F7, F10).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseRlsText } from '../../../src/gateway/rls/rls-config.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';
import type { Descriptor } from '../support/rls-client.js';

const CONFIG = `
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: tenant
    detailed_metric: true
    rate_limit: { unit: day, requests_per_unit: 1000 }
`;

let f: RlsFixture;
before(async () => {
  f = await startRls(CONFIG);
});
after(() => f.stop());

/** The `descriptor` labels of floodgate_rls_decisions_total in `domain`. */
async function labels(domain: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of (await f.metrics()).keys()) {
    const m = /^floodgate_rls_decisions_total\{domain="([^"]*)",descriptor="((?:[^"\\]|\\.)*)",outcome="[^"]*"\}$/.exec(name);
    if (m !== null && m[1] === domain) out.push(m[2]!);
  }
  return out;
}

/** Every key the domain's table holds. */
function tableKeys(domain: string): string[] {
  const table = f.gateway.rlsTables.rlsStoreFor(domain) as unknown as { entries: Map<string, unknown> };
  return [...table.entries.keys()];
}

const override = (i: number, entries: number, valueBytes: number): Descriptor => ({
  entries: Array.from({ length: entries }, (_, j) => ({ key: `k${j}`, value: `${i}-${j}-`.padEnd(valueBytes, 'x') })),
  limit: { requests_per_unit: 100, unit: 'DAY' },
});

test('F7: descriptors with their own limit keep counters of at most 128 bytes and metric labels by place, whatever their values', async () => {
  for (let i = 0; i < 60; i++) {
    const r = await f.client.should('edge', [override(i, 32, 1_000)]);
    assert.equal(r.overall_code, 'OK');
  }
  // Labelled by where the limit is, here the entries' keys: 60 distinct descriptors make one series, not 60 of 32 kB.
  const own = await labels('edge');
  assert.ok(own.length <= 2, `labels: ${own.length}`);
  for (const label of own) assert.ok(Buffer.byteLength(label) <= 128, `a label of ${Buffer.byteLength(label)} bytes`);
  const keys = tableKeys('edge');
  assert.equal(keys.length, 60);
  // The prefix and the window start around a counter of at most 128 bytes (longer descriptors are hashed, as HTTP keys are).
  for (const key of keys) assert.ok(key.length < 250, `a store key of ${key.length} characters`);
  const body = (await f.gateway.renderMetrics()).body;
  assert.ok(body.length < 50_000, `/metrics is ${body.length} bytes`);
});

test('F7: a descriptor of more than 32 entries is refused as invalid, before anything is counted', async () => {
  await assert.rejects(f.client.should('edge', [override(1, 33, 10)]), (e: { code?: number; details?: string }) => {
    assert.equal(e.code, 2);
    assert.match(e.details ?? '', /more than 32 entries/);
    return true;
  });
});

test('F7: a config nested deeper than 32 levels is refused at its line: no request descriptor could reach it', async () => {
  const nested = (depth: number): string => {
    let text = 'domain: deep\ndescriptors:\n';
    for (let i = 0; i < depth; i++) text += `${'  '.repeat(2 * i)}  - key: k${i}\n${'  '.repeat(2 * i)}    descriptors:\n`;
    return `${text}${'  '.repeat(2 * depth)}  - key: last\n${'  '.repeat(2 * depth)}    rate_limit: { unit: day, requests_per_unit: 1 }\n`;
  };
  await assert.doesNotReject(parseRlsText(nested(31), 'deep.yaml'));
  await assert.rejects(parseRlsText(nested(32), 'deep.yaml'), /is nested 33 levels deep; a request descriptor has at most 32 entries/);
});

test('F7: 1 500 distinct detailed_metric values make at most 1 000 series (the rest under "(other)"), each label at most 128 bytes', async () => {
  for (let i = 0; i < 1_500; i++)
    await f.client.should('edge', [{ entries: [{ key: 'tenant', value: `t${i}-`.padEnd(i % 2 === 0 ? 10 : 600, 'y') }] }]);
  const own = await labels('edge');
  const detailed = own.filter((l) => l.startsWith('tenant_') || l.startsWith('#') || l === '(other)');
  assert.ok(detailed.length <= 1_001, `series: ${detailed.length}`);
  assert.ok(own.includes('(other)'));
  for (const label of own) assert.ok(Buffer.byteLength(label) <= 128, `a label of ${Buffer.byteLength(label)} bytes`);
});

test('F10: a limit override past 2^50 ms of counts is refused as invalid (UNKNOWN) and logs nothing', async () => {
  const before = f.logs.length;
  for (let i = 0; i < 200; i++) {
    await assert.rejects(
      f.client.should('edge', [{ entries: [{ key: 'user', value: 'big' }], limit: { requests_per_unit: 4_294_967_295, unit: 'YEAR' } }]),
      (e: { code?: number; details?: string }) => e.code === 2 && /at most 35702 per year/.test(e.details ?? ''),
    );
  }
  // The largest exact limit per unit is accepted, as the config loader accepts it.
  const at = await f.client.should('edge', [
    { entries: [{ key: 'user', value: 'max' }], limit: { requests_per_unit: 35_702, unit: 'YEAR' } },
  ]);
  assert.equal(at.overall_code, 'OK');
  assert.equal(f.logs.slice(before).filter((l) => l.level === 50).length, 0);
  const m = await f.metrics();
  assert.ok((m.get('floodgate_rls_requests_total{code="invalid_request"}') ?? 0) >= 200);
  assert.equal(m.get('floodgate_rls_requests_total{code="error"}') ?? 0, 0);
});

test('F10: an internal error is logged with its stack at most once per 10 s, with a count of the ones held back', async () => {
  // No request causes one any more: a limiter that throws stands in for the next bug.
  const limiters = (f.rls as unknown as { limiters: { forLimit: () => never } }).limiters;
  const original = limiters.forLimit;
  limiters.forLimit = () => {
    throw new TypeError('a bug');
  };
  const before = f.logs.length;
  try {
    for (let i = 0; i < 300; i++)
      await assert.rejects(f.client.should('edge', [{ entries: [{ key: 'user', value: 'u' }] }]), (e: { code?: number }) => e.code === 13);
  } finally {
    limiters.forLimit = original;
  }
  const lines = f.logs.slice(before).filter((l) => l.msg === 'internal error while deciding a rate limit request');
  assert.equal(lines.length, 1);
  assert.equal(JSON.stringify(f.logs.slice(before)).length < 10_000, true);
  assert.equal((await f.metrics()).get('floodgate_rls_requests_total{code="error"}'), 300);
});
