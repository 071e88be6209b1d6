/** The narrow contract RateLimiter's helpers take instead of the class. */
/**
 * Its public fields they read, and its internal pipeline.
 */
import type { Clock } from '../core/clock.js';
import type { Decision, DecisionSource } from '../core/decision.js';
import type { CircuitBreaker } from '../guards/breaker.js';
import type { MemoryBlockGuard } from '../guards/memory-block.js';
import type { OperationKind, Outcome, Policy } from '../core/policy.js';
import type { Store } from '../stores/store.js';

/**
 * Key of the RateLimiter method that returns its {@link LimiterInternals};
 * not exported from the package, so not API. A registered symbol, so that a
 * RateLimiter of the package's other build (ESM or CommonJS, both loaded in
 * one process) answers the middleware and `consumeAll` of this one.
 */
export const LIMITER_INTERNALS: unique symbol = Symbol.for('floodgate.limiterInternals');

/** What to do when the store fails and no insurance limiter is set. */
export type StoreFailureMode = 'reject' | 'fail-open' | 'fail-closed';

/**
 * A RateLimiter as the modules beneath it see it (options, admin,
 * reservations, fallback): RateLimiter implements it, and its symbol member
 * keeps any other object out, so a value of this type is a RateLimiter.
 */
export interface LimiterCore {
  /** The store in use. */
  readonly store: Store;
  /** The key namespace in the store. */
  readonly prefix: string;
  /** Where a key's counter lives in the store (RateLimiter.storeKey). */
  storeKey(key: string): string;
  /** The policy that decides `key` (the limiter's, or the key's override). */
  policyFor(key: string): Policy;
  /** RateLimiter.consume. */
  consume(key: string, cost?: number): Promise<Decision>;
  /** The limiter's internal pipeline. */
  [LIMITER_INTERNALS](): LimiterInternals;
}

/** What decides while a limiter's store fails (see `parseFailureHandling`), with the clock and breaker that time a fail-closed refusal. */
export interface FailureHandling {
  /** The limiter's clock. */
  readonly clock: Clock;
  /** Its circuit breaker, unless `breaker: false`. */
  readonly breaker: CircuitBreaker | undefined;
  /** Its insurance limiter, when set. */
  readonly insurance: LimiterCore | undefined;
  /** What it does when the store fails and no insurance is set. */
  readonly failureMode: StoreFailureMode;
}

/** What composite decisions, reservations, the admin calls and the HTTP middleware need of a limiter beyond its public fields. */
export interface LimiterInternals extends FailureHandling {
  /** Its in-memory block, when it has one. */
  readonly memoryBlock: MemoryBlockGuard | undefined;
  /** Whether it has `wait` or `execEvenly`, which a composite decision does not apply. */
  readonly waits: boolean;
  /** Drops `key` from the in-memory block and its lapse probe, and wakes its waiters: its state in the store changed. */
  forget(key: string): void;
  /** The Decision for an outcome under `policy` (the key's: the limiter's, or an override). */
  decision(outcome: Outcome, source: DecisionSource, policy: Policy): Decision;
  /** One operation through the limiter's in-memory block, breaker, store and fallbacks: how an insurance limiter is asked. */
  run(kind: OperationKind, key: string, amount: number): Promise<Decision>;
  /**
   * A reservation's give-back (`reward`) or excess charge (`penalty`) of
   * `amount` units of `key`, on the limiter's store only: a fallback did not
   * take the units, so it must not settle them. Rejects with the store's
   * failure (the breaker counts it).
   */
  settle(kind: 'reward' | 'penalty', key: string, amount: number): Promise<Decision>;
}
