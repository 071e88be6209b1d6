/** The egress scenario's text tables and JSON rows: medians over the rounds, and every round's figure beside them. */
import type { Row } from '../lib/report.js';
import { median } from '../lib/rounds.js';
import type { InProcessPoint } from './in-process.js';
import { sharedName, SHARED_VARIANTS, type SharedPoint } from './shared-redis.js';
import { CALLERS, CONCURRENCY, ONE_PROCESS_VARIANTS, PROCESSES } from './workload.js';

/** A harness row plus what the egress tables show: the part, and each round's figures. */
export type EgressRow = Row & {
  readonly ratioLabel: string;
  readonly floodgate: boolean;
  readonly egress: {
    readonly part: 'one-process' | 'four-processes';
    /** What `ratio` divides by. */
    readonly ratioTo: string;
    readonly rounds: readonly (InProcessPoint | SharedPoint)[];
    /** Each round's ratio, in round order. */
    readonly ratioByRound: readonly number[];
  };
};

/** The chart's title (scripts/bench-chart.ts takes the first row's): the two parts' ratios point opposite ways. */
const RATIO_LABEL = "one/: µs/call ÷ p-queue's (shorter wins); four/: calls/s ÷ bottleneck's";

const fixed = (value: number | null | undefined, digits: number): string => (value == null ? '-' : value.toFixed(digits));
const list = (values: readonly number[], digits: number): string => values.map((v) => v.toFixed(digits)).join(' ');
const med = (values: readonly number[]): number => median(values) ?? NaN;

/** Renders rows of cells as an aligned text table, the first columns left-aligned. */
function table(titles: readonly string[], rows: readonly (readonly string[])[], left = 1): string[] {
  const widths = titles.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const render = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i < left ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [render(titles), render(widths.map((w) => '-'.repeat(w))), ...rows.map(render)];
}

/** Per variant of the first part: its points by round, and its CPU ratio to p-queue's of the same round. */
function inProcessSeries(rounds: readonly InProcessPoint[][]) {
  return ONE_PROCESS_VARIANTS.map((variant, i) => {
    const points = rounds.map((r) => r[i]!);
    const ratios = rounds.map((r) => r[i]!.cpuUsPerCall / r.find((p) => p.variant === 'p-queue')!.cpuUsPerCall);
    const overheads = rounds.map((r) => r[i]!.cpuUsPerCall - r.find((p) => p.variant === 'bare')!.cpuUsPerCall);
    return { variant, points, ratios, overheads };
  });
}

/** Per variant of the second part: its points by round, and its throughput ratio to bottleneck's on the same budget and round. */
function sharedSeries(rounds: readonly SharedPoint[][]) {
  return SHARED_VARIANTS.map((variant, i) => {
    const points = rounds.map((r) => r[i]!);
    const ratios = rounds.map((r) => r[i]!.callsPerS / r.find((p) => p.library === 'bottleneck' && p.budget === variant.budget)!.callsPerS);
    return { variant, points, ratios };
  });
}

/** The first part's table. */
export function inProcessTable(rounds: readonly InProcessPoint[][], calls: number): string[] {
  const series = inProcessSeries(rounds);
  return [
    `one process: ${calls} calls of a trivial async function by ${CALLERS} callers, one call after another each; process CPU (user + system) on one core`,
    ...table(
      ['variant', 'µs/call', '÷ p-queue', 'µs/call over bare', 'calls/s', 'µs/call by round', '÷ p-queue by round'],
      series.map((s) => [
        s.variant,
        fixed(med(s.points.map((p) => p.cpuUsPerCall)), 3),
        fixed(med(s.ratios), 3),
        fixed(med(s.overheads), 3),
        fixed(med(s.points.map((p) => p.callsPerS)), 0),
        list(
          s.points.map((p) => p.cpuUsPerCall),
          3,
        ),
        list(s.ratios, 3),
      ]),
    ),
    `bare: \`await fn()\`; p-queue: concurrency ${CONCURRENCY}, intervalCap never reached; floodgate-concurrency: OutboundLimiter on the memory store,`,
    `concurrency ${CONCURRENCY} and a rate never reached; floodgate-rate: the rate alone. Target: floodgate ≤ p-queue (÷ p-queue ≤ 1). Medians over the rounds.`,
  ];
}

