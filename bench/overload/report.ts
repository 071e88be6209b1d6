/** The overload scenario's text tables (one per phase) and its JSON rows, in the harness's Row shape plus an `overload` field. */
import type { Row } from '../lib/report.js';
import { CAPACITY, DEADLINE_MS, UPSTREAM } from './phases.js';
import type { PhaseSummary } from './summary.js';

/**
 * A harness row for the JSON and the chart (scripts/bench-chart.ts): rps =
 * goodput/s, ratio = goodput ÷ capacity (said by `ratioLabel`), `floodgate`
 * when the gate is on; `overload` holds every figure.
 */
export type OverloadRow = Row & { readonly ratioLabel: string; readonly floodgate: boolean; readonly overload: PhaseSummary };

/** The chart's title for these rows' ratio. */
const RATIO_LABEL = "goodput ÷ the upstream's capacity (longer is better)";

const fixed = (value: number | null | undefined, digits: number): string => (value == null ? '-' : value.toFixed(digits));
const pct = (value: number | null | undefined): string => (value == null ? '-' : `${(value * 100).toFixed(1)} %`);

/** Renders rows of cells as an aligned text table, the first column left-aligned. */
function table(titles: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = titles.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const render = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [render(titles), render(widths.map((w) => '-'.repeat(w))), ...rows.map(render)];
}

/** The row of one run. */
export function toRow(s: PhaseSummary): OverloadRow {
  return {
    scenario: 'overload',
    variant: s.variant,
    rps: s.goodputRps,
    p50Ms: s.p50Ms,
    p99Ms: s.p99Ms,
    redisCmdsPerReq: null,
    ratio: s.goodputShare,
    serverCpuUsPerReq: s.gatewayCpuUsPerReq,
    requests: s.counts.offered,
    p90Ms: s.p90Ms,
    maxMs: s.maxMs,
    status: { '2xx': s.counts.admitted, '429': 0, other: s.counts.refused + s.counts.other },
    socketErrors: { connect: 0, read: s.counts.other, write: 0, timeout: s.counts.deadline },
    redisCommands: null,
    durationS: s.durationS,
    connections: 0,
    ratioLabel: RATIO_LABEL,
    floodgate: s.limitMedian !== null,
    overload: s,
  };
}

function refusals(s: PhaseSummary): string {
  const by = Object.entries(s.counts.refusedBy)
    .sort()
    .map(([reason, n]) => `${reason} ${n}`)
    .join(', ');
  return by === '' ? String(s.counts.refused) : `${s.counts.refused} (${by})`;
}

/** The main table: every run's goodput, tail, refusals and limit. */
function mainTable(summaries: readonly PhaseSummary[]): string[] {
  return table(
    [
      'run',
      'offered/s',
      'goodput/s',
      'goodput/capacity',
      'p50 ms',
      'p99 ms',
      'p99/unloaded',
      'refused',
      'no answer',
      'limit (median)',
      'upstream wasted',
      'gateway µs/req',
    ],
    summaries.map((s) => [
      s.variant,
      fixed(s.offeredRps, 0),
      fixed(s.goodputRps, 0),
      pct(s.goodputShare),
      fixed(s.p50Ms, 1),
      fixed(s.p99Ms, 1),
      fixed(s.p99Ratio, 2),
      refusals(s),
      String(s.counts.deadline + s.counts.other),
      fixed(s.limitMedian, 0),
      s.upstream === undefined ? '-' : String(s.upstream.abandoned),
      fixed(s.gatewayCpuUsPerReq, 1),
    ]),
  );
}

