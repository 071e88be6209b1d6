/** Result rows of a run and how they are printed: a text table for people, a JSON array for scripts. */
import type { RateResult } from './rate.js';
import type { OpenLoopResult } from './oha.js';
import { comparePoints, pointLabel, samePoint, type OpenLoopPoint } from './open-loop-point.js';

/** One variant's result; the JSON output is an array of these. */
export interface Row {
  readonly scenario: string;
  readonly variant: string;
  /** Requests per second over the measured period; null when the variant failed. */
  readonly rps: number | null;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /**
   * Redis commands per request: the sum of `calls` over INFO commandstats
   * (the harness's own INFO/CONFIG/FLUSHALL left out) ÷ requests. Commands a
   * Lua script runs count too, so one EVALSHA doing INCR + PEXPIRE is 3.
   * Null when the run had no Redis or the variant failed.
   */
  readonly redisCmdsPerReq: number | null;
  /** rps ÷ the baseline's (first variant's) rps; null when either failed. */
  readonly ratio: number | null;
  /**
   * CPU µs (user + system) the server's process tree spent per request
   * during the measured run: workers and child processes included, Redis
   * not. Other load on the machine moves it far less than requests/s, so it
   * is the column to compare across runs. Null when /proc cannot tell.
   */
  readonly serverCpuUsPerReq: number | null;
  /** Responses completed in the measured period. */
  readonly requests: number | null;
  readonly p90Ms: number | null;
  readonly maxMs: number | null;
  /** Responses by status class. */
  readonly status: { readonly '2xx': number; readonly '429': number; readonly other: number } | null;
  /** wrk socket errors (connect, read, write, timeout). */
  readonly socketErrors: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number } | null;
  /** Redis calls per command name over the measured period, for reading redisCmdsPerReq. */
  readonly redisCommands: Readonly<Record<string, number>> | null;
  /** Measured seconds and connections, so a JSON consumer knows the settings. */
  readonly durationS: number;
  readonly connections: number;
  /** Why the variant failed, when it did. */
  readonly error?: string;
  /** The open-loop run at the scenario's fixed rate, when it has one (see Scenario.fixedRate and bench/lib/rate.ts). */
  readonly fixedRate?: RateResult;
  /**
   * The open-loop runs, when the scenario has them (Scenario.openLoop) or the command line asked (`--open-loop`): each
   * with `share` (of this variant's saturating rate) or `rate` (requests/s, the same for every variant); bench/lib/oha.ts.
   */
  readonly openLoop?: readonly OpenLoopResult[];
  /** With `--rounds N` > 1: this variant's row from each round, in round order; the row itself holds their medians (bench/lib/rounds.ts). */
  readonly rounds?: readonly Row[];
}

/** Settings and machine shown above each table. */
export interface RunInfo {
  readonly scenario: string;
  readonly description: string;
  readonly lines: readonly string[];
}

interface Column {
  readonly title: string;
  readonly left?: boolean;
  readonly cell: (row: Row) => string;
}

const fixed = (value: number | null | undefined, digits: number): string => (value == null ? '-' : value.toFixed(digits));

const BASE_COLUMNS: readonly Column[] = [
  { title: 'variant', left: true, cell: (r) => r.variant },
  { title: 'requests/s', cell: (r) => (r.error ? 'FAILED' : fixed(r.rps, 0)) },
  { title: 'p50 ms', cell: (r) => fixed(r.p50Ms, 2) },
  { title: 'p99 ms', cell: (r) => fixed(r.p99Ms, 2) },
  { title: 'Redis cmds/req', cell: (r) => fixed(r.redisCmdsPerReq, 2) },
  // Three decimals: targets such as ≥ 0.95 must not be met by rounding.
  { title: 'ratio', cell: (r) => fixed(r.ratio, 3) },
  { title: 'server µs/req', cell: (r) => fixed(r.serverCpuUsPerReq, 1) },
  { title: '2xx', cell: (r) => (r.status ? String(r.status['2xx']) : '-') },
  { title: '429', cell: (r) => (r.status ? String(r.status['429']) : '-') },
  { title: 'other', cell: (r) => (r.status ? String(r.status.other) : '-') },
  {
    title: 'sock err',
    cell: (r) => (r.socketErrors ? String(Object.values(r.socketErrors).reduce((a, b) => a + b, 0)) : '-'),
  },
];

/** Columns of the fixed-rate run, shown only for scenarios that have one. */
function rateColumns(rps: number): Column[] {
  return [
    { title: `p50 ms @${rps}/s`, cell: (r) => fixed(r.fixedRate?.p50Ms, 2) },
    { title: `p99 ms @${rps}/s`, cell: (r) => fixed(r.fixedRate?.p99Ms, 2) },
    { title: 'achieved/s', cell: (r) => fixed(r.fixedRate?.achievedRps, 0) },
    { title: 'err', cell: (r) => (r.fixedRate ? String(r.fixedRate.errors) : '-') },
    { title: `server µs/req @${rps}/s`, cell: (r) => fixed(r.fixedRate?.serverCpuUsPerReq, 1) },
    { title: `Redis µs/req @${rps}/s`, cell: (r) => fixed(r.fixedRate?.redisCpuUsPerReq, 1) },
  ];
}