/** The second part's table. */
export function sharedTable(rounds: readonly SharedPoint[][], timing: { warmupS: number; durationS: number }): string[] {
  const series = sharedSeries(rounds);
  return [
    `${PROCESSES} processes on one Redis: ${CALLERS} callers each, a trivial async function, ${timing.warmupS} s warm-up then ${timing.durationS} s measured`,
    ...table(
      [
        'budget',
        'library',
        'calls/s',
        'floodgate ÷ bottleneck',
        'process µs/call',
        'Redis µs/call',
        'Redis cmds/call',
        'errors',
        'calls/s by round',
        'ratio by round',
      ],
      series.map((s) => [
        s.variant.budget,
        s.variant.library,
        fixed(med(s.points.map((p) => p.callsPerS)), 0),
        s.variant.library === 'floodgate' ? fixed(med(s.ratios), 3) : '-',
        fixed(med(s.points.map((p) => p.cpuUsPerCall)), 1),
        fixed(med(s.points.map((p) => p.redisUsPerCall)), 1),
        fixed(med(s.points.map((p) => p.redisCmdsPerCall)), 2),
        String(s.points.reduce((sum, p) => sum + p.errors, 0)),
        list(
          s.points.map((p) => p.callsPerS),
          0,
        ),
        s.variant.library === 'floodgate' ? list(s.ratios, 3) : '-',
      ]),
      2,
    ),
    `concurrency: ${CONCURRENCY} in flight in total (bottleneck maxConcurrent on datastore ioredis, one id; OutboundLimiter concurrency on RedisStore);`,
    `rate: a budget never reached (bottleneck reservoir with refresh; OutboundLimiter rate). calls/s = the ${PROCESSES} processes' sum. Target: ratio ≥ 2.`,
  ];
}

/** A row in the harness's shape (scripts/bench-chart.ts draws `ratio`), with the part's own figures in `egress`. */
function row(
  variant: string,
  part: EgressRow['egress']['part'],
  fields: { callsPerS: number; cpuUsPerCall: number; calls: number | null; redisCmdsPerCall: number | null; durationS: number },
  ratio: { value: number; to: string; byRound: readonly number[] },
  rounds: readonly (InProcessPoint | SharedPoint)[],
): EgressRow {
  return {
    scenario: 'egress',
    variant,
    rps: fields.callsPerS,
    p50Ms: null,
    p99Ms: null,
    redisCmdsPerReq: fields.redisCmdsPerCall,
    ratio: ratio.value,
    serverCpuUsPerReq: fields.cpuUsPerCall,
    requests: fields.calls,
    p90Ms: null,
    maxMs: null,
    status: null,
    socketErrors: null,
    redisCommands: null,
    durationS: fields.durationS,
    connections: CALLERS,
    ratioLabel: RATIO_LABEL,
    floodgate: variant.includes('floodgate'),
    egress: { part, ratioTo: ratio.to, rounds, ratioByRound: ratio.byRound },
  };
}

/** The first part's rows: ratio = CPU µs per call ÷ p-queue's (shorter is cheaper). */
export function inProcessRows(rounds: readonly InProcessPoint[][], calls: number): EgressRow[] {
  return inProcessSeries(rounds).map((s) =>
    row(
      `one/${s.variant}`,
      'one-process',
      {
        callsPerS: med(s.points.map((p) => p.callsPerS)),
        cpuUsPerCall: med(s.points.map((p) => p.cpuUsPerCall)),
        calls: calls * rounds.length,
        redisCmdsPerCall: null,
        durationS: 0,
      },
      { value: med(s.ratios), to: 'p-queue', byRound: s.ratios },
      s.points,
    ),
  );
}

/** The second part's rows: ratio = calls/s ÷ bottleneck's on the same budget (longer is faster). */
export function sharedRows(rounds: readonly SharedPoint[][], durationS: number): EgressRow[] {
  return sharedSeries(rounds).map((s) =>
    row(
      `four/${sharedName(s.variant)}`,
      'four-processes',
      {
        callsPerS: med(s.points.map((p) => p.callsPerS)),
        cpuUsPerCall: med(s.points.map((p) => p.cpuUsPerCall)),
        calls: s.points.reduce((sum, p) => sum + p.calls, 0),
        redisCmdsPerCall: med(s.points.map((p) => p.redisCmdsPerCall)),
        durationS,
      },
      {
        value: med(s.ratios),
        to: `bottleneck-${s.variant.budget}`,
        byRound: s.ratios,
      },
      s.points,
    ),
  );
}
