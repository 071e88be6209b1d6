/** Parses durations given as milliseconds or strings such as "500ms", "1s", "5m", "1h", "1d". */
import { describeValue } from './describe-value.js';
import { ErrorCode, FloodgateError, type ErrorCodeValue } from './errors.js';

/** A duration: a whole number of milliseconds, or a string like `"500ms"`, `"1.5s"`, `"5m"`, `"1h"`, `"1d"`. */
export type Duration = number | string;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/**
 * Converts a {@link Duration} to whole milliseconds (at least 1).
 *
 * @param value - the duration
 * @param name - the option name, used in the error message (default `"duration"`)
 * @param code - the error code to throw with (INVALID_WINDOW for `window`)
 * @throws FloodgateError when the value is not a positive whole number of
 *   milliseconds; nothing is rounded silently.
 */
export function parseDuration(value: unknown, name = 'duration', code: ErrorCodeValue = ErrorCode.INVALID_DURATION): number {
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else if (typeof value === 'string') {
    const match = PATTERN.exec(value.trim());
    if (!match) {
      throw new FloodgateError(
        code,
        `${name} must be a number of milliseconds or a string like "500ms", "1s", "5m", "1h" or "1d"; got ${JSON.stringify(value)}.`,
      );
    }
    ms = Number(match[1]) * UNIT_MS[match[2]!]!;
  } else {
    throw new FloodgateError(code, `${name} must be a duration (milliseconds or a string like "1s"); got ${describeValue(value)}.`);
  }
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new FloodgateError(
      code,
      `${name} must be a positive whole number of milliseconds; got ${describeValue(value)}${typeof value === 'string' ? ` (= ${ms} ms)` : ''}.`,
    );
  }
  return ms;
}
