/** The overload scenario's numbers from the client's outcomes: goodput, percentiles, refusals, per-second series, fairness, settling. */
import type { Outcome } from './load.js';

/** The q-quantile (0..1) of `values`, nearest rank; null for none. */
export function percentile(values: readonly number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** The median of `values`, null for none. */
export function median(values: readonly number[]): number | null {
  return percentile(values, 0.5);
}

/** Admitted and answered by the upstream (in time or not). */
export function isOk(o: Outcome): boolean {
  return o.status === 200;
}

/** A refusal of the overload gate: 503 with `Floodgate-Overload`. */
export function isRefused(o: Outcome): boolean {
  return o.status === 503 && o.reason !== undefined;
}

/** Counts of one group of outcomes (a phase, a class, a tenant). */
export interface Counts {
  readonly offered: number;
  /** 200 responses, in time or not. */
  readonly admitted: number;
  /** 200 responses within the deadline. */
  readonly good: number;
  /** 503 with Floodgate-Overload, by reason. */
  readonly refused: number;
  readonly refusedBy: Readonly<Record<string, number>>;
  /** No response by the deadline. */
  readonly deadline: number;
  /** Socket errors and statuses other than 200 and the gate's 503. */
  readonly other: number;
}

/** Sorts `outcomes` into {@link Counts}. */
export function count(outcomes: readonly Outcome[], deadlineMs: number): Counts {
  const refusedBy: Record<string, number> = {};
  let admitted = 0;
  let good = 0;
  let refused = 0;
  let deadline = 0;
  let other = 0;
  for (const o of outcomes) {
    if (isOk(o)) {
      admitted += 1;
      if (o.latencyMs <= deadlineMs) good += 1;
    } else if (isRefused(o)) {
      refused += 1;
      refusedBy[o.reason!] = (refusedBy[o.reason!] ?? 0) + 1;
    } else if (o.status === 0 && !o.error) deadline += 1;
    else other += 1;
  }
  return { offered: outcomes.length, admitted, good, refused, refusedBy, deadline, other };
}

/**
 * 200 responses within the deadline that ended in each second of the
 * measured period, whenever they were due: what the upstream delivered in
 * time during that second (counted by when they were due instead, a queue
 * that holds the period's last requests past its end would add their answers
 * to it).
 */
export function goodPerSecond(outcomes: readonly Outcome[], durationS: number, deadlineMs: number): number[] {
  const seconds = new Array<number>(durationS).fill(0);
  for (const o of outcomes) {
    if (!isOk(o) || o.latencyMs > deadlineMs) continue;
    const s = Math.floor((o.at + o.latencyMs) / 1000);
    if (s >= 0 && s < durationS) seconds[s]! += 1;
  }
  return seconds;
}

/** Per second of the measured period (by when each request was due): `value` of that second's outcomes. */
export function perSecond(outcomes: readonly Outcome[], durationS: number, value: (second: readonly Outcome[]) => number): number[] {
  const buckets: Outcome[][] = Array.from({ length: durationS }, () => []);
  for (const o of outcomes) {
    const s = Math.floor(o.at / 1000);
    if (s >= 0 && s < durationS) buckets[s]!.push(o);
  }
  return buckets.map(value);
}

/**
 * Max-min fair shares of `capacity` between demands: every tenant asking
 * less than an equal split gets what it asks, the rest is split equally
 * among the others (water-filling).
 */
export function maxMinFair(demands: Readonly<Record<string, number>>, capacity: number): Record<string, number> {
  const shares: Record<string, number> = {};
  let left = capacity;
  let open = Object.keys(demands).sort((a, b) => demands[a]! - demands[b]!);
  while (open.length > 0) {
    const equal = left / open.length;
    const first = open[0]!;
    if (demands[first]! <= equal) {
      shares[first] = demands[first]!;
      left -= demands[first]!;
      open = open.slice(1);
    } else {
      for (const name of open) shares[name] = equal;
      open = [];
    }
  }
  return shares;
}

/** Jain's fairness index of `xs`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one takes everything. */
export function jain(xs: readonly number[]): number | null {
  const sum = xs.reduce((a, b) => a + b, 0);
  const squares = xs.reduce((a, b) => a + b * b, 0);
  return xs.length === 0 || squares === 0 ? null : (sum * sum) / (xs.length * squares);
}

/** One sample of the gateway's overload gauges. */
export interface GaugeSample {
  /** ms after the measured period began. */
  readonly at: number;
  readonly limit: number | null;
  readonly inFlight: number | null;
  readonly queued: number | null;
}

/**
 * How long after `from` the limit came within ±`band` of `settled` and
 * stayed there until `to`, in seconds; null when it never did (or there is
 * no sample). `settled` is the median of the limit over the last
 * `settleWindowMs` before `to`.
 */
export function settleTime(
  samples: readonly GaugeSample[],
  from: number,
  to: number,
  band: number,
  settleWindowMs: number,
): { seconds: number | null; settled: number | null } {
  const limits = (a: number, b: number): number[] => samples.filter((s) => s.at >= a && s.at < b && s.limit !== null).map((s) => s.limit!);
  const settled = median(limits(to - settleWindowMs, to));
  if (settled === null) return { seconds: null, settled };
  const inside = (limit: number): boolean => Math.abs(limit - settled) <= band * settled;
  const span = samples.filter((s) => s.at >= from && s.at < to && s.limit !== null);
  let lastOutside = -1;
  span.forEach((s, i) => {
    if (!inside(s.limit!)) lastOutside = i;
  });
  if (lastOutside === span.length - 1) return { seconds: null, settled };
  const first = span[lastOutside + 1]!;
  return { seconds: (first.at - from) / 1000, settled };
}
