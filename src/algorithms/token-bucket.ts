/** Token bucket as GCRA: one theoretical arrival time per key, kept exact as ms plus a remainder in 1/limit ms. */
import type { Policy } from '../core/policy.js';
import { ceilDiv, fullView, type AlgorithmImpl, type View } from './types.js';

/**
 * GCRA state: the theoretical arrival time is `m + r / limit` ms. Splitting it
 * keeps the emission interval window/limit exact without fractions or
 * numbers beyond 2^52.
 */
export interface TokenBucketState {
  m: number;
  r: number;
}

/** How far ahead of `now` the arrival time is, in units of 1/limit ms (≥ 0). */
function debt(state: TokenBucketState | undefined, policy: Policy, now: number): number {
  return state ? Math.max(0, (state.m - now) * policy.limit + state.r) : 0;
}

/** The state whose arrival time is `now + units / limit`. */
function fromDebt(units: number, policy: Policy, now: number): TokenBucketState | undefined {
  if (units <= 0) return undefined;
  return { m: now + Math.floor(units / policy.limit), r: units % policy.limit };
}

/** Token bucket: bursts up to `limit`, refilled at `limit` per `window`. */
export const tokenBucket: AlgorithmImpl<TokenBucketState> = {
  normalize(state, policy, now) {
    return debt(state, policy, now) > 0 ? state : undefined;
  },
  tryConsume(state, cost, policy, now) {
    const units = debt(state, policy, now) + cost * policy.windowMs;
    return units <= policy.windowMs * policy.limit ? fromDebt(units, policy, now)! : null;
  },
  add(state, amount, policy, now) {
    return fromDebt(debt(state, policy, now) + amount * policy.windowMs, policy, now)!;
  },
  remove(state, amount, policy, now) {
    return fromDebt(debt(state, policy, now) - amount * policy.windowMs, policy, now);
  },
  view(state, cost, policy, now): View {
    if (!state) return fullView(policy);
    const { limit: L, windowMs: W } = policy;
    const units = debt(state, policy, now);
    const remaining = Math.max(0, Math.floor((W * L - units) / W));
    const over = (c: number) => Math.max(0, units + c * W - W * L);
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
