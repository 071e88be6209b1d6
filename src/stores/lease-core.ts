/** The lease rules shared by the stores that lease slices of a fixed-window key's quota. */
/**
 * Those stores are local-first (from Redis) and the cluster store (from its primary). The rules: sizing, spending,
 * topping up, the spend deadline and what lapses.
 */
import type { Outcome } from '../core/policy.js';

/** A key's recent demand: units asked for since `since` (ms, on the caller's clock). */
export interface Demand {
  demand: number;
  since: number;
}

/** What both stores hold of one key's lease. Times are on the holder's clock. */
export interface LeaseState extends Demand {
  /** Units granted and not spent yet. */
  units: number;
  /** After this, the units must not be spent (see {@link spendDeadline}). */
  spendUntil: number;
  /** By when the window has surely ended (reply time + ms left); reported as resetMs. */
  endsBy: number;
  /** The grantor's window end the units belong to; units of another window are dropped, never carried over. */
  windowEnd: number;
  /** The grantor's remaining quota after the last grant (stale by design), for `remaining`. */
  remote: number;
  /** The last grant; a hot key tops up once half of it is spent. */
  lastGrant: number;
}

/**
 * How far before the earliest possible window end a lease stops being spent:
 * an admission must be decided, and reach its caller, while the window that
 * counted it is still open, even with the two clocks read a fraction of a
 * millisecond apart.
 */
const SPEND_MARGIN_MS = 1;

/**
 * The time (holder's clock) after which a lease must not be spent, for a call
 * sent at `sentAt` that the grantor answered with `windowLeft` ms to the
 * window end.
 *
 * The grantor reads its clock floored to whole ms, so the real time left
 * when it decided lies in (windowLeft − 1, windowLeft]; it decided after
 * `sentAt`, so the window surely ends after `sentAt + windowLeft − 1`, and
 * the lease stops {@link SPEND_MARGIN_MS} before that. With `exactClock`
 * (both sides read one injected clock) the window ends at exactly
 * `sentAt + windowLeft`.
 */
export function spendDeadline(sentAt: number, windowLeft: number, exactClock: boolean): number {
  return exactClock ? sentAt + windowLeft : sentAt + windowLeft - 1 - SPEND_MARGIN_MS;
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

/**
 * The demand of a key seen for the first time: as if it had been idle for a
 * whole horizon, so its first lease asks for what it spends rather than for
 * a rate read off one consume in one millisecond (which would ask for a
 * horizon's worth of a rate it does not have, and strand the surplus).
 */
export function firstDemand(now: number, horizonMs: number): Demand {
  return { demand: 0, since: now - horizonMs };
}

/** Drops the units of a lease past its deadline: its window may be over, and they lapse with it. */
export function lapse(lease: LeaseState, now: number): void {
  if (lease.units > 0 && now >= lease.spendUntil) lease.units = 0;
}

/**
 * Whether a hot key's lease should be topped up now, ahead of need: half of
 * the last grant (of at least `minGrant` units) is spent, and a reply sent now
 * would come, `leadMs` later, before the deadline (after it, its units would
 * lapse on arrival).
 */
export function wantsTopUp(lease: LeaseState, now: number, minGrant: number, leadMs: number): boolean {
  return lease.lastGrant >= Math.max(1, minGrant) && lease.units * 2 <= lease.lastGrant && now + leadMs < lease.spendUntil;
}

/**
 * Takes a grant into the lease. The need of the call is the caller's to
 * admit whatever the timing (the grantor counted it inside its window); only
 * the surplus is kept, and units of another window lapse first.
 */
export function keepSurplus(lease: LeaseState, surplus: number, windowEnd: number): void {
  if (windowEnd !== lease.windowEnd) {
    lease.units = 0;
    lease.lastGrant = 0;
    lease.windowEnd = windowEnd;
  }
  lease.units += surplus;
}

/** The outcome of a consume admitted from the lease: `remaining` counts the units held here too. */
export function leaseAdmitted(lease: LeaseState, now: number): Outcome {
  const remaining = lease.units + lease.remote;
  const resetMs = lease.endsBy === Infinity ? Infinity : Math.max(1, Math.ceil(lease.endsBy - now));
  return { allowed: true, remaining, resetMs, retryAfterMs: 0, emptyMs: remaining >= 1 ? 0 : resetMs };
}

/**
 * A reservation's give-back (`reward`) or excess charge (`penalty`) of
 * `amount` units settled in the lease at `now`, without asking the grantor:
 * the grantor counted the lease's units as consumed when it granted them, so
 * a give-back joins them (spendable here, or handed back with them) and an
 * excess is spent from them; its count stays exact either way. Undefined,
 * with nothing changed, when the lease cannot take it: past its deadline (its
 * window may be over, and a give-back must never land in a window that did
 * not count the estimate), or an excess it does not cover.
 */
export function settleInLease(lease: LeaseState, kind: 'reward' | 'penalty', amount: number, now: number): Outcome | undefined {
  if (now >= lease.spendUntil) return undefined;
  if (kind === 'reward') {
    lease.units += amount;
  } else {
    if (lease.units < amount) return undefined;
    // Spent like a consume, so it sizes the next slice too.
    lease.units -= amount;
    lease.demand += amount;
  }
  return leaseAdmitted(lease, now);
}
