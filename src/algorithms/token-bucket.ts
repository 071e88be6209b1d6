/** Token bucket as GCRA: one theoretical arrival time per key, kept exact as ms plus a remainder in 1/limit ms. */
import { capacityOf, type Policy } from '../core/policy.js';
import { ceilDiv, MAX_USAGE, type AlgorithmImpl, type View } from './types.js';

/**
 * GCRA state: the theoretical arrival time is `m + r / limit` ms. Splitting it
 * keeps the emission interval window/limit exact without fractions or
 * numbers beyond 2^52.
 *
 * Amounts are in 1/limit ms: a token costs `windowMs` of them (window/limit
 * ms), and a full bucket of `burst` tokens is `windowMs × burst`.
 */
export interface TokenBucketState {
  m: number;
  r: number;
}

/**
 * How far a key with no state is below a full bucket, in 1/limit ms: the
 * tokens `initialTokens` leaves out of the burst (0 unless it is set).
 */
function startDebt(policy: Policy): number {
  return policy.initialTokens === undefined ? 0 : (capacityOf(policy) - policy.initialTokens) * policy.windowMs;
}

/**
 * How far ahead of `now` the arrival time is, in units of 1/limit ms (≥ 0).
 * A full bucket is forgotten, so a key without state is a new key: it starts
 * at {@link startDebt}.
 */
function debt(state: TokenBucketState | undefined, policy: Policy, now: number): number {
  const units = state ? (state.m - now) * policy.limit + state.r : 0;
  return units > 0 ? units : startDebt(policy);
}

/** The state whose arrival time is `now + units / limit`. */
function fromDebt(units: number, policy: Policy, now: number): TokenBucketState | undefined {
  if (units <= 0) return undefined;
  return { m: now + Math.floor(units / policy.limit), r: units % policy.limit };
}

/**
 * Token bucket: holds up to `burst` tokens (default `limit`), refilled at
 * `limit` per `window`; a new key starts with `initialTokens` (default a full
 * bucket). A key is forgotten when its bucket is full again, and starts anew.
 */
export const tokenBucket: AlgorithmImpl<TokenBucketState> = {
  normalize(state, policy, now) {
    if (state && (state.m - now) * policy.limit + state.r > 0) return state;
    // A new key's bucket starts now (with initialTokens short of full it is a state of its own),
    // so a consume it refuses still starts the refill that later admits it.
    return fromDebt(startDebt(policy), policy, now);
  },
  tryConsume(state, cost, policy, now) {
    const units = debt(state, policy, now) + cost * policy.windowMs;
    return units <= policy.windowMs * capacityOf(policy) ? fromDebt(units, policy, now)! : null;
  },
  add(state, amount, policy, now) {
    return fromDebt(Math.min(debt(state, policy, now) + amount * policy.windowMs, MAX_USAGE), policy, now)!;
  },
  remove(state, amount, policy, now) {
    return fromDebt(debt(state, policy, now) - amount * policy.windowMs, policy, now);
  },
  view(state, cost, policy, now): View {
    const { limit: L, windowMs: W } = policy;
    const full = W * capacityOf(policy);
    const units = debt(state, policy, now);
    const remaining = Math.max(0, Math.floor((full - units) / W));
    const over = (c: number) => Math.max(0, units + c * W - full);
    return {
      remaining,
      resetMs: ceilDiv(units, L),
      retryAfterMs: ceilDiv(over(cost), L),
      emptyMs: remaining >= 1 ? 0 : ceilDiv(over(1), L),
    };
  },
  expiresAt(state) {
    return state.m + (state.r > 0 ? 1 : 0);
  },
};
