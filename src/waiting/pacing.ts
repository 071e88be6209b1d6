/** Pacer: the execEvenly slots, kept as a token bucket in the limiter's own store. */
/**
 * So processes sharing the store share one schedule per key.
 */
import { isStoreFailure, toStoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type { Store } from '../stores/store.js';
import type { Scheduler } from './wait-queue.js';

/** The suffix of the prefix under which a limiter keeps its pacing keys. */
const PACE_SUFFIX = '~pace';

/**
 * Hands out one slot per admitted unit of a key, window/limit apart.
 *
 * The slots are a second key in the limiter's store (prefix + `~pace`) under
 * a token bucket of the same limit and window whose debt is the schedule: a
 * `penalty(cost)` adds cost × window/limit to it atomically, and the bucket's
 * `resetMs` then says when the schedule ends, so this caller's slot starts
 * `resetMs − cost × window/limit` from now. Every store has penalty, so no
 * store needs anything new, and the slots hold across processes. The
 * limit-and-window bucket is used rather than one of limit 1 and window
 * window/limit because window/limit need not be a whole number of ms.
 */
export class Pacer {
  private readonly policy: Policy;
  private readonly unitMs: number;

  /**
   * @param store - the limiter's store
   * @param prefix - the limiter's prefix
   * @param main - the limiter's policy, whose limit and window set the spacing
   * @param schedule - timer source of the delays
   */
  constructor(
    private readonly store: Store,
    private readonly prefix: string,
    main: Policy,
    private readonly schedule: Scheduler,
  ) {
    this.policy = Object.freeze({ algorithm: 'token-bucket', limit: main.limit, windowMs: main.windowMs, blockMs: 0 });
    this.unitMs = main.windowMs / main.limit;
  }

  /**
   * Takes the next slots for `cost` units of `key` and returns the ms until
   * the first of them. A store failure (the units were already admitted)
   * leaves the action unpaced: 0.
   */
  async slot(key: string, cost: number): Promise<number> {
    let resetMs: number;
    try {
      const outcome = await this.store.apply({
        kind: 'penalty',
        key: `${this.prefix}${PACE_SUFFIX}:${key}`,
        amount: cost,
        policy: this.policy,
      });
      resetMs = outcome.resetMs;
    } catch (error) {
      const failure = toStoreError(error, this.store.name);
      if (!isStoreFailure(failure)) throw failure;
      return 0;
    }
    // resetMs is rounded up to a whole ms; the slot is within a ms of this.
    return Math.max(0, Math.round(resetMs - cost * this.unitMs));
  }

  /** Waits until `key`'s next slot for `cost` units; resolves to the ms waited. */
  async pace(key: string, cost: number): Promise<number> {
    const ms = await this.slot(key, cost);
    if (ms > 0) await new Promise<void>((resolve) => this.schedule(resolve, ms));
    return ms;
  }
}
