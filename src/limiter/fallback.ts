/** What a RateLimiter answers for a call its store cannot take. */
/**
 * The open breaker's error, and the fallback (insurance, fail-open, fail-closed) that decides instead.
 */
import { toDecision, type Decision } from '../core/decision.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import type { FailureHandling, LimiterCore } from './internals.js';
import { capacityOf, type Outcome, type Policy } from '../core/policy.js';

/** The error of a call the open breaker keeps away from store `storeName` for `retryInMs` more. */
export function circuitOpenError(storeName: string, retryInMs: number): FloodgateError {
  return new FloodgateError(ErrorCode.CIRCUIT_OPEN, `${storeName} store failed repeatedly; not calling it for ${retryInMs} ms.`);
}

/**
 * The decision for a call whose store call failed with `failure`: what the
 * insurance limiter decides (`insured` asks it the same call), an admission
 * (fail-open), a refusal until the breaker would probe again (fail-closed),
 * or the failure itself (reject).
 * @param policy - the key's policy, asked only for the decisions it shapes (an override function may throw)
 */
export async function fallbackDecision(
  handling: FailureHandling,
  failure: FloodgateError,
  insured: (insurance: LimiterCore) => Promise<Decision>,
  policy: () => Policy,
): Promise<Decision> {
  if (handling.insurance) {
    const decision = await insured(handling.insurance);
    return { ...decision, source: 'insurance' };
  }
  switch (handling.failureMode) {
    case 'fail-open': {
      const p = policy();
      return toDecision({ allowed: true, remaining: capacityOf(p), resetMs: 0, retryAfterMs: 0, emptyMs: 0 }, p, 'fail-open');
    }
    case 'fail-closed':
      // Retry once the breaker would probe again; a second when it is not open.
      return toDecision(refused(handling.breaker?.nextRetryInMs(handling.clock()) || 1000), policy(), 'fail-closed');
    default:
      throw failure;
  }
}

/** A refusal for `ms`. */
export function refused(ms: number): Outcome {
  return { allowed: false, remaining: 0, resetMs: ms, retryAfterMs: ms, emptyMs: ms };
}
