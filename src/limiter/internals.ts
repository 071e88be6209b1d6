/** The internal view of a RateLimiter that composite decisions and reservations drive: its clock, guards, fallbacks, decision shaping and settling. */
import type { Clock } from '../core/clock.js';
import type { Decision, DecisionSource } from '../core/decision.js';
import type { BlockList } from '../guards/block-list.js';
import type { CircuitBreaker } from '../guards/breaker.js';
import type { RateLimiter } from './rate-limiter.js';
import type { StoreFailureMode } from './options.js';
import type { Outcome, Policy } from '../core/policy.js';

/**
 * Key of the RateLimiter method that returns its {@link LimiterInternals};
 * not exported from the package, so not API. A registered symbol, so that a
 * RateLimiter of the package's other build (ESM or CommonJS, both loaded in
 * one process) answers the middleware and `consumeAll` of this one.
 */
export const LIMITER_INTERNALS: unique symbol = Symbol.for('floodgate.limiterInternals');

/** What `consumeAll` needs of each part's limiter beyond its public fields. */
export interface LimiterInternals {
  /** The limiter's clock. */
  readonly clock: Clock;
  /** Its in-memory block list, when it has one. */
  readonly blockList: BlockList | undefined;
  /** Its circuit breaker, unless `breaker: false`. */
  readonly breaker: CircuitBreaker | undefined;
  /** Its insurance limiter, when set. */
  readonly insurance: RateLimiter | undefined;
  /** What it does when the store fails and no insurance is set. */
  readonly failureMode: StoreFailureMode;
  /** Whether it has `wait` or `execEvenly`, which a composite decision does not apply. */
  readonly waits: boolean;
  /** Empties its in-memory block list when its overrides changed since it last looked (what it learned was under old numbers). */
  dropStaleBlocks(): void;
  /** Feeds its in-memory block list from a store outcome for `key` (a consume under `policy`, the key's). */
  learn(key: string, outcome: Outcome, policy: Policy): void;
  /** Drops `key` from the in-memory block list and its lapse probe, and wakes its waiters: its state in the store changed. */
  forget(key: string): void;
  /** The Decision for an outcome under `policy` (the key's: the limiter's, or an override). */
  decision(outcome: Outcome, source: DecisionSource, policy: Policy): Decision;
  /**
   * A reservation's give-back (`reward`) or excess charge (`penalty`) of
   * `amount` units of `key`, on the limiter's store only: a fallback did not
   * take the units, so it must not settle them. Rejects with the store's
   * failure (the breaker counts it).
   */
  settle(kind: 'reward' | 'penalty', key: string, amount: number): Promise<Decision>;
}
