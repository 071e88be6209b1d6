/** Sliding window: the weighted two-window estimate, O(1) state per key. */
/**
 * Windows are aligned to multiples of the window length.
 */
import type { Policy } from '../core/policy.js';
import { ceilDiv, fullView, MAX_USAGE, type AlgorithmImpl, type View } from './types.js';

/** Sliding-window state: previous window's count `p`, current count `c`, current window start `s`. */
export interface SlidingWindowState {
  p: number;
  c: number;
  s: number;
}

function open(state: SlidingWindowState | undefined, policy: Policy, now: number): SlidingWindowState {
  return state ? { p: state.p, c: state.c, s: state.s } : { p: 0, c: 0, s: now - (now % policy.windowMs) };
}

/**
 * Time (ms from now) until `cost` fits, given the usage is `p` (previous
 * window) and `c` (current), `e` ms into the window starting at `s`.
 * Usage is admitted while p·(W−e) + (c+cost)·W ≤ L·W, all integers.
 */
function waitFor(state: SlidingWindowState, cost: number, policy: Policy, now: number): number {
  const { limit: L, windowMs: W } = policy;
  const e = now - state.s;
  if (state.p * (W - e) + (state.c + cost) * W <= L * W) return 0;
  if (state.c + cost <= L) {
    // Fits in this window once enough of the previous window has slid out.
    const at = W - Math.floor(((L - state.c - cost) * W) / state.p);
    return at - e;
  }
  // Only fits in the next window, once enough of this window has slid out.
  const at = W - Math.floor(((L - cost) * W) / state.c);
  return state.s + W + at - now;
}

/** Sliding window (weighted estimate of the last `window`), as popularised by Cloudflare. */
export const slidingWindow: AlgorithmImpl<SlidingWindowState> = {
  normalize(state, policy, now) {
    if (!state) return undefined;
    const W = policy.windowMs;
    const start = now - (now % W);
    if (state.s === start) return state;
    if (state.s === start - W && state.c > 0) return { p: state.c, c: 0, s: start };
    return undefined;
  },
  tryConsume(state, cost, policy, now) {
    const next = open(state, policy, now);
    if (waitFor(next, cost, policy, now) > 0) return null;
    next.c += cost;
    return next;
  },
  add(state, amount, policy, now) {
    const next = open(state, policy, now);
    next.c = Math.min(next.c + amount, MAX_USAGE);
    return next;
  },
  remove(state, amount) {
    return state ? { p: state.p, c: Math.max(0, state.c - amount), s: state.s } : undefined;
  },
  view(state, cost, policy, now): View {
    if (!state) return fullView(policy);
    const { limit: L, windowMs: W } = policy;
    const e = now - state.s;
    const remaining = Math.max(0, L - state.c - ceilDiv(state.p * (W - e), W));
    let resetMs = 0;
    if (state.c > 0) resetMs = state.s + 2 * W - now;
    else if (state.p > 0) resetMs = state.s + W - now;
    return {
      remaining,
      resetMs,
      retryAfterMs: waitFor(state, cost, policy, now),
      emptyMs: remaining >= 1 ? 0 : waitFor(state, 1, policy, now),
    };
  },
  expiresAt(state, policy) {
    return state.s + (state.c > 0 ? 2 : 1) * policy.windowMs;
  },
};
