/** Under `--workers`: the admin calls between the primary and its workers, as they cross the IPC channel. */
/**
 * The primary serves the admin API and asks the workers, which hold the rules and their limiters; a worker that
 * starts asks the primary for its siblings' admin state.
 */

/** Marks the primary's admin calls to a worker apart from the other messages on the channel. */
export const ADMIN_TAG = 'floodgate.gateway.admin';
/** Marks a starting worker's call to the primary for the admin state of the workers already serving. */
export const ADMIN_STATE_TAG = 'floodgate.gateway.admin-state';

/**
 * One admin API request, as the primary read it. `lead` is set for one
 * worker: it does what reaches past this host (writing a Redis override
 * hash, announcing a reset on Redis); the others do what is their own.
 */
export interface ApiCall {
  readonly op: 'api';
  readonly method: string;
  /** The path as sent (still percent-encoded). */
  readonly path: string;
  /** The query string, without `?`. */
  readonly query: string;
  /** The body's text; null when it was over the admin API's size limit. */
  readonly body: string | null;
  readonly lead: boolean;
}

/** A call from the primary: an admin API request, the dashboard's numbers, or the worker's admin state. */
export type AdminCall = ApiCall | { readonly op: 'stats' } | { readonly op: 'state' };

/**
 * What a worker that starts takes over from one already serving: the
 * overrides set through the admin API on rules without a Redis hash, which
 * live in each process only (counters and blocks are in the shared store,
 * and overrides on a Redis hash are read from it).
 */
export interface AdminState {
  readonly overrides: ReadonlyArray<{ readonly rule: string; readonly pattern: string; readonly value: unknown }>;
}
