/** How long a consume of the local-first store may wait for Redis before STORE_TIMEOUT. */
/**
 * The spend deadline of leases is lease-core.ts's.
 */
import { ErrorCode, FloodgateError } from '../../../core/errors.js';
import type { Outcome } from '../../../core/policy.js';
import type { Entry, Waiter } from './lease.js';

/**
 * A consume waiting on `entry`'s lease call, answered at the latest
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
