/** Deadlines of the local-first store: until when a lease may be spent, and how long a consume may wait for Redis before STORE_TIMEOUT. */
import { ErrorCode, FloodgateError } from '../../../errors.js';
import type { Outcome } from '../../../policy.js';
import type { Entry, Waiter } from './lease.js';

/**
 * How far before the earliest possible window end a lease stops being spent
 * on Redis's clock: an admission must be decided, and reach its caller, while
 * the window that counted it is still open, even with the two clocks read a
 * fraction of a millisecond apart.
 */
export const SPEND_MARGIN_MS = 1;

/**
 * The local time after which a lease must not be spent, for a call sent at
 * local time `sentAt` that Redis answered with `windowLeft` ms to the window
 * end.
 *
 * On Redis's clock the script reads TIME floored to whole ms, so the real
 * time left when it ran lies in (windowLeft − 1, windowLeft]; it ran after
 * `sentAt`, so the window surely ends after `sentAt + windowLeft − 1`, and
 * the lease stops {@link SPEND_MARGIN_MS} before that. With an injected clock
 * both sides read that one clock, so the window ends at exactly
 * `sentAt + windowLeft` (Redis's whole ms, truncated, can only shorten it).
 */
export function spendDeadline(sentAt: number, windowLeft: number, injectedClock: boolean): number {
  return injectedClock ? sentAt + windowLeft : sentAt + windowLeft - 1 - SPEND_MARGIN_MS;
}

/**
 * A consume waiting on `entry`'s lease call, settled at the latest
 * `timeoutMs` after it started waiting: whatever Redis does (answers late,
 * answers with grants that keep lapsing, never answers), it then leaves the
 * queue and rejects with STORE_TIMEOUT, so a caller that turned its own
 * timeouts off never hangs.
 */
export function deadlineWaiter(
  entry: Entry,
  cost: number,
  timeoutMs: number,
  storeName: string,
  resolve: (outcome: Outcome) => void,
  reject: (error: unknown) => void,
): Waiter {
  const timer = setTimeout(() => {
    const i = entry.waiters.indexOf(waiter);
    if (i >= 0) entry.waiters.splice(i, 1);
    reject(
      new FloodgateError(
        ErrorCode.STORE_TIMEOUT,
        `${storeName} store: no lease decided this consume within ${timeoutMs} ms; raise timeoutMs if Redis is slow but healthy.`,
      ),
    );
  }, timeoutMs);
  const waiter: Waiter = {
    cost,
    asked: false,
    resolve(outcome) {
      clearTimeout(timer);
      resolve(outcome);
    },
    reject(error) {
      clearTimeout(timer);
      reject(error);
    },
  };
  return waiter;
}
