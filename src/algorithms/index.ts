/** Applies one operation to a key's state with any algorithm: the block logic every algorithm shares. */
import { BLOCK_FOREVER, type Algorithm, type OperationKind, type Outcome, type Policy } from '../core/policy.js';
import { fixedWindow } from './fixed-window.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';
import type { AlgorithmImpl } from './types.js';

export type { AlgorithmImpl } from './types.js';

/** The implementation of each algorithm by name. */
export const ALGORITHM_IMPLS: Readonly<Record<Algorithm, AlgorithmImpl<unknown>>> = {
  'fixed-window': fixedWindow as AlgorithmImpl<unknown>,
  'sliding-window': slidingWindow as AlgorithmImpl<unknown>,
  'sliding-log': slidingLog as AlgorithmImpl<unknown>,
  'token-bucket': tokenBucket as AlgorithmImpl<unknown>,
};

/** A key's whole state: its algorithm's usage and its block. */
export interface KeyState {
  /** The algorithm's own state (its shape depends on the algorithm); undefined for no usage. */
  usage: unknown;
  /** 0 = not blocked, {@link BLOCK_FOREVER} = until unblocked, else the absolute end of the block in ms. */
  blockedUntil: number;
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
  let usage = impl.normalize(state?.usage, policy, now);
  let blocked = state ? state.blockedUntil : 0;
  if (blocked > 0 && blocked <= now) blocked = 0;
  let allowed = true;
  const cost = kind === 'consume' ? amount : 1;

  switch (kind) {
    case 'reset':
      usage = undefined;
      blocked = 0;
      break;
    case 'block':
      blocked = amount === BLOCK_FOREVER ? BLOCK_FOREVER : now + amount;
      break;
    case 'reward':
      usage = impl.remove(usage, amount, policy, now);
      break;
    case 'penalty':
      usage = impl.add(usage, amount, policy, now);
      break;
    case 'consume':
      if (blocked === 0) {
        const next = impl.tryConsume(usage, amount, policy, now);
        if (next === null) {
          allowed = false;
          if (policy.blockMs > 0) blocked = now + policy.blockMs;
        } else {
          usage = next;
        }
      }
      break;
    case 'peek':
      break;
  }

  const view = impl.view(usage, cost, policy, now);
  let outcome: Outcome;
  if (blocked !== 0) {
    const blockLeft = blocked === BLOCK_FOREVER ? Infinity : blocked - now;
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

  if (usage === undefined && blocked === 0) return { state: undefined, expiresAt: 0, outcome };
  const usageExpires = usage === undefined ? 0 : impl.expiresAt(usage, policy);
  const expiresAt = blocked === BLOCK_FOREVER ? Infinity : Math.max(usageExpires, blocked);
  return { state: { usage, blockedUntil: blocked }, expiresAt, outcome };
}
