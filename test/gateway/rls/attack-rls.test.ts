// The rate limit service attacked as a caller of its gRPC port: cardinality (distinct values, huge entries, many entries and descriptors), domains (a flood in one vs first calls in another), limit overrides (huge, zero, wrapped negative, unknown unit) and malformed input, each with a real @grpc/grpc-js client on a real socket. Prints the table: what the service answered and the series, keys and heap it kept, each asserted within its bound.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, test } from 'node:test';
import { loadRlsConfig } from '../../../src/gateway/rls/rls-config.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';
import type { Descriptor, RlsResponse } from '../support/rls-client.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const EDGE = `
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: tenant
    detailed_metric: true
    rate_limit: { unit: hour, requests_per_unit: 1000 }
`;
const QUIET = `
domain: quiet
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
`;
// Tables of 1 000 keys and sketches of 64 cells: the defaults' (100 000, 16 384) behaviour under a flood, in seconds.
const GATEWAY = 'rules: []\nstore: { maxKeys: 1000, overflowCells: 64 }\n';
const MAX_KEYS = 1_000;

let f: RlsFixture;
before(async () => {
  f = await startRls(EDGE, GATEWAY);
  const dir = join(dirname(f.file), 'domains');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'edge.yaml'), EDGE);
  writeFileSync(join(dir, 'quiet.yaml'), QUIET);
  f.rls.setConfig(await loadRlsConfig(dir));
});
after(() => f.stop());

/** What one call came to: the overall code, or the gRPC status name of an error. */
async function answer(call: Promise<RlsResponse>): Promise<string> {
  try {
    const r = await call;
    return r.overall_code + (r.statuses.every((s) => s.current_limit === null) ? ' (no limit)' : '');
  } catch (error) {
    const code = (error as { code?: number }).code;
    return (
      ({ 2: 'UNKNOWN', 3: 'INVALID_ARGUMENT', 8: 'RESOURCE_EXHAUSTED', 13: 'INTERNAL' } as Record<number, string>)[code ?? -1] ??
      `code ${code}`
    );
  }
}

const one = (key: string, value: string, extra: Partial<Descriptor> = {}): Descriptor => ({ entries: [{ key, value }], ...extra });
const override = (requests_per_unit: number, unit: string): Partial<Descriptor> => ({ limit: { requests_per_unit, unit } });

interface Row {
  readonly surface: string;
  readonly variant: string;
  /** Calls made. */
  readonly calls: number;
  /** The answers seen, with counts. */
  readonly answers: string;
  /** floodgate_rls_decisions_total series after the row. */
  readonly series: number;
  /** /metrics bytes after the row. */
  readonly metricsBytes: number;
  /** Keys in the two domains' tables after the row. */
  readonly keys: number;
  /** Heap growth over the row, MB (after a collection). */
  readonly heapMb: number;
}

interface Variant {
  readonly surface: string;
  readonly name: string;
  /** The calls, made one after another. */
  readonly calls: () => Array<() => Promise<RlsResponse>>;
  /** Every answer must be one of these. */
  readonly expect: readonly string[];
  /** Further checks on the state after the row. */
  readonly check?: (row: Row) => Promise<void> | void;
}

const many = (n: number, make: (i: number) => () => Promise<RlsResponse>) => () => Array.from({ length: n }, (_, i) => make(i));
const should = (domain: string, descriptors: Descriptor[], hitsAddend?: number) => () => f.client.should(domain, descriptors, hitsAddend);
const longValue = (i: number, bytes: number): string => `${i}-`.padEnd(bytes, 'v');
const entries = (i: number, count: number, bytes: number): Descriptor['entries'] =>
  Array.from({ length: count }, (_, j) => ({ key: `k${j}`, value: longValue(i * 100 + j, bytes) }));

const VARIANTS: readonly Variant[] = [
  // Cardinality.
  {
    surface: 'cardinality',
    name: '3 000 distinct values of a key',
    calls: many(3_000, (i) => should('edge', [one('user', `made-up-${i}`)])),
    expect: ['OK', 'OVER_LIMIT'],
  },
  {
    surface: 'cardinality',
    name: '3 000 distinct detailed_metric values',
    calls: many(3_000, (i) => should('edge', [one('tenant', `t-${i}`)])),
    expect: ['OK', 'OVER_LIMIT'],
    check: async () => {
      const labels = [...(await f.metrics()).keys()].filter((k) => k.includes('descriptor="tenant_') || k.includes('descriptor="(other)"'));
      assert.ok(labels.length <= 1_001 * 2, `tenant series: ${labels.length}`);
    },
  },
  // edge's table is full from here on: its new keys are decided in their limit's overflow sketch, which may refuse early.
  {
    surface: 'cardinality',
    name: '200 overrides of 32 entries of 1 KiB',
    calls: many(200, (i) => should('edge', [{ entries: entries(i, 32, 1_024), ...override(10, 'HOUR') }])),
    expect: ['OK', 'OVER_LIMIT'],
  },
  {
    surface: 'cardinality',
    name: 'detailed_metric value of 1 KiB ×200',
    calls: many(200, (i) => should('edge', [one('tenant', longValue(i, 1_024))])),
    expect: ['OK', 'OVER_LIMIT'],
    check: async () => {
      for (const k of (await f.metrics()).keys()) assert.ok(Buffer.byteLength(k) < 400, `a series of ${Buffer.byteLength(k)} bytes`);
    },
  },
  {
    surface: 'cardinality',
    name: 'a value of 1 025 characters',
    calls: () => [should('edge', [one('user', 'x'.repeat(1_025))])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'cardinality',
    name: '33 entries in a descriptor',
    calls: () => [should('edge', [{ entries: entries(1, 33, 8) }])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'cardinality',
    name: '1 000 entries in a descriptor',
    calls: () => [should('edge', [{ entries: entries(1, 1_000, 8) }])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'cardinality',
    name: '65 descriptors in a request',
    calls: () => [
      should(
        'edge',
        Array.from({ length: 65 }, (_, i) => one('user', `d${i}`)),
      ),
    ],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'cardinality',
    name: '1 500 overrides of distinct numbers',
    calls: many(1_500, (i) => should('edge', [one('user', 'n', override(100 + i, 'HOUR'))])),
    expect: ['OK', 'OVER_LIMIT'],
    check: () => {
      const limiters = (f.rls as unknown as { limiters: { overrides: Map<string, unknown> } }).limiters;
      assert.ok(limiters.overrides.size <= 1_000, `override limiters: ${limiters.overrides.size}`);
    },
  },
  // Domains.
  {
    surface: 'domains',
    name: 'flood of edge, then 20 first calls in quiet',
    calls: () => [
      ...many(2_000, (i) => should('edge', [one('user', `flood-${i}`)]))(),
      ...many(20, (i) => should('quiet', [one('user', `first-${i}`)]))(),
    ],
    expect: ['OK', 'OVER_LIMIT'],
    check: async () => {
      for (let i = 0; i < 20; i++) {
        const r = await f.client.should('quiet', [one('user', `first-${i}`)]);
        assert.equal(r.statuses[0]!.limit_remaining, 3, `quiet's user first-${i} was counted once before, by itself`);
      }
    },
  },
  {
    surface: 'domains',
    name: '2 000 made-up domains, with overrides',
    calls: many(2_000, (i) => should(`domain-${i}`, [one('user', 'u', override(1, 'HOUR'))])),
    expect: ['OK (no limit)'],
  },
  // Limit overrides and malformed input, in quiet (whose table no flood filled): each answer is exact.
  {
    surface: 'overrides',
    name: 'huge: 4294967295 per year',
    calls: () => [should('quiet', [one('user', 'o', override(4_294_967_295, 'YEAR'))])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'overrides',
    name: 'largest exact: 13031248 per day',
    calls: () => [should('quiet', [one('user', 'o', override(13_031_248, 'DAY'))])],
    expect: ['OK'],
  },
  {
    surface: 'overrides',
    name: 'one past it: 13031249 per day',
    calls: () => [should('quiet', [one('user', 'o', override(13_031_249, 'DAY'))])],
    expect: ['UNKNOWN'],
  },
  { surface: 'overrides', name: 'zero', calls: () => [should('quiet', [one('user', 'z', override(0, 'MINUTE'))])], expect: ['OVER_LIMIT'] },
  // uint32 on the wire: -1 arrives as 4294967295.
  {
    surface: 'overrides',
    name: 'negative (-1, wraps to 2^32-1) per day',
    calls: () => [should('quiet', [one('user', 'n', override(-1, 'DAY'))])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'overrides',
    name: 'unknown unit',
    calls: () => [should('quiet', [one('user', 'u', override(5, 'UNKNOWN'))])],
    expect: ['UNKNOWN'],
  },
  { surface: 'malformed', name: 'empty domain', calls: () => [should('', [one('user', 'x')])], expect: ['UNKNOWN'] },
  { surface: 'malformed', name: 'no descriptors', calls: () => [should('quiet', [])], expect: ['UNKNOWN'] },
  {
    surface: 'malformed',
    name: 'a descriptor without entries',
    calls: () => [should('quiet', [{ entries: [] }])],
    expect: ['OK (no limit)'],
  },
  {
    surface: 'malformed',
    name: 'an empty entry key',
    calls: () => [should('quiet', [{ entries: [{ key: '', value: 'v' }] }])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'malformed',
    name: 'hits_addend 4294967295',
    calls: () => [should('quiet', [one('user', 'victim')], 4_294_967_295)],
    expect: ['OVER_LIMIT'],
    check: async () => {
      // Over at once and counted nothing: the victim still has its whole quota.
      assert.equal((await f.client.should('quiet', [one('user', 'victim')])).statuses[0]!.limit_remaining, 4);
    },
  },
  {
    surface: 'malformed',
    name: 'hits_addend 0 (counts 1)',
    calls: () => [should('quiet', [one('user', 'zero-addend')], 0)],
    expect: ['OK'],
  },
  {
    surface: 'malformed',
    name: 'a descriptor hits_addend 2^53',
    calls: () => [should('quiet', [one('user', 'h', { hits_addend: { value: 2 ** 53 } })])],
    expect: ['UNKNOWN'],
  },
  {
    surface: 'malformed',
    name: 'a message of 300 KiB',
    calls: () => [
      should('quiet', [one('user', 'x'.repeat(1_000))].concat(Array.from({ length: 60 }, () => ({ entries: entries(1, 5, 1_000) })))),
    ],
    expect: ['RESOURCE_EXHAUSTED'],
  },
];

/** The state the service keeps: series, /metrics bytes, keys of both domains' tables. */
async function kept(): Promise<Pick<Row, 'series' | 'metricsBytes' | 'keys'>> {
  const body = (await f.gateway.renderMetrics()).body;
  const series = body.split('\n').filter((l) => l.startsWith('floodgate_rls_decisions_total{')).length;
  const keys = ['edge', 'quiet'].reduce((sum, d) => sum + (f.gateway.rlsTables.rlsStoreFor(d) as unknown as { size: number }).size, 0);
  return { series, metricsBytes: body.length, keys };
}

function heap(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

test('the rate limit service under attack: every row answered as expected, with bounded series, keys and heap', async () => {
  const rows: Row[] = [];
  const problems: string[] = [];
  for (const v of VARIANTS) {
    const start = heap();
    const counts = new Map<string, number>();
    const calls = v.calls();
    for (const call of calls) {
      const a = await answer(call());
      counts.set(a, (counts.get(a) ?? 0) + 1);
    }
    const state = await kept();
    const row: Row = {
      surface: v.surface,
      variant: v.name,
      calls: calls.length,
      answers: [...counts].map(([a, n]) => `${a}×${n}`).join(' '),
      ...state,
      heapMb: Math.round(((heap() - start) / 1e6) * 10) / 10,
    };
    rows.push(row);
    for (const a of counts.keys()) if (!v.expect.includes(a)) problems.push(`${v.name}: answered ${a}, expected ${v.expect.join(' or ')}`);
    // Bounds: two domains × 1 000 labels × 6 outcomes plus the no-limit ones; the tables' keys; the heap.
    if (row.series > 2 * 1_001 * 6 + 6) problems.push(`${v.name}: ${row.series} series`);
    if (row.metricsBytes > 3_000_000) problems.push(`${v.name}: /metrics of ${row.metricsBytes} bytes`);
    if (row.keys > 2 * MAX_KEYS) problems.push(`${v.name}: ${row.keys} keys`);
    if (row.heapMb > 40) problems.push(`${v.name}: heap grew ${row.heapMb} MB`);
    try {
      await v.check?.(row);
    } catch (error) {
      problems.push(`${v.name}: ${(error as Error).message}`);
    }
  }
  const table = [
    `${'surface'.padEnd(12)} | ${'variant'.padEnd(44)} | ${'calls'.padStart(5)} | ${'answers'.padEnd(34)} | series | /metrics B | keys | heap MB`,
    ...rows.map(
      (r) =>
        `${r.surface.padEnd(12)} | ${r.variant.padEnd(44)} | ${String(r.calls).padStart(5)} | ${r.answers.padEnd(34)} | ${String(r.series).padStart(6)} | ${String(r.metricsBytes).padStart(10)} | ${String(r.keys).padStart(4)} | ${String(r.heapMb).padStart(7)}`,
    ),
  ].join('\n');
  console.log(`\n${table}\n`);
  assert.deepEqual(problems, []);
});
