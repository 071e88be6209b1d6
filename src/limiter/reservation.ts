/** Reservations: units consumed up front at an estimate, then settled at the actual cost. */
/**
 * Settled means given back or charged, or left to lapse at the estimate.
 */
import type { Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { LIMITER_INTERNALS, type LimiterCore, type LimiterInternals } from './internals.js';
import { capacityOf, type Policy } from '../core/policy.js';
import { assertKey, assertKnownOptions, assertUnits, wholeNumber } from '../core/validate.js';

/** Options of {@link RateLimiter.reserve}. */
export interface ReserveOptions {
  /**
   * How long the reservation may be settled. After it, `commit` and `cancel`
   * change nothing: the estimate, spent up front, stays charged, so a holder
   * that crashed leaks nothing. Default: the policy's window.
   */
  ttl?: Duration;
}

/**
 * How a reservation ended:
 * - `'settled'`: `commit` or `cancel` within the ttl applied the difference;
 * - `'expired'`: called after the ttl, it changed nothing and the estimate stays charged;
 * - `'refused'`: the reserve was not admitted, so nothing was held or charged.
 */
export type SettlementStatus = 'settled' | 'expired' | 'refused';

/** What `commit` or `cancel` did. */
export interface Settlement {
  /** See {@link SettlementStatus}. */
  readonly status: SettlementStatus;
  /**
   * Units finally charged for this reservation: the actual cost when
   * settled (the estimate when the give-back was dropped because the
   * estimate's window had ended), the estimate when expired, 0 when refused
   * or when the limiter failed open (nothing was spent).
   */
  readonly charged: number;
}

const OPTION_NAMES = ['ttl'] as const;

/** Where a reservation's units were taken, hence where they are settled; undefined when nothing was taken. */
interface Ledger {
  readonly settle: LimiterInternals['settle'];
  /** How many of `units` may be given back at `now` (limiter clock) without landing where the estimate was not counted. */
  returnable(units: number, now: number): number;
}

/** The parts of a {@link Reservation}, as {@link reserve} builds them; not API. */
export interface ReservationParts {
  readonly decision: Decision;
  readonly key: string;
  readonly estimate: number;
  readonly expiresAt: number;
  readonly clock: Clock;
  readonly ledger: Ledger | undefined;
}

/**
 * Units of one key held at an estimate until the real cost is known; made by
 * {@link RateLimiter.reserve}. Settle it once, with `commit(actual)` or
 * `cancel()`, within its ttl.
 *
 * - `commit(actual)` below the estimate gives the difference back (a reward);
 *   above it, charges the excess (a penalty) **unconditionally**: the key may
 *   go over its limit, and later consumes are refused until it drains. The
 *   excess lands in the window current at the commit.
 * - A give-back never lands in a window that did not count the estimate: once
 *   the estimate's window has ended, as far as the limiter's clock can tell,
 *   it is dropped (fixed window: the reserve's `resetMs`; sliding window: the
 *   end of the aligned window the reserve fell in; sliding log: one window
 *   after the reserve). The token bucket always takes it back.
 * - Settled where the units were taken: on the insurance limiter when it
 *   decided the reserve; not at all when the limiter failed open.
 */
export class Reservation {
  /** The consume of the estimate. */
  readonly decision: Decision;
  /** Whether the estimate was admitted (`decision.allowed`); when not, nothing is held and commit/cancel resolve `'refused'`. */
  readonly allowed: boolean;
  /** The key reserved. */
  readonly key: string;
  /** The units consumed up front. */
  readonly estimate: number;
  /** When the ttl ends, in ms on the limiter's clock; from then on commit and cancel change nothing. */
  readonly expiresAt: number;
  private readonly clock: Clock;
  private readonly ledger: Ledger | undefined;
  /** True from the first commit or cancel on (reset when settling fails, so it may be retried). */
  private settling = false;

  /** Made by {@link RateLimiter.reserve}; not meant to be called directly. */
  constructor(parts: ReservationParts) {
    this.decision = parts.decision;
    this.allowed = parts.decision.allowed;
    this.key = parts.key;
    this.estimate = parts.estimate;
    this.expiresAt = parts.expiresAt;
    this.clock = parts.clock;
    this.ledger = parts.ledger;
  }

  /**
   * Settles at `actual` units: gives back `estimate − actual`, or charges
   * `actual − estimate` even past the limit (see the class description).
   * When the store fails meanwhile, rejects with its error and the
   * reservation stays open: retry, or let it lapse at the estimate.
   * @param actual - the real cost, a whole number ≥ 0
   * @throws FloodgateError (as a rejection) INVALID_COST for a bad `actual`, RESERVATION_SETTLED on a second commit or cancel
   */
  async commit(actual: number): Promise<Settlement> {
    wholeNumber(actual, 'Reservation commit(actual)', { code: ErrorCode.INVALID_COST });
    if (this.settling) {
      throw new FloodgateError(
        ErrorCode.RESERVATION_SETTLED,
        `the reservation of ${this.estimate} units of key ${JSON.stringify(this.key)} was already committed or cancelled; settle each reservation once (reserve again for another request).`,
      );
    }
    this.settling = true;
    if (!this.allowed) return { status: 'refused', charged: 0 };
    const now = this.clock();
    const ledger = this.ledger;
    const expired = now >= this.expiresAt;
    // Failed open: nothing was spent, so there is nothing to settle or to leave charged.
    if (ledger === undefined) return { status: expired ? 'expired' : 'settled', charged: 0 };
    if (expired) return { status: 'expired', charged: this.estimate };
    try {
      if (actual > this.estimate) {
        await ledger.settle('penalty', this.key, actual - this.estimate);
      } else if (actual < this.estimate) {
        const back = ledger.returnable(this.estimate - actual, now);
        if (back > 0) await ledger.settle('reward', this.key, back);
        return { status: 'settled', charged: this.estimate - back };
      }
    } catch (error) {
      this.settling = false;
      throw error;
    }
    return { status: 'settled', charged: actual };
  }

  /** Gives the estimate back: `commit(0)`, with the same rules. */
  cancel(): Promise<Settlement> {
    return this.commit(0);
  }
}

/**
 * {@link RateLimiter.reserve}: consumes `estimate` through the limiter's
 * ordinary consume path and records where the units went.
 */
export async function reserve(limiter: LimiterCore, key: string, estimate: number, options?: ReserveOptions): Promise<Reservation> {
  assertKey(key);
  const policy = limiter.policyFor(key);
  assertUnits(estimate, 'estimate', capacityOf(policy));
  let ttlMs = policy.windowMs;
  if (options !== undefined) {
    assertKnownOptions(options, OPTION_NAMES, 'reserve');
    if (options.ttl !== undefined) ttlMs = parseDuration(options.ttl, 'reserve ttl');
  }
  // Read before the store decides, so every bound below is on the early side.
  const at = limiter[LIMITER_INTERNALS]().clock();
  const decision = await limiter.consume(key, estimate);
  return holdReservation(limiter, key, estimate, decision, at, ttlMs);
}

/**
 * The reservation of units already consumed: `decision` is `limiter`'s
 * consume of `estimate` units of `key`, asked at `at` (the limiter's clock,
 * read before the store decided). The HTTP middleware holds its requests'
 * units this way when their cost is settled after the response.
 */
export function holdReservation(
  limiter: LimiterCore,
  key: string,
  estimate: number,
  decision: Decision,
  at: number,
  ttlMs: number,
): Reservation {
  const internals = limiter[LIMITER_INTERNALS]();
  let ledger: Ledger | undefined;
  // A shadow limiter's would-be refusal was admitted without spending: there is nothing to settle.
  if (decision.allowed && decision.source !== 'fail-open' && decision.shadowLimited !== true) {
    const taker = decision.source === 'insurance' ? internals.insurance! : limiter;
    ledger = { settle: taker[LIMITER_INTERNALS]().settle, returnable: giveBackRule(taker.policyFor(key), decision, at) };
  }
  return new Reservation({ decision, key, estimate, expiresAt: at + ttlMs, clock: internals.clock, ledger });
}

/**
 * How much of a give-back may land, for a reserve made at `at` (limiter
 * clock, read before the store decided, so every bound errs early):
 * windows drop it whole once the window that counted the estimate has
 * surely ended; the bucket keeps only what it would still owe.
 */
function giveBackRule(policy: Policy, decision: Decision, at: number): (units: number, now: number) => number {
  const W = policy.windowMs;
  let end = Infinity;
  if (policy.algorithm === 'fixed-window') end = at + decision.resetMs;
  else if (policy.algorithm === 'sliding-window') end = at - (at % W) + W;
  else if (policy.algorithm === 'sliding-log') end = at + W;
  else return (units, now) => bucketReturnable(policy, decision.resetMs, units, now - at);
  return (units, now) => (now < end ? units : 0);
}

/**
 * Tokens of a give-back a token bucket still owes `elapsed` ms after the
 * reserve. The bucket's debt (in 1/L ms, W per token) drains at L a ms and
 * never below zero. Had the reserve taken `units` fewer tokens, its debt
 * would have reached zero sooner, and refill while at zero is lost; so the
 * give-back shrinks by what that smaller debt would have lost by now,
 * reckoned from the earliest debt the reserve's `resetMs` allows. With no
 * consume since the reserve the store's own floor at zero already gives the
 * same result; with consumes since, this keeps the give-back from crediting
 * refill the smaller reservation would never have had.
 */
function bucketReturnable(policy: Policy, resetMs: number, units: number, elapsed: number): number {
  const { limit: L, windowMs: W } = policy;
  const debtAfter = Math.max(0, (resetMs - 1) * L + 1);
  const smallerDebt = Math.max(0, debtAfter - units * W);
  const lost = Math.max(0, elapsed * L - smallerDebt);
  return Math.max(0, Math.floor((units * W - lost) / W));
}
