/** The process-wide slot holding this process's cluster primary. */
/**
 * Shared by the ESM and CJS builds so two copies of floodgate cannot both answer.
 */
import type { PrimaryMessage, WorkerMessage } from './protocol.js';

/** What a worker-side store needs from a primary in its own process. */
export interface LocalPrimary {
  /**
   * Handles one worker message; `reply` may be called synchronously. A
   * worker passes the same `reply` every time: it is how the primary knows
   * whom to send invalidations.
   */
  receive(message: WorkerMessage, reply: (message: PrimaryMessage) => void): void;
  /** Forgets `reply`: the worker stopped listening (and forgot what it was told). */
  forget?(reply: (message: PrimaryMessage) => void): void;
}

// A registered symbol, not a module variable: if both dist/esm and dist/cjs
// get loaded, they still see one slot and one node:cluster listener.
const SLOT = Symbol.for('floodgate.cluster.primary');

type Slot = { [SLOT]?: LocalPrimary };

/** The primary running in this process, if any. */
export function localPrimary(): LocalPrimary | undefined {
  return (globalThis as Slot)[SLOT];
}

/** Claims the slot; false when another primary holds it. */
export function claimLocalPrimary(primary: LocalPrimary): boolean {
  const slot = globalThis as Slot;
  if (slot[SLOT] !== undefined && slot[SLOT] !== primary) return false;
  slot[SLOT] = primary;
  return true;
}

/** Frees the slot if `primary` holds it. */
export function releaseLocalPrimary(primary: LocalPrimary): void {
  const slot = globalThis as Slot;
  if (slot[SLOT] === primary) delete slot[SLOT];
}
