/** What an operator does to one key of a RateLimiter besides counting. */
/**
 * End its block keeping its count, and look at its whole state without spending.
 */
import type { Decision } from '../core/decision.js';
import { toStoreError } from '../core/errors.js';
import { LIMITER_INTERNALS, type LimiterCore } from './internals.js';
import type { OperationKind, Outcome } from '../core/policy.js';
import { assertKey } from '../core/validate.js';

/** A key's state as {@link RateLimiter.inspect} reports it. */
export interface KeyInspection {
  /**
   * The store's answer, as a cost-1 consume would see it now (spending
   * nothing): `allowed`, `remaining`, `resetMs`, `retryAfterMs`. A blocked
   * key reads `allowed: false`, `remaining: 0` and `retryAfterMs` until the
   * block ends (`Infinity` for a block until unblocked).
   */
  readonly store: Decision;
  /**
   * ms for which this process's in-memory block still refuses the key
   * without asking the store; 0 when it does not (or the limiter has none).
   */
  readonly memoryBlockMs: number;
}

/**
 * `amount` of the block operation that ends a block now: a block until this
 * instant, which every store (and the Redis scripts) already reads as no
 * block, so ending one needs no new operation on the wire.
 */
const BLOCK_UNTIL_NOW = 0;

/** Applies one operation on the limiter's store alone: an operator's call must reach the shared state, never a fallback. */
async function onStore(limiter: LimiterCore, kind: OperationKind, key: string, amount: number): Promise<Outcome> {
  try {
    return await limiter.store.apply({ kind, key: limiter.storeKey(key), amount, policy: limiter.policyFor(key) });
  } catch (error) {
    throw toStoreError(error, limiter.store.name);
  }
}

/** See {@link RateLimiter.unblock}. */
export async function unblockKey(limiter: LimiterCore, key: string): Promise<Decision> {
  assertKey(key);
  const internals = limiter[LIMITER_INTERNALS]();
  internals.forget(key);
  await onStore(limiter, 'block', key, BLOCK_UNTIL_NOW);
  // A consume answered meanwhile may have put the key back on the in-memory list from the old block.
  internals.forget(key);
  const outcome = await onStore(limiter, 'peek', key, 0);
  return internals.decision(outcome, 'store', limiter.policyFor(key));
}

/** See {@link RateLimiter.inspect}. */
export async function inspectKey(limiter: LimiterCore, key: string): Promise<KeyInspection> {
  assertKey(key);
  const internals = limiter[LIMITER_INTERNALS]();
  const memoryBlockMs = internals.memoryBlock?.check(key) ?? 0;
  const outcome = await onStore(limiter, 'peek', key, 0);
  return { store: internals.decision(outcome, 'store', limiter.policyFor(key)), memoryBlockMs };
}