function classTable(s: PhaseSummary): string[] {
  const classes = s.classes ?? {};
  const lines = table(
    ['class', 'offered/s', 'admitted', 'admitted/s', 'admitted p99 ms', 'refused', 'no answer'],
    Object.keys(classes)
      .sort()
      .map((name) => {
        const c = classes[name]!;
        return [
          name,
          fixed(c.offered / s.durationS, 0),
          String(c.admitted),
          fixed(c.admittedRps, 1),
          fixed(c.p99Ms, 1),
          String(c.refused),
          String(c.deadline + c.other),
        ];
      }),
  );
  return [
    `${s.variant}: ${s.description}`,
    ...lines,
    `critical refusals in the seconds when sheddable was admitted: ${s.criticalRefusedWhileSheddableAdmitted} (sheddable admitted in ${s.secondsSheddableAdmitted} of ${s.durationS} s)`,
  ];
}

function tenantTable(s: PhaseSummary): string[] {
  const tenants = s.tenants ?? {};
  const lines = table(
    ['tenant', 'offered/s', 'admitted/s', 'fair share/s', 'share ratio', 'admitted p99 ms'],
    Object.keys(tenants).map((name) => {
      const t = tenants[name]!;
      return [name, fixed(t.offeredRps, 1), fixed(t.admittedRps, 1), fixed(t.fairShareRps, 1), fixed(t.shareRatio, 3), fixed(t.p99Ms, 1)];
    }),
  );
  return [
    `${s.variant}: ${s.description}`,
    ...lines,
    `Jain's fairness index of the share ratios: quiet tenants ${fixed(s.jainQuiet, 3)}, all four ${fixed(s.jainAll, 3)}`,
  ];
}

function settleTable(s: PhaseSummary): string[] {
  const f = s.settle!;
  const lines = table(
    ['second', ...f.goodputPerSecond.map((_, i) => String(i))],
    [
      ['goodput/s', ...f.goodputPerSecond.map(String)],
      ['limit', ...f.limitPerSecond.map((l) => fixed(l, 0))],
    ],
  );
  return [
    `${s.variant}: ${s.description}`,
    ...lines,
    `capacity ${CAPACITY}/s → ${fixed(f.floorRps / 0.8, 0)}/s at ${fixed(f.dropAtS, 1)} s: the limit came within ±30 % of its settled ${fixed(f.downSettled, 0)} after N = ${fixed(f.downS, 1)} s;` +
      ` lowest goodput of a second from then to ${fixed(f.returnAtS, 1)} s: ${fixed(f.minGoodputAfterSettle, 0)}/s (floor ${fixed(f.floorRps, 0)}/s)`,
    `capacity back to ${CAPACITY}/s at ${fixed(f.returnAtS, 1)} s: the limit came within ±30 % of its settled ${fixed(f.upSettled, 0)} after ${fixed(f.upS, 1)} s`,
  ];
}

/** The whole text report: header lines, the main table, then phase d, e and f's own tables and the legend. */
export function formatReport(summaries: readonly PhaseSummary[], header: readonly string[]): string {
  const out = [
    `overload: ${UPSTREAM.workers} workers × ${UPSTREAM.baseMs} ms (±${UPSTREAM.jitter * 100} %) upstream, capacity ${CAPACITY}/s; open-loop Poisson load, client deadline ${DEADLINE_MS} ms`,
    ...header.map((line) => `  ${line}`),
    '',
    ...mainTable(summaries),
  ];
  for (const s of summaries) {
    if (s.classes !== undefined) out.push('', ...classTable(s));
    if (s.tenants !== undefined) out.push('', ...tenantTable(s));
    if (s.settle !== undefined) out.push('', ...settleTable(s));
  }
  out.push(
    '',
    `goodput = 200 responses within ${DEADLINE_MS} ms that ended in the measured period, per second; capacity = workers × 1000 / base. p50/p99 = admitted (200) responses, from when each was due.`,
    "p99/unloaded = p99 ÷ a-unloaded's p99 (target ≤ 2). refused = 503 with Floodgate-Overload, by reason. no answer = none by the deadline (the client closed) or a socket error.",
    'upstream wasted = requests the upstream worked on after their client had gone. limit = floodgate_overload_limit, sampled every 100 ms.',
    "Other counts and per-second figures go by when each request was due. Fair share = max-min fair share of the admitted total given each tenant's offered rate.",
  );
  return `${out.join('\n')}\n`;
}
