/** Argument and option checks shared by the limiter and the stores: strict, with messages that say how to fix the call. */
import { describe } from './duration.js';
import { ErrorCode, FloodgateError } from './errors.js';

/**
 * Throws UNKNOWN_OPTION for any own property of `options` not in `known`,
 * INVALID_OPTIONS when `options` is not a plain object or an option is null.
 */
export function assertKnownOptions(options: unknown, known: readonly string[], owner: string): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} options must be an object; got ${describe(options)}.`);
  }
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) {
      throw new FloodgateError(
        ErrorCode.UNKNOWN_OPTION,
        `${owner} has no option ${JSON.stringify(name)}. Known options: ${known.join(', ')}.`,
      );
    }
    // No option takes null; reading it as "the default" would be a silent coercion (undefined means that).
    if ((options as Record<string, unknown>)[name] === null) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} ${name} is null; leave it out (or pass undefined) for the default.`);
    }
  }
}

/** Throws INVALID_KEY unless `key` is a non-empty string. */
export function assertKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new FloodgateError(ErrorCode.INVALID_KEY, `key must be a non-empty string; got ${describe(key)}.`);
  }
}

/**
 * Throws INVALID_COST unless `value` is a positive safe integer, and
 * COST_EXCEEDS_LIMIT when `max` is given and exceeded.
 */
export function assertUnits(value: unknown, name: string, max?: number): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new FloodgateError(ErrorCode.INVALID_COST, `${name} must be a positive whole number; got ${describe(value)}.`);
  }
  if (max !== undefined && value > max) {
    throw new FloodgateError(
      ErrorCode.COST_EXCEEDS_LIMIT,
      `${name} ${value} is larger than the limit ${max}, so it could never be admitted; raise the limit or lower the ${name}.`,
    );
  }
}