/** Columns of the open-loop runs, one group per point: a share of each variant's own saturating rate, or a rate. */
function openLoopColumns(points: readonly OpenLoopPoint[]): Column[] {
  return points.flatMap((point) => {
    const at = (r: Row): OpenLoopResult | undefined => r.openLoop?.find((o) => samePoint(o, point));
    const label = pointLabel(point);
    return [
      { title: `p50 ms ${label}`, cell: (r: Row) => fixed(at(r)?.p50Ms, 2) },
      { title: `p99 ms ${label}`, cell: (r: Row) => fixed(at(r)?.p99Ms, 2) },
      { title: `achieved/s ${label}`, cell: (r: Row) => fixed(at(r)?.achievedRps, 0) },
      { title: `err ${label}`, cell: (r: Row) => (at(r) ? String(at(r)!.errors) : '-') },
    ];
  });
}

/** Columns of a run with several rounds: each round's ratio and server µs/req (and p99 at the fixed rate), in round order, next to their medians. */
function roundColumns(rate: number | undefined): Column[] {
  const each = (row: Row, pick: (round: Row) => number | null | undefined, digits: number): string =>
    (row.rounds ?? []).map((round) => fixed(pick(round), digits)).join(' ');
  return [
    { title: 'ratio by round', left: true, cell: (r) => each(r, (round) => round.ratio, 3) },
    // CPU per request is the figure of record on a shared machine: every round of it, not only the median.
    { title: 'µs/req by round', left: true, cell: (r) => each(r, (round) => round.serverCpuUsPerReq, 1) },
    ...(rate === undefined
      ? []
      : [{ title: `p99 @${rate}/s by round`, left: true, cell: (r: Row) => each(r, (round) => round.fixedRate?.p99Ms, 2) }]),
  ];
}

/** The text report of one scenario: a header, the table, and the failures' messages. */
export function formatTable(info: RunInfo, rows: readonly Row[]): string {
  const rate = rows.find((row) => row.fixedRate !== undefined)?.fixedRate?.targetRps;
  const rounds = rows.some((row) => row.rounds !== undefined);
  const points: OpenLoopPoint[] = [];
  for (const run of rows.flatMap((row) => row.openLoop ?? [])) if (!points.some((p) => samePoint(p, run))) points.push(run);
  points.sort(comparePoints);
  const columns = [
    ...BASE_COLUMNS,
    ...(rate === undefined ? [] : rateColumns(rate)),
    ...openLoopColumns(points),
    ...(rounds ? roundColumns(rate) : []),
  ];
  const cells = rows.map((row) => columns.map((column) => column.cell(row)));
  const widths = columns.map((column, i) => Math.max(column.title.length, ...cells.map((line) => line[i]!.length)));
  const render = (values: readonly string[]): string =>
    values
      .map((value, i) => (columns[i]!.left ? value.padEnd(widths[i]!) : value.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  const out = [
    `${info.scenario}: ${info.description}`,
    ...info.lines.map((line) => `  ${line}`),
    '',
    render(columns.map((column) => column.title)),
    render(widths.map((width) => '-'.repeat(width))),
    ...cells.map(render),
  ];
  const failures = rows.filter((row) => row.error !== undefined);
  if (failures.length > 0) {
    out.push('');
    for (const row of failures) out.push(`${row.variant} failed: ${row.error}`);
  }
  out.push(
    '',
    "ratio = requests/s ÷ the first row's. Redis cmds/req counts commands run inside Lua scripts too. 429 = refused by the limiter.",
    "server µs/req = CPU time of the server's process tree (workers and children included, Redis not) ÷ requests; steadier than requests/s when the machine is shared.",
  );
  if (rate !== undefined) {
    out.push(
      `@${rate}/s: a second, open-loop run at ${rate} requests/s; latency from each request's scheduled start (no coordinated omission).`,
    );
  }
  if (points.some((p) => 'share' in p)) {
    out.push(
      `@N%: an open-loop run (oha --latency-correction) at N % of the variant's own requests/s above; latency from each request's scheduled start (no coordinated omission).`,
    );
  }
  if (points.some((p) => 'rate' in p)) {
    out.push(
      `@N/s (oha columns): an open-loop run (oha --latency-correction) at N requests/s, the same for every variant (--open-loop); latency from each request's scheduled start.`,
    );
  }
  if (rounds) {
    out.push(
      "With rounds: requests/s, latencies, ratio and server µs/req are medians over the rounds (ratio: of each round's ratio to its own baseline); counts are totals.",
    );
  }
  return `${out.join('\n')}\n`;
}
