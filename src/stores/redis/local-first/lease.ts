/** What the local-first store knows about one key. */
/**
 * Its lease, its exhausted/blocked marks, its demand; and the outcomes it answers from them.
 */
import { ErrorCode, FloodgateError } from '../../../core/errors.js';
import type { Outcome, Policy } from '../../../core/policy.js';
import { firstDemand, lapse, leaseAdmitted, type LeaseState } from '../../lease-core.js';

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
export interface Entry extends LeaseState {
  /** The policy of the last consume; a consume under another policy starts the entry over. */
  policy: Policy | undefined;
  /** Until when (local time) a consume that the lease cannot cover is refused without Redis; 0 for not exhausted. */
  exhaustedUntil: number;
  /** Until when (local time) the key is blocked; Infinity until reset; 0 for not blocked. */
  blockedUntil: number;
  /** Last consume, for returning idle leases. */
  lastUse: number;
  /** Consumes waiting for the lease call in flight, in arrival order. */
  waiters: Waiter[];
  /** A lease call for this key is in flight. */
  inFlight: boolean;
  /** Called once the call in flight is answered (a composite waits for its parts' top-ups: see composite.ts). */
  onAnswered: Array<() => void> | undefined;
  /** The store's insertion count when the key was last put at the young end of its table (0: not yet). */
  placed: number;
}

/** A fresh entry at local time `now`. */
/** `horizonMs` is the lease horizon: a new key starts as if idle that long (see firstDemand). */
export function newEntry(now: number, horizonMs: number): Entry {
  return {
    ...firstDemand(now, horizonMs),
    policy: undefined,
    units: 0,
    spendUntil: 0,
    endsBy: 0,
    windowEnd: 0,
    remote: 0,
    exhaustedUntil: 0,
    blockedUntil: 0,
    lastUse: now,
    lastGrant: 0,
    waiters: [],
    inFlight: false,
    onAnswered: undefined,
    placed: 0,
  };
}

/** ms from `now` to local time `until`, rounded up to whole ms so a retry never comes early. */
export function msUntil(until: number, now: number): number {
  return until === Infinity ? Infinity : Math.max(0, Math.ceil(until - now));
}

/** The outcome of a consume admitted from the lease (the shared rule of lease-core.ts). */
export const admitted = leaseAdmitted;

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

/**
 * Decides a consume of `cost` on `e` from memory: from the lease, or refused
 * by a block or exhausted mark. Undefined when only Redis can decide, and
 * then nothing was spent (expired marks and lapsed units are cleared, which
 * any later look would do too). The caller counts a decided consume.
 */
export function decideInMemory(e: Entry, cost: number, policy: Policy, t: number): Outcome | undefined {
  if (e.blockedUntil !== 0) {
    if (e.blockedUntil > t) return blocked(msUntil(e.blockedUntil, t), msUntil(e.endsBy, t));
    e.blockedUntil = 0;
  }
  lapse(e, t);
  if (e.units >= cost && e.waiters.length === 0) {
    e.units -= cost;
    return admitted(e, t);
  }
  if (e.exhaustedUntil !== 0) {
    if (e.exhaustedUntil <= t) {
      e.exhaustedUntil = 0;
    } else if (policy.blockMs === 0 && e.waiters.length === 0) {
      // With a block duration the refusal must reach Redis, which sets the block for everyone.
      return exhausted(e, e.exhaustedUntil, t);
    }
  }
  return undefined;
}

/**
 * The periodic sweep of a store's entries at `t`: lapsed units drop, idle
 * leases (unused for `idleMs`) go back through `giveBack`, expired marks
 * clear, and idle keys holding nothing are forgotten.
 */
export function sweepEntries(entries: Map<string, Entry>, t: number, idleMs: number, giveBack: (key: string, e: Entry) => void): void {
  for (const [key, e] of entries) {
    if (e.units > 0) {
      if (t >= e.spendUntil) e.units = 0;
      else if (t - e.lastUse >= idleMs && !e.inFlight) giveBack(key, e);
    }
    if (e.exhaustedUntil !== 0 && e.exhaustedUntil <= t) e.exhaustedUntil = 0;
    if (e.blockedUntil !== 0 && e.blockedUntil <= t) e.blockedUntil = 0;
    const empty = e.units === 0 && e.exhaustedUntil === 0 && e.blockedUntil === 0 && !e.inFlight && e.waiters.length === 0;
    if (empty && t - e.lastUse >= idleMs) entries.delete(key);
  }
}

/** Forgets what a reset undoes: the lease (its window is gone, nothing to give back to) and every mark. */
export function forgetUsage(e: Entry): void {
  e.units = 0;
  // The lease's window is gone with it: a reservation's give-back must not be taken into it (settleLeased).
  e.spendUntil = 0;
  e.exhaustedUntil = 0;
  e.blockedUntil = 0;
}

/**
 * The outcome of a peek, reward or penalty Redis answered, seen from this
 * process: Redis counts its unspent lease as consumed; it is not, here.
 */
export function withLease(outcome: Outcome, e: Entry, t: number): Outcome {
  if (e.units <= 0 || t >= e.spendUntil || e.blockedUntil > t) return outcome;
  return { allowed: true, remaining: outcome.remaining + e.units, resetMs: outcome.resetMs, retryAfterMs: 0, emptyMs: 0 };
}

/** Fails every consume waiting on the entry's lease call (the call failed, or the store closed). */
export function rejectAll(e: Entry, error: FloodgateError): void {
  e.inFlight = false;
  const waiters = e.waiters;
  e.waiters = [];
  for (const w of waiters) w.reject(error);
}

/** The error of every operation on a closed LocalFirstStore. */
export function closedError(): FloodgateError {
  return new FloodgateError(ErrorCode.CLOSED, 'LocalFirstStore was closed; create a new store to keep limiting.');
}
