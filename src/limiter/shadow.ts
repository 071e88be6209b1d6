/** Shadow mode: a limiter that decides and counts as usual but turns each refusal into a marked admission. */
import type { Decision } from '../core/decision.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { optionalBoolean } from '../core/validate.js';

/**
 * The decision a shadow limiter answers for `d`: `d` itself when admitted,
 * else an admission marked `shadowLimited` that keeps the refusal's numbers
 * (remaining, reset, retry after): the caller goes on, and whoever logs or
 * counts it sees what the refusal would have said. Nothing was spent by the
 * refusal, so nothing is taken back.
 */
export function shadowDecision<D extends Decision>(d: D): D {
  if (d.allowed) return d;
  return { ...d, allowed: true, shadowLimited: true };
}

/**
 * Checks a limiter's `shadow` option against its `wait` and `execEvenly`:
 * a shadow limiter never refuses, so it has no refusal to wait out, and it
 * must not delay the calls it only watches.
 * @throws FloodgateError INVALID_OPTIONS for a non-boolean, CONFLICTING_OPTIONS with wait or execEvenly
 */
export function parseShadow(o: { shadow?: unknown; wait?: unknown; execEvenly?: unknown }, owner: string): boolean {
  const shadow = optionalBoolean(o.shadow, `${owner} shadow`) ?? false;
  if (!shadow) return false;
  const other = o.wait !== undefined ? 'wait' : o.execEvenly === true ? 'execEvenly' : undefined;
  if (other !== undefined) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${owner}: shadow: true never refuses, so no call of it waits (${other} would only delay calls it watches); remove ${other} or shadow.`,
    );
  }
  return true;
}
