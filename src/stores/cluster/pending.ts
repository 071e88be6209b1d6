/** What a cluster client keeps about its calls to the primary. */
/**
 * Each pending call, each batch in flight, and the error codes the primary may send.
 */
import type { Clock } from '../../core/clock.js';
import { ErrorCode, FloodgateError, type ErrorCodeValue } from '../../core/errors.js';
import type { Operation, Outcome } from '../../core/policy.js';
import type { Lease } from './leases.js';
import type { SlotCall } from './slot-call.js';

/** One call waiting for the primary. */
export interface Pending {
  readonly operation: Operation;
  /** The store's clock at call time, or -1 for the primary's clock. */
  readonly time: number;
  /** The store's clock (the basis its known refusals are read on), if it has one. */
  readonly clock: Clock | undefined;
  /** For a lease call: the lease the grant goes to, and the units wanted (the operation's amount is the need). */
  readonly lease: { readonly entry: Lease; readonly want: number } | undefined;
  /** Whether the store learns known refusals from the answer. */
  readonly remembers: boolean;
  /** For a part of a composite: its part count on the first part, 0 on the others (which must travel in the same message). */
  readonly composite: number | undefined;
  /** For a concurrency-slot call: what it asks (`operation` only carries its key). */
  readonly slot?: SlotCall;
  /** True while this invalidating call holds its key in the known refusals. */
  held: boolean;
  /** performance.now() after which the call times out. */
  readonly deadline: number;
  readonly timeoutMs: number;
  readonly resolve: (outcome: Outcome) => void;
  readonly reject: (error: FloodgateError) => void;
  /** True once resolved or rejected: a call is answered once (a late reply after a timeout is dropped). */
  answered: boolean;
}

/** The calls sent in one message. */
export interface Batch {
  readonly calls: Pending[];
  /** performance.now() when sent: no later than the primary's decision, so refusals learned from it never outlast the primary's. */
  readonly sentAt: number;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The answer callbacks of the `n` parts of one composite: `resolve` gets
 * every part's outcome, in order, once all are in; `reject` the first
 * failure of any part (the others are then ignored).
 */
export function gather(
  n: number,
  resolve: (outcomes: Outcome[]) => void,
  reject: (error: FloodgateError) => void,
): { resolve: (outcome: Outcome) => void; reject: (error: FloodgateError) => void }[] {
  const outcomes: Outcome[] = new Array(n);
  let left = n;
  let failed = false;
  return Array.from({ length: n }, (_, k) => ({
    resolve: (outcome: Outcome) => {
      outcomes[k] = outcome;
      if (--left === 0 && !failed) resolve(outcomes);
    },
    reject: (error: FloodgateError) => {
      if (failed) return;
      failed = true;
      reject(error);
    },
  }));
}

/** The failure of a call made while the channel to the primary is closed. */
export function channelClosed(): FloodgateError {
  return new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the IPC channel to the primary is closed.');
}

/** The failure of a call the primary did not answer within `timeoutMs`. */
export function timedOut(timeoutMs: number): FloodgateError {
  return new FloodgateError(
    ErrorCode.STORE_TIMEOUT,
    `cluster store: the primary did not answer within ${timeoutMs} ms. Is a ClusterStorePrimary running in the primary process (or attached to this thread, or to PM2)?`,
  );
}

/** A callback that does nothing (for lease top-ups, whose answers only feed the lease). */
export const ignore = (): void => {};

const CODES = new Set<string>(Object.values(ErrorCode));

/** A code from the primary, kept when floodgate knows it. */
export function toCode(code: unknown): ErrorCodeValue {
  return typeof code === 'string' && CODES.has(code) ? (code as ErrorCodeValue) : ErrorCode.STORE_ERROR;
}
