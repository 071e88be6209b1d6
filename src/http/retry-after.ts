/** The `retryAfterJitter` option: Retry-After spread over a few seconds, never earlier than the true wait. */
import { parseDuration, type Duration } from '../core/duration.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { assertKnownOptions } from '../core/validate.js';

/** The object form of `retryAfterJitter`. */
export interface RetryAfterJitterOptions {
  /** The most added to a refusal's wait before it is rounded up to whole seconds, e.g. `'2s'`. */
  readonly max: Duration;
  /**
   * The random source, a function returning a number in [0, 1) as
   * `Math.random` does (the default). For tests that need one Retry-After
   * they can predict; a value outside [0, 1) is an error.
   */
  readonly random?: () => number;
}

/** The `retryAfterJitter` option as written: a duration, the object form, or `false` (the default) for none. */
export type RetryAfterJitter = Duration | RetryAfterJitterOptions | false;

/** `retryAfterJitter`, checked. */
export interface RetryAfterSpread {
  /** The most added to a wait, in ms (at least 1). */
  readonly maxMs: number;
  /** Draws the ms added to one refusal's wait, in [0, maxMs). */
  readonly draw: () => number;
}

/** The longest jitter accepted: a spread of more than an hour is a slip (milliseconds for seconds, say), not a plan. */
const MAX_JITTER_MS = 3_600_000;

/**
 * Checks the `retryAfterJitter` option; undefined when it is off (unset or `false`).
 * @throws FloodgateError INVALID_DURATION for a bad or over-an-hour duration, INVALID_OPTIONS for a bad object form,
 *   UNKNOWN_OPTION for an unknown field
 */
export function parseRetryAfterJitter(value: unknown): RetryAfterSpread | undefined {
  if (value === undefined || value === false) return undefined;
  let max: unknown = value;
  let random: unknown;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    assertKnownOptions(value, ['max', 'random'], 'retryAfterJitter');
    max = (value as RetryAfterJitterOptions).max;
    random = (value as RetryAfterJitterOptions).random;
    if (max === undefined) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, "retryAfterJitter.max is required, e.g. retryAfterJitter: { max: '2s' }.");
    }
    if (random !== undefined && typeof random !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `retryAfterJitter.random must be a function returning a number in [0, 1), as Math.random does; got ${describeValue(random)}.`,
      );
    }
  }
  const maxMs = parseDuration(max as Duration, 'retryAfterJitter');
  if (maxMs > MAX_JITTER_MS) {
    throw new FloodgateError(
      ErrorCode.INVALID_DURATION,
      `retryAfterJitter must be at most 1 hour; got ${maxMs} ms. A few seconds spread clients refused together (a bare number counts milliseconds: write '2s' for two seconds).`,
    );
  }
  const source = (random as (() => number) | undefined) ?? Math.random;
  const draw = (): number => {
    const r = source();
    if (typeof r !== 'number' || !(r >= 0 && r < 1)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `retryAfterJitter.random must return a number in [0, 1), as Math.random does; got ${describeValue(r)}.`,
      );
    }
    return r * maxMs;
  };
  return { maxMs, draw };
}
