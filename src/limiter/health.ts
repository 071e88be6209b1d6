/** What RateLimiter.health() reports: its circuit breaker's state and what decides while its store fails. */
import type { FailureHandling, StoreFailureMode } from './internals.js';

/**
 * A circuit breaker's state: `off` (`breaker: false`), `closed` (calls reach
 * the store; also once an open breaker's cooldown is over, as the next call
 * probes), `open` (calls are kept from the store for `retryInMs` more), or
 * `probing` (its one probe call is out, and the others are kept away).
 */
export type BreakerState = 'off' | 'closed' | 'open' | 'probing';

/** A RateLimiter's guards as {@link RateLimiter.health} reports them. */
export interface LimiterHealth {
  /** The circuit breaker's state. */
  readonly breaker: BreakerState;
  /** ms until the open breaker lets a probe through; 0 when it is not open. */
  readonly retryInMs: number;
  /** What decides while the store fails: the insurance limiter, or the `onStoreFailure` mode. */
  readonly fallback: 'insurance' | StoreFailureMode;
}

/** The health of a limiter whose failure handling is `handling`, read now on its clock. */
export function limiterHealth(handling: FailureHandling): LimiterHealth {
  const now = handling.clock();
  const breaker = handling.breaker;
  const state: BreakerState =
    breaker === undefined ? 'off' : !breaker.anyOpen(now) ? 'closed' : breaker.nextRetryInMs(now) > 0 ? 'open' : 'probing';
  return {
    breaker: state,
    retryInMs: breaker?.nextRetryInMs(now) ?? 0,
    fallback: handling.insurance !== undefined ? 'insurance' : handling.failureMode,
  };
}
