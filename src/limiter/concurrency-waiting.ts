/** SlotWaiting: a ConcurrencyLimiter's `wait` option. */
/**
 * Callers of a key wait in FIFO order for a slot, woken by a release in this process and re-checked against the store
 * for releases elsewhere.
 */
import type { Slot } from './slot.js';
import type { WaitConfig } from './options.js';
import { timerScheduler, WaitQueue, type AttemptResult, type Scheduler } from '../waiting/wait-queue.js';
import { systemClock, type Clock } from '../core/clock.js';
import { abortedError } from './waiting.js';

/**
 * How soon the first waiting caller of a key asks the store again while its
 * slots are held (ms). A release in this process wakes it at once; one in
 * another process is seen at the next ask. Each ask that finds the slots
 * still taken doubles the interval, up to {@link SLOT_POLL_MAX_MS}: a short
 * wait notices a release elsewhere quickly, and waiters of many keys cost
 * each key at most a few asks a second.
 */
export const SLOT_POLL_MS = 25;

/** The longest interval between two asks of one waiting caller (ms). */
const SLOT_POLL_MAX_MS = 400;

/**
 * The waiting of a ConcurrencyLimiter: a refused `acquire` joins its key's
 * line (see {@link WaitQueue}); the first caller asks the store again after
 * {@link SLOT_POLL_MS}, then twice as long each time up to
 * {@link SLOT_POLL_MAX_MS} (sooner when a slot's expiry comes first, and
 * once more just before its timeout), or at once when a slot of its key is
 * released in this process.
 */
export class SlotWaiting {
  private readonly queue: WaitQueue<Slot>;

  /**
   * @param limit - the limiter's limit, for the refusals of a full line
   * @param wait - the checked `wait` option
   * @param clock - time source of deadlines; default `Date.now`
   * @param schedule - timer source; default {@link timerScheduler}
   */
  constructor(
    private readonly limit: number,
    private readonly wait: WaitConfig,
    private readonly clock: Clock = systemClock,
    schedule: Scheduler = timerScheduler,
  ) {
    this.queue = new WaitQueue({ maxQueue: wait.maxQueue, clock, schedule });
  }

  /** Calls of `key` waiting in this process. */
  waiting(key: string): number {
    return this.queue.waiting(key);
  }

  /**
   * ConcurrencyLimiter.acquire with waiting: `once` is one acquire as without
   * it. A call whose `signal` aborts while it waits rejects with ABORTED,
   * holding no slot.
   */
  async acquire(key: string, once: () => Promise<Slot>, signal?: AbortSignal): Promise<Slot> {
    if (signal?.aborted === true) throw abortedError(signal);
    const deadline = this.clock() + this.wait.timeoutMs;
    let first: AttemptResult<Slot> | undefined;
    if (this.queue.waiting(key) === 0) {
      first = attemptOf(await once(), 0);
      if (first.admitted) return this.held(first.value, key, 0);
    }
    // A slot taken after the caller's deadline (it was told no) is freed at once.
    const late = (slot: Slot): void => void slot.release().catch(() => undefined);
    // The asks back off while the key stays full (see SLOT_POLL_MS); a local release wakes the line at once anyway.
    let asks = first === undefined ? 0 : 1;
    const attempt = async (): Promise<AttemptResult<Slot>> => attemptOf(await once(), asks++);
    const result = await this.queue.run(key, attempt, deadline, first, late, signal);
    switch (result.status) {
      case 'aborted':
        throw abortedError(signal!);
      case 'admitted':
        return this.held(result.value, key, result.waitedMs);
      case 'timeout':
        return { ...result.value, allowed: false, retryAfterMs: Math.max(1, result.retryInMs), waitedMs: result.waitedMs };
      case 'full': {
        const retryAfterMs = Math.max(1, result.retryInMs);
        const no = (): Promise<boolean> => Promise.resolve(false);
        const base = result.value ?? { inFlight: this.limit, limit: this.limit, source: 'store' as const, release: no, renew: no };
        return { ...base, allowed: false, retryAfterMs, waitedMs: 0 };
      }
    }
  }

  /** Rejects every waiting call with CLOSED and cancels their timers. */
  close(): void {
    this.queue.close();
  }

  /** The admitted slot with its wait, whose release lets the key's first waiting caller in at once. */
  private held(slot: Slot, key: string, waitedMs: number): Slot {
    const { allowed, inFlight, limit, retryAfterMs, source } = slot;
    return {
      allowed,
      inFlight,
      limit,
      retryAfterMs,
      source,
      waitedMs,
      release: () => slot.release().finally(() => this.queue.wake(key)),
      renew: () => slot.renew(),
    };
  }
}

/** An acquire's answer as a wait attempt: refused, it is asked again after the slot's expiry or the poll interval of its `asks`-th ask, whichever comes first. */
function attemptOf(slot: Slot, asks: number): AttemptResult<Slot> {
  if (slot.allowed) return { admitted: true, value: slot };
  const poll = Math.min(SLOT_POLL_MS * 2 ** Math.min(asks, 10), SLOT_POLL_MAX_MS);
  return { admitted: false, value: slot, retryInMs: Math.min(slot.retryAfterMs, poll), poll: true };
}
