/** Argument and option checks shared by the limiter and the stores. */
/**
 * Strict, with messages that say how to fix the call.
 */
import { describeValue } from './describe-value.js';
import { ErrorCode, FloodgateError, type ErrorCodeValue } from './errors.js';

/**
 * Throws UNKNOWN_OPTION for any own property of `options` not in `known`,
 * INVALID_OPTIONS when `options` is not a plain object or an option is null.
 */
export function assertKnownOptions(options: unknown, known: readonly string[], owner: string): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} options must be an object; got ${describeValue(options)}.`);
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
    throw new FloodgateError(ErrorCode.INVALID_KEY, `key must be a non-empty string; got ${describeValue(key)}.`);
  }
}

/**
 * Throws INVALID_COST unless `value` is a positive safe integer, and
 * COST_EXCEEDS_LIMIT when `max` is given and exceeded.
 */
export function assertUnits(value: unknown, name: string, max?: number): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new FloodgateError(ErrorCode.INVALID_COST, `${name} must be a positive whole number; got ${describeValue(value)}.`);
  }
  if (max !== undefined && value > max) {
    throw new FloodgateError(
      ErrorCode.COST_EXCEEDS_LIMIT,
      `${name} ${value} is larger than the limit ${max}, so it could never be admitted; raise the limit or lower the ${name}.`,
    );
  }
}

/** The largest delay `setTimeout` honours (2³¹ − 1 ms); a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Throws a FloodgateError whose message reads `<name> must be <expected>; got <value>.`,
 * the one wording every option check uses.
 *
 * @param code - the stable code to throw with
 * @param name - the option as the caller wrote it, owner included (for example `"MemoryStore maxKeys"`)
 * @param expected - what would be right, as a phrase (`"a positive integer"`)
 * @param value - what was given
 */
export function invalid(code: ErrorCodeValue, name: string, expected: string, value: unknown): never {
  throw new FloodgateError(code, `${name} must be ${expected}; got ${describeValue(value)}.`);
}

/** Bounds and wording of a {@link wholeNumber} check. */
export interface WholeNumberRule {
  /** The smallest value allowed (default 0). */
  readonly min?: number;
  /** The largest value allowed (default `Number.MAX_SAFE_INTEGER`). */
  readonly max?: number;
  /** The code to throw with (default INVALID_OPTIONS). */
  readonly code?: ErrorCodeValue;
  /** The phrase after "must be" (default: "a whole number from MIN to MAX", or "of at least MIN" with no max). */
  readonly expected?: string;
}

/**
 * Returns `value` when it is a safe integer within the rule's bounds; throws
 * the rule's code otherwise (never rounds or clamps).
 */
export function wholeNumber(value: unknown, name: string, rule: WholeNumberRule = {}): number {
  const min = rule.min ?? 0;
  const max = rule.max ?? Number.MAX_SAFE_INTEGER;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const expected =
      rule.expected ?? (max === Number.MAX_SAFE_INTEGER ? `a whole number of at least ${min}` : `a whole number from ${min} to ${max}`);
    invalid(rule.code ?? ErrorCode.INVALID_OPTIONS, name, expected, value);
  }
  return value;
}

/**
 * Returns `value` when it is one of `choices`; throws `code` (default
 * INVALID_OPTIONS) with the choices listed otherwise.
 */
export function oneOf<T extends string | number | boolean>(
  value: unknown,
  name: string,
  choices: readonly T[],
  code: ErrorCodeValue = ErrorCode.INVALID_OPTIONS,
): T {
  if (!(choices as readonly unknown[]).includes(value)) invalid(code, name, choiceList(choices), value);
  return value as T;
}

/** Returns `value` when it is undefined or a function; throws INVALID_OPTIONS otherwise. */
export function optionalFunction<F>(value: F | undefined, name: string): F | undefined {
  if (value !== undefined && typeof value !== 'function') invalid(ErrorCode.INVALID_OPTIONS, name, 'a function', value);
  return value;
}

/** Returns `value` when it is undefined or a boolean; throws INVALID_OPTIONS otherwise (no truthiness). */
export function optionalBoolean(value: unknown, name: string): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') invalid(ErrorCode.INVALID_OPTIONS, name, 'true or false', value);
  return value as boolean | undefined;
}

/** `"a", "b" or "c"`: the wording of a list of allowed values. */
function choiceList(choices: readonly unknown[]): string {
  const quoted = choices.map((c) => (typeof c === 'string' ? JSON.stringify(c) : String(c)));
  return quoted.length <= 1 ? (quoted[0] ?? 'nothing') : `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}
