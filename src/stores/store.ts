/** The Store contract: the one method every store implements. */
import type { Operation, Outcome } from '../policy.js';

/**
 * Where counters live. A store applies each operation atomically, with the
 * algorithm named in `operation.policy`, and holds no limiter configuration.
 *
 * A store rejects only with a {@link FloodgateError} (STORE_ERROR,
 * STORE_TIMEOUT or CLOSED); being limited is an Outcome, not an error.
 */
export interface Store {
  /** Short name for messages and metrics ("memory", "redis", "cluster"). */
  readonly name: string;
  /** Applies one operation to one key atomically. */
  apply(operation: Operation): Promise<Outcome>;
  /**
   * The same as {@link apply}, answered synchronously when the store can
   * decide without waiting (state in this process: the memory store always,
   * local-first while a lease covers the call), so that a limiter on it
   * decides without a promise. Undefined when only `apply` can answer, and
   * then nothing was applied. Throws only for a misconfiguration, never for
   * an outage.
   */
  applyNow?(operation: Operation): Outcome | undefined;
  /** Releases timers and connections the store itself opened. Idempotent. */
  close?(): Promise<void>;
}

/** True when `value` looks like a {@link Store}. */
export function isStore(value: unknown): value is Store {
  return (
    typeof value === 'object' && value !== null && typeof (value as Store).apply === 'function' && typeof (value as Store).name === 'string'
  );
}
