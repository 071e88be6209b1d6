/** Where an open-loop run loads a variant: a share of its own saturating rate, or one rate for every variant. */
import type { Scenario } from '../types.js';

/**
 * One open-loop run's load: `{ share }` is a share of the variant's own
 * closed-loop requests/s (the scenario's `openLoop.shares`), `{ rate }` is
 * requests/s, the same for every variant (`--open-loop`), so variants that
 * saturate at different rates can be compared at one load. The key is kept
 * in each result (and its JSON row), so the row says which it was.
 */
export type OpenLoopPoint = { readonly share: number } | { readonly rate: number };

/**
 * The open-loop runs of `scenario`: at `rates` when the command line gave
 * them (`--open-loop`), else at the scenario's shares; none for a gRPC
 * scenario, whose servers oha cannot load.
 */
export function openLoopPoints(scenario: Scenario, rates: readonly number[] | undefined): OpenLoopPoint[] {
  if (scenario.grpc !== undefined) return [];
  if (rates !== undefined) return rates.map((rate) => ({ rate }));
  return (scenario.openLoop?.shares ?? []).map((share) => ({ share }));
}

/** The requests/s `point` asks of a variant whose closed-loop run reached `saturatedRps`. */
export function pointRps(point: OpenLoopPoint, saturatedRps: number): number {
  return 'rate' in point ? point.rate : point.share * saturatedRps;
}

/** Whether two points are the same load (results of different rounds and variants are matched by it). */
export function samePoint(a: OpenLoopPoint, b: OpenLoopPoint): boolean {
  return 'rate' in a ? 'rate' in b && a.rate === b.rate : 'share' in b && a.share === b.share;
}

/** The point in a column title: `@80%` for a share, `@16000/s` for a rate. */
export function pointLabel(point: OpenLoopPoint): string {
  return 'rate' in point ? `@${point.rate}/s` : `@${Math.round(point.share * 100)}%`;
}

/** Shares first, then rates, each ascending: the order of the table's columns. */
export function comparePoints(a: OpenLoopPoint, b: OpenLoopPoint): number {
  if ('rate' in a !== 'rate' in b) return 'rate' in a ? 1 : -1;
  return ('rate' in a ? a.rate : a.share) - ('rate' in b ? b.rate : b.share);
}
