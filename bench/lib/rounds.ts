/** Combining a variant's rows from several interleaved rounds into one row of medians, so one noisy round cannot decide a comparison. */
import type { RateResult } from './rate.js';
import type { OpenLoopResult } from './oha.js';
import { samePoint } from './open-loop-point.js';
import type { Row } from './report.js';

/** The median of `values` (the mean of the middle two for an even count); null when there is none. */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The order of the variants in round `round` (0-based): rotated by one per round so none always runs first or last, and drift on the machine spreads over all of them. */
export function roundOrder<T>(items: readonly T[], round: number): T[] {
  const shift = round % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/**
 * One row for a variant measured in several rounds. Latencies, ratios, CPU
 * and command rates are medians over the rounds (each round's ratio is taken
 * against the baseline of the same round, then the median of those); counts
 * (requests, statuses, socket errors, Redis commands) are sums, so an error in any round
 * shows. A variant that failed in any round is reported failed, with the
 * first round's reason. The per-round rows are kept in `rounds`.
 */
export function combineRounds(rows: readonly Row[]): Row {
  const first = rows[0];
  if (first === undefined) throw new Error('combineRounds needs at least one row');
  if (rows.length === 1) return first;
  const failed = rows.find((row) => row.error !== undefined);
  if (failed !== undefined) return { ...failed, error: `round ${rows.indexOf(failed) + 1}: ${failed.error}`, rounds: rows };
  const mid = (pick: (row: Row) => number | null | undefined): number | null => {
    const values = rows.map(pick).filter((v): v is number => typeof v === 'number');
    return values.length === rows.length ? median(values) : null;
  };
  const sum = (pick: (row: Row) => number): number => rows.reduce((total, row) => total + pick(row), 0);
  const statuses = rows.every((row) => row.status !== null)
    ? { '2xx': sum((r) => r.status!['2xx']), '429': sum((r) => r.status!['429']), other: sum((r) => r.status!.other) }
    : null;
  const socketErrors = rows.every((row) => row.socketErrors !== null)
    ? {
        connect: sum((r) => r.socketErrors!.connect),
        read: sum((r) => r.socketErrors!.read),
        write: sum((r) => r.socketErrors!.write),
        timeout: sum((r) => r.socketErrors!.timeout),
      }
    : null;
  const rates = rows.map((row) => row.fixedRate).filter((rate): rate is RateResult => rate !== undefined);
  const fixedRate: RateResult | undefined =
    rates.length === rows.length
      ? {
          targetRps: rates[0]!.targetRps,
          achievedRps: median(rates.map((r) => r.achievedRps))!,
          requests: rates.reduce((total, r) => total + r.requests, 0),
          p50Ms: median(rates.map((r) => r.p50Ms))!,
          p99Ms: median(rates.map((r) => r.p99Ms))!,
          maxMs: Math.max(...rates.map((r) => r.maxMs)),
          errors: rates.reduce((total, r) => total + r.errors, 0),
          serverCpuUsPerReq: median(rates.map((r) => r.serverCpuUsPerReq).filter((v): v is number => v != null)) ?? null,
          redisCpuUsPerReq: median(rates.map((r) => r.redisCpuUsPerReq).filter((v): v is number => v != null)) ?? null,
        }
      : undefined;
  const openLoop = combineOpenLoop(rows);
  return {
    scenario: first.scenario,
    variant: first.variant,
    rps: mid((r) => r.rps),
    p50Ms: mid((r) => r.p50Ms),
    p99Ms: mid((r) => r.p99Ms),
    redisCmdsPerReq: mid((r) => r.redisCmdsPerReq),
    ratio: mid((r) => r.ratio),
    serverCpuUsPerReq: mid((r) => r.serverCpuUsPerReq),
    requests: sum((r) => r.requests ?? 0),
    p90Ms: mid((r) => r.p90Ms),
    maxMs: Math.max(...rows.map((r) => r.maxMs ?? 0)),
    status: statuses,
    socketErrors,
    redisCommands: sumCounts(rows.map((r) => r.redisCommands)),
    durationS: first.durationS,
    connections: first.connections,
    ...(fixedRate === undefined ? {} : { fixedRate }),
    ...(openLoop === undefined ? {} : { openLoop }),
    rounds: rows,
  };
}

/** Per-command Redis counts added over the rounds; null when any round had none. */
function sumCounts(counts: ReadonlyArray<Readonly<Record<string, number>> | null>): Record<string, number> | null {
  if (counts.some((c) => c === null)) return null;
  const total: Record<string, number> = {};
  for (const c of counts) for (const [name, n] of Object.entries(c!)) total[name] = (total[name] ?? 0) + n;
  return total;
}

/** Per open-loop point (share or rate), the medians of the rounds' runs (errors summed); undefined unless every round has every point. */
function combineOpenLoop(rows: readonly Row[]): OpenLoopResult[] | undefined {
  const points = rows[0]?.openLoop;
  if (points === undefined) return undefined;
  const combined: OpenLoopResult[] = [];
  for (const point of points) {
    const runs = rows.map((row) => row.openLoop?.find((o) => samePoint(o, point))).filter((o): o is OpenLoopResult => o !== undefined);
    if (runs.length !== rows.length) return undefined;
    combined.push({
      ...('rate' in point ? { rate: point.rate } : { share: point.share }),
      targetRps: median(runs.map((r) => r.targetRps))!,
      achievedRps: median(runs.map((r) => r.achievedRps))!,
      p50Ms: median(runs.map((r) => r.p50Ms))!,
      p99Ms: median(runs.map((r) => r.p99Ms))!,
      errors: runs.reduce((total, r) => total + r.errors, 0),
    });
  }
  return combined;
}
