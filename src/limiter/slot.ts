/** Slot: what ConcurrencyLimiter.acquire resolves to, the decision and the held slot's handle. */

/** What {@link ConcurrencyLimiter.acquire} resolves to: the decision, and the slot's handle when admitted. */
export interface Slot {
  /** Whether the caller may go ahead: a slot was taken (or the store failed with `onStoreFailure: "fail-open"`). */
  readonly allowed: boolean;
  /** Slots of the key in use after the call, this one included when taken (0 when the store was not asked). */
  readonly inFlight: number;
  /** The limiter's limit. */
  readonly limit: number;
  /** When refused: ms until the earliest held slot expires (one may be released sooner). 0 when allowed. */
  readonly retryAfterMs: number;
  /** Who decided: the store, or the failure mode while the store failed. */
  readonly source: 'store' | 'fail-open' | 'fail-closed';
  /**
   * Frees the slot and stops its heartbeat. Resolves true when this call
   * freed it; false when there was nothing to free (refused, released
   * before, or expired — then perhaps taken by another caller, whose slot
   * stays). Safe to call more than once; only the first call asks the store.
   * When the store fails it rejects (`onStoreFailure: "reject"`) or resolves
   * false; either way the heartbeat has stopped, so the slot comes back at
   * its expiry. A slot never released is renewed as long as the process lives.
   */
  release(): Promise<boolean>;
  /** Extends the slot by a ttl now (the heartbeat does this by itself). Resolves false once the slot is released or expired. */
  renew(): Promise<boolean>;
  /** Milliseconds this call waited for a slot (the `wait` option); present only on limiters with `wait`. */
  readonly waitedMs?: number;
  /** True on a shadow limiter's acquire that found no slot free: admitted, holding nothing (see the `shadow` option). Absent otherwise. */
  readonly shadowLimited?: true;
}
