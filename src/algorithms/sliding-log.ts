/** Sliding log: an exact rolling window, one timestamp per admitted unit; state grows with the limit. */
import { fullView, type AlgorithmImpl, type View } from './types.js';

/** Sliding-log state: timestamps of the units in the window, oldest first. */
export interface SlidingLogState {
  t: number[];
}

function pushMany(state: SlidingLogState | undefined, amount: number, now: number): SlidingLogState {
  const t = state ? state.t.slice() : [];
  for (let i = 0; i < amount; i++) t.push(now);
  return { t };
}

/** Sliding log: never more than `limit` units in any interval of length `window`. */
export const slidingLog: AlgorithmImpl<SlidingLogState> = {
  normalize(state, policy, now) {
    if (!state) return undefined;
    const cutoff = now - policy.windowMs;
    let first = 0;
    while (first < state.t.length && state.t[first]! <= cutoff) first++;
    if (first === state.t.length) return undefined;
    return first === 0 ? state : { t: state.t.slice(first) };
  },
  tryConsume(state, cost, policy, now) {
    const n = state ? state.t.length : 0;
    return n + cost <= policy.limit ? pushMany(state, cost, now) : null;
  },
  add(state, amount, policy, now) {
    // `limit` timestamps at `now` already refuse every consume until now + window, as any more would;
    // more would only cost time and memory per point.
    return pushMany(state, Math.min(amount, policy.limit), now);
  },
  remove(state, amount) {
    if (!state) return undefined;
    const t = state.t.slice(0, Math.max(0, state.t.length - amount));
    return t.length > 0 ? { t } : undefined;
  },
  view(state, cost, policy, now): View {
    if (!state) return fullView(policy);
    const { limit: L, windowMs: W } = policy;
    const t = state.t;
    const n = t.length;
    const remaining = Math.max(0, L - n);
    // The unit at index n+cost-L-1 must leave the window before `cost` fits.
    const retryAfterMs = n + cost <= L ? 0 : t[n + cost - L - 1]! + W - now;
    return {
      remaining,
      resetMs: t[n - 1]! + W - now,
      retryAfterMs,
      emptyMs: remaining >= 1 ? 0 : t[n - L]! + W - now,
    };
  },
  expiresAt(state, policy) {
    return state.t[state.t.length - 1]! + policy.windowMs;
  },
};
