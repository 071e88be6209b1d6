/** A throttle for reports that may come at the request rate (an outage's errors). */
/**
 * At most one per interval, with a count of the ones held back.
 */

/**
 * Wraps `emit` so it runs at most once per `everyMs`; calls in between are
 * dropped and counted, and the count is passed to the next `emit`.
 */
export function throttled<T>(everyMs: number, emit: (value: T, held: number) => void): (value: T) => void {
  let last = -Infinity;
  let held = 0;
  return (value) => {
    const now = Date.now();
    if (now - last < everyMs) {
      held += 1;
      return;
    }
    last = now;
    const dropped = held;
    held = 0;
    emit(value, dropped);
  };
}
