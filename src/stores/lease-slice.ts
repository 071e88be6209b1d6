/** How much quota a lease should ask for: shared by the stores that lease slices of a key's quota (local-first from Redis, the cluster store from its primary). */

/** A key's recent demand: units asked for since `since` (ms, on the caller's clock). */
export interface Demand {
  demand: number;
  since: number;
}

/**
 * The slice to ask for: enough for the waiting consumes, and about
 * `horizonMs` worth of this process's recent demand, so a hot key needs one
 * call per `horizonMs` and a cold one asks for what it spends. The grantor
 * caps it at a share of what remains.
 */
export function wantedSlice(entry: Demand, need: number, queued: number, now: number, horizonMs: number): number {
  const elapsed = Math.max(now - entry.since, 1);
  const rateBased = Math.ceil((entry.demand / elapsed) * horizonMs);
  return Math.max(need, queued, Math.min(rateBased, Number.MAX_SAFE_INTEGER));
}
