/** Applies one operation to a key's state with any algorithm: the block logic every algorithm shares. */
import { BLOCK_FOREVER, type Algorithm, type OperationKind, type Outcome, type Policy } from '../policy.js';
import { fixedWindow } from './fixed-window.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';
import type { AlgorithmImpl } from './types.js';

export type { AlgorithmImpl, View } from './types.js';

/** The implementation of each algorithm by name. */
export const ALGORITHM_IMPLS: Readonly<Record<Algorithm, AlgorithmImpl<unknown>>> = {
  'fixed-window': fixedWindow as AlgorithmImpl<unknown>,
  'sliding-window': slidingWindow as AlgorithmImpl<unknown>,
  'sliding-log': slidingLog as AlgorithmImpl<unknown>,
  'token-bucket': tokenBucket as AlgorithmImpl<unknown>,
};

/**
 * A key's whole state: the algorithm's state `a` and the block `b`
 * (0 = none, {@link BLOCK_FOREVER} = until unblocked, else absolute end in ms).
 */
export interface KeyState {
  a: unknown;
  b: number;
}

/** The result of applying an operation: the new state (undefined = delete), its expiry and the outcome. */
export interface Applied {
  state: KeyState | undefined;
  /** Absolute ms after which the state may be dropped; Infinity for never. */
  expiresAt: number;
  outcome: Outcome;
}

/**
 * Applies `kind` with `amount` to `state` at time `now`. Pure: the memory and
 * cluster stores call it, and the Redis Lua scripts implement the same steps.
 *
 * While a key is blocked, consume and peek are refused without touching the
 * algorithm's state; reward and penalty still change it. A consume that does
 * not fit spends nothing and, with `policy.blockMs`, blocks the key.
 *
 * `impl` replaces the policy's algorithm; the memory store's overflow sketch
 * passes a stricter variant of one.
 */
export function applyOperation(
  state: KeyState | undefined,
  kind: OperationKind,
  amount: number,
  policy: Policy,
  now: number,
  impl: AlgorithmImpl<unknown> = ALGORITHM_IMPLS[policy.algorithm],
): Applied {
  let a = impl.normalize(state?.a, policy, now);
  let b = state ? state.b : 0;
  if (b > 0 && b <= now) b = 0;
  let allowed = true;
  const cost = kind === 'consume' ? amount : 1;

  switch (kind) {
    case 'reset':
      a = undefined;
      b = 0;
      break;
    case 'block':
      b = amount === BLOCK_FOREVER ? BLOCK_FOREVER : now + amount;
      break;
    case 'reward':
      a = impl.remove(a, amount, policy, now);
      break;
    case 'penalty':
      a = impl.add(a, amount, policy, now);
      break;
    case 'consume':
      if (b === 0) {
        const next = impl.tryConsume(a, amount, policy, now);
        if (next === null) {
          allowed = false;
          if (policy.blockMs > 0) b = now + policy.blockMs;
        } else {
          a = next;
        }
      }
      break;
    case 'peek':
      break;
  }

  const view = impl.view(a, cost, policy, now);
  let outcome: Outcome;
  if (b !== 0) {
    const blockLeft = b === BLOCK_FOREVER ? Infinity : b - now;
    outcome = {
      allowed: false,
      remaining: 0,
      resetMs: Math.max(view.resetMs, blockLeft),
      retryAfterMs: blockLeft,
      emptyMs: blockLeft,
    };
  } else {
    if (kind !== 'consume') allowed = view.retryAfterMs === 0;
    outcome = {
      allowed,
      remaining: view.remaining,
      resetMs: view.resetMs,
      retryAfterMs: allowed ? 0 : view.retryAfterMs,
      emptyMs: view.emptyMs,
    };
  }

  if (a === undefined && b === 0) return { state: undefined, expiresAt: 0, outcome };
  const aExpires = a === undefined ? 0 : impl.expiresAt(a, policy);
  const expiresAt = b === BLOCK_FOREVER ? Infinity : Math.max(aExpires, b);
  return { state: { a, b }, expiresAt, outcome };
}
