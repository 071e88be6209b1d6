/** The Store contract. */
/**
 * The one method every store implements, and the optional capabilities (composites, concurrency slots).
 */
import type { Operation, Outcome } from '../core/policy.js';
import type { SlotStore } from '../core/slots.js';

/**
 * Where counters live. A store applies each operation atomically, with the
 * algorithm named in `operation.policy`, and holds no limiter configuration.
 *
 * A store rejects only with a {@link FloodgateError} (STORE_ERROR,
 * STORE_TIMEOUT or CLOSED); being limited is an Outcome, not an error.
 *
 * Concurrency slots ({@link SlotStore}: `acquireSlot`, `releaseSlot`,
 * `renewSlot`) are optional too: a store without them cannot back a
 * ConcurrencyLimiter.
 */
export interface Store extends SlotStore {
  /** Short name for messages and metrics ("memory", "redis", "cluster"). */
  readonly name: string;
  /** Applies one operation to one key atomically. */
  apply(operation: Operation): Promise<Outcome>;
  /**
   * The part of the store a call on store key `key` fails with, when the store's parts fail apart (the node of a Redis
   * Cluster that serves the key's slot): limiters keep one circuit breaker per scope, so one lost node sends only its
   * keys to the fallback. Undefined, or absent, when the store fails as one.
   */
  failureScope?(key: string): string | undefined;
  /**
   * The same as {@link apply}, answered synchronously when the store can
   * decide without waiting (state in this process: the memory store always,
   * local-first while a lease covers the call), so that a limiter on it
   * decides without a promise. Undefined when only `apply` can answer, and
   * then nothing was applied. Throws only for a misconfiguration, never for
   * an outage.
   */
  applyNow?(operation: Operation): Outcome | undefined;
  /**
   * A reservation's give-back (`reward`) or excess charge (`penalty`)
   * settled synchronously in state this process holds for the key's current
   * window (a lease: local-first, the cluster store with `leaseMs`), without
   * a store call. Not the same as {@link apply}: a give-back becomes
   * spendable in this process first, so only reservations use it, never
   * `limiter.reward()`/`penalty()`. Undefined when it cannot settle here, and
   * then nothing was applied: call `apply`. Never throws.
   */
  settleNow?(operation: Operation): Outcome | undefined;
  /**
   * Consumes several keys all or nothing, in one atomic step: every
   * operation (each of kind `consume`, on distinct keys, each with its own
   * policy) spends its amount only if every one of them fits; otherwise
   * nothing is spent, except that a refusing key with a `blockMs` is blocked
   * as a single over-limit consume would block it. Resolves to one outcome
   * per operation, in order; see `applyComposite` in
   * `src/algorithms/composite.ts` for the exact numbers. Optional: a store
   * without it cannot decide composites (`FLOODGATE_COMPOSITE_UNSUPPORTED`).
   */
  consumeAll?(operations: readonly Operation[]): Promise<Outcome[]>;
  /**
   * {@link consumeAll} answered synchronously when the store can decide
   * without waiting (as {@link applyNow}); undefined when it cannot, and then
   * nothing was applied.
   */
  consumeAllNow?(operations: readonly Operation[]): Outcome[] | undefined;
  /** Releases timers and connections the store itself opened. Idempotent. */
  close?(): Promise<void>;
}

/** True when `value` looks like a {@link Store}. */
export function isStore(value: unknown): value is Store {
  return (
    typeof value === 'object' && value !== null && typeof (value as Store).apply === 'function' && typeof (value as Store).name === 'string'
  );
}
