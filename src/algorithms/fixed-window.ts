/** Fixed window: a counter per key. */
/**
 * The window starts at the key's first consume and ends a window length later, or where its calendar period ends.
 */
import { periodEnd } from '../core/calendar-window.js';
import type { Policy } from '../core/policy.js';
import { fullView, MAX_USAGE, type AlgorithmImpl, type View } from './types.js';

/** Fixed-window state: units used `c`, absolute window end `r`. */
export interface FixedWindowState {
  c: number;
  r: number;
}

/**
 * Where a window opened at `now` ends. The stores that run this code decide on
 * their own clock, so the period holding `now` is the one the Lua scripts
 * pick from the ends their caller sends (the first end after Redis's now).
 */
function windowEnd(policy: Policy, now: number): number {
  return policy.calendar ? periodEnd(policy.calendar, now) : now + policy.windowMs;
}

function open(state: FixedWindowState | undefined, policy: Policy, now: number): FixedWindowState {
  return state ? { c: state.c, r: state.r } : { c: 0, r: windowEnd(policy, now) };
}

/** Fixed window, the default algorithm: at most `limit` per window that starts at first use. */
export const fixedWindow: AlgorithmImpl<FixedWindowState> = {
  normalize(state, _policy, now) {
    return state && now < state.r ? state : undefined;
  },
  tryConsume(state, cost, policy, now) {
    const next = open(state, policy, now);
    if (next.c + cost > policy.limit) return null;
    next.c += cost;
    return next;
  },
  add(state, amount, policy, now) {
    const next = open(state, policy, now);
    next.c = Math.min(next.c + amount, MAX_USAGE);
    return next;
  },
  remove(state, amount) {
    return state ? { c: Math.max(0, state.c - amount), r: state.r } : undefined;
  },
  view(state, cost, policy, now): View {
    if (!state) return fullView(policy);
    const remaining = Math.max(0, policy.limit - state.c);
    const untilEnd = state.r - now;
    return {
      remaining,
      resetMs: state.c > 0 ? untilEnd : 0,
      retryAfterMs: state.c + cost <= policy.limit ? 0 : untilEnd,
      emptyMs: remaining >= 1 ? 0 : untilEnd,
    };
  },
  expiresAt(state) {
    return state.r;
  },
};
