/** What the local-first store knows about one key: its lease, its exhausted/blocked marks, its demand; and the outcomes it answers from them. */
import type { Outcome, Policy } from '../../../policy.js';

/** A consume waiting for the lease call in flight on its key. */
export interface Waiter {
  readonly cost: number;
  /** Counted in a lease call already sent: Redis granted its units before its reply, so a late grant may still admit it. */
  asked: boolean;
  resolve(outcome: Outcome): void;
  reject(error: unknown): void;
}

/**
 * Local state of one key. Times are on the store's local time base (the
 * injected clock, else `performance.now()`), never on Redis's.
 */
export interface Entry {
  /** The policy of the last consume; a consume under another policy starts the entry over. */
  policy: Policy | undefined;
  /** Leased units not spent yet. */
  units: number;
  /**
   * Local time after which the lease must not be spent: from the time the
   * lease call was sent and the ms Redis said were left in the window, minus
   * the rounding of Redis's clock and a margin (deadline.ts spendDeadline).
   * Redis ran the script after it was sent, so the window surely ends after this.
   */
  spendUntil: number;
  /** Local time by which the window has surely ended: reply received + ms left. Reported as resetMs. */
  endsBy: number;
  /** Redis's window end `r` the lease belongs to; a return names it so it only lands in that window. */
  windowEnd: number;
  /** Redis's remaining quota after the last lease call, for `remaining` in outcomes (stale by design). */
  remote: number;
  /** Until when (local time) a consume that the lease cannot cover is refused without Redis; 0 for not exhausted. */
  exhaustedUntil: number;
  /** Until when (local time) the key is blocked; Infinity until reset; 0 for not blocked. */
  blockedUntil: number;
  /** Units asked for since the last lease call was sent: the local rate is demand / (now − since). */
  demand: number;
  /** When the last lease call was sent. */
  since: number;
  /** Last consume, for returning idle leases. */
  lastUse: number;
  /** The last grant; once half of it is spent, a hot key tops its lease up ahead of need. */
  lastGrant: number;
  /** Consumes waiting for the lease call in flight, in arrival order. */
  waiters: Waiter[];
  /** A lease call for this key is in flight. */
  inFlight: boolean;
}

/** A fresh entry at local time `now`. */
export function newEntry(now: number): Entry {
  return {
    policy: undefined,
    units: 0,
    spendUntil: 0,
    endsBy: 0,
    windowEnd: 0,
    remote: 0,
    exhaustedUntil: 0,
    blockedUntil: 0,
    demand: 0,
    since: now,
    lastUse: now,
    lastGrant: 0,
    waiters: [],
    inFlight: false,
  };
}

/** ms from `now` to local time `until`, rounded up to whole ms so a retry never comes early. */
export function msUntil(until: number, now: number): number {
  return until === Infinity ? Infinity : Math.max(0, Math.ceil(until - now));
}

/** The outcome of a consume admitted from the lease. */
export function admitted(entry: Entry, now: number): Outcome {
  const remaining = entry.units + entry.remote;
  const resetMs = Math.max(1, msUntil(entry.endsBy, now));
  return { allowed: true, remaining, resetMs, retryAfterMs: 0, emptyMs: remaining >= 1 ? 0 : resetMs };
}

/** The outcome of a consume refused because the window's quota is spent, until local time `until`. */
export function exhausted(entry: Entry, until: number, now: number): Outcome {
  const left = msUntil(until, now);
  const remaining = entry.units + entry.remote;
  return {
    allowed: false,
    remaining,
    resetMs: left,
    retryAfterMs: left,
    emptyMs: remaining >= 1 ? 0 : left,
  };
}

/** The outcome of any consume while the key is blocked for `blockMs` more, in a window with `windowMs` left. */
export function blocked(blockMs: number, windowMs: number): Outcome {
  return { allowed: false, remaining: 0, resetMs: Math.max(blockMs, windowMs), retryAfterMs: blockMs, emptyMs: blockMs };
}
