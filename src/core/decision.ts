/** The Decision value every consume, peek, reward, penalty and block resolves to. */
import { capacityOf, refillMs, type Outcome, type Policy } from './policy.js';

/** Where a decision came from; useful for metrics and for tests. */
export type DecisionSource =
  /** The store answered. */
  | 'store'
  /** The in-memory block list answered without calling the store. */
  | 'memory-block'
  /** The store failed and the insurance limiter answered. */
  | 'insurance'
  /** The store failed and the limiter is configured to fail open. */
  | 'fail-open'
  /** The store failed and the limiter is configured to fail closed. */
  | 'fail-closed';

/**
 * The outcome of one call. Its fields map one-to-one to the HTTP fields
 * `RateLimit` (remaining, reset), `RateLimit-Policy` (limit, window) and
 * `Retry-After` (retryAfterMs).
 */
export interface Decision {
  /** True when the request was admitted (for `peek`: when a cost-1 consume would be). */
  readonly allowed: boolean;
  /** The policy's limit (requests per window, or the bucket size: its burst); a key's override's when it has one. */
  readonly limit: number;
  /**
   * The policy's window in ms (for token-bucket: time to refill the whole
   * bucket, burst × window / limit); a key's override's when it has one.
   */
  readonly windowMs: number;
  /** Units that can still be consumed now, never negative. */
  readonly remaining: number;
  /** Milliseconds until the quota is whole again (0 when it already is). `Infinity` while blocked until unblocked. */
  readonly resetMs: number;
  /** Milliseconds until this call could succeed if retried; 0 when allowed. `Infinity` while blocked until unblocked. */
  readonly retryAfterMs: number;
  /** Who produced the decision. */
  readonly source: DecisionSource;
  /**
   * Milliseconds this call waited before it was answered: in its key's wait
   * line (the `wait` option) and for its pacing slot (`execEvenly`); 0 when it
   * was answered at once. Present only on limiters with `wait` or `execEvenly`.
   */
  readonly waitedMs?: number;
  /**
   * True on a shadow limiter's decision (the `shadow` option) that the policy
   * would have refused: `allowed` is true, nothing was spent (as for any
   * refusal), and `remaining`, `resetMs` and `retryAfterMs` are the refusal's,
   * so a log line can say how long the client would have waited. Absent otherwise.
   */
  readonly shadowLimited?: true;
}

/** The decision of a store outcome under `policy`, from `source`. */
export function toDecision(outcome: Outcome, policy: Policy, source: DecisionSource): Decision {
  return {
    allowed: outcome.allowed,
    limit: capacityOf(policy),
    windowMs: refillMs(policy),
    remaining: outcome.remaining,
    resetMs: outcome.resetMs,
    retryAfterMs: outcome.retryAfterMs,
    source,
  };
}
