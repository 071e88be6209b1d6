/** The contract each algorithm implements, in whole-millisecond integer arithmetic shared with the Lua scripts. */
import type { Policy } from '../core/policy.js';

/** What an algorithm reports about a key's state at a moment. */
export interface View {
  /** Units that can be consumed now. */
  remaining: number;
  /** ms until the quota is whole again. */
  resetMs: number;
  /** ms until a consume of the asked cost could succeed; 0 when it can now. */
  retryAfterMs: number;
  /** ms until one unit is available; 0 when one is available now. */
  emptyMs: number;
}

/**
 * One algorithm as pure functions over its state. `undefined` is the state of
 * a key that has consumed nothing (or whose usage has fully expired).
 *
 * Every function is deterministic in its arguments, and uses only integer
 * arithmetic whose intermediate values stay below 2^52, so the Lua version in
 * `src/stores/redis/lua/` computes the same numbers.
 */
/**
 * The most usage a key's state holds (2^52 units; a token bucket's debt in units × ms): a penalty past it saturates.
 * Every count stays an exact integer, in the TypeScript algorithms and in Lua (whose numbers are doubles): a caller
 * that penalises without bound (counting a client's claimed cost) cannot push a counter past 2^53, where Lua would
 * answer a number that is not an integer and the store would seem to fail. No real limit comes near it: a limit times
 * its window stays under 2^50.
 */
export const MAX_USAGE = 2 ** 52;

export interface AlgorithmImpl<S> {
  /** Drops what has expired by `now`; returns undefined when nothing is left. */
  normalize(state: S | undefined, policy: Policy, now: number): S | undefined;
  /** Spends `cost` if it fits; returns the new state, or null when it does not fit. */
  tryConsume(state: S | undefined, cost: number, policy: Policy, now: number): S | null;
  /** Adds `amount` units of usage unconditionally (penalty). */
  add(state: S | undefined, amount: number, policy: Policy, now: number): S;
  /** Removes `amount` units of usage (reward). */
  remove(state: S | undefined, amount: number, policy: Policy, now: number): S | undefined;
  /** Reports the state as seen at `now` for a consume of `cost`. */
  view(state: S | undefined, cost: number, policy: Policy, now: number): View;
  /** Absolute ms after which the state is equivalent to undefined. */
  expiresAt(state: S, policy: Policy): number;
}

/** ceil(a / b) for non-negative integers, exact while a + b < 2^52. */
export function ceilDiv(a: number, b: number): number {
  return Math.floor((a + b - 1) / b);
}

/** The view of a key with no usage: everything available. */
export function fullView(policy: Policy): View {
  return { remaining: policy.limit, resetMs: 0, retryAfterMs: 0, emptyMs: 0 };
}
