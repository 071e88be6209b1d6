/** Parsers for the `paths:` config section and for `pathPattern`. */
/**
 * The `pathPattern` guard refuses regular expressions that can backtrack catastrophically.
 */
import { describeValue } from '../../core/describe-value.js';
import { InvalidValue } from './values.js';
import type { PathSettings } from './settings.js';

/** The fields of the `paths:` section. */
export const PATH_FIELDS = ['caseSensitive', 'escapedSlashes', 'semicolons', 'doubleEncoding'] as const;

/** Parses one of the `paths:` modes: a value of `allowed`. */
export function parseMode<K extends 'escapedSlashes' | 'semicolons' | 'doubleEncoding'>(
  value: unknown,
  allowed: ReadonlyArray<PathSettings[K]>,
): PathSettings[K] {
  if (!allowed.includes(value as PathSettings[K]))
    throw new InvalidValue(`must be one of ${allowed.join(', ')}; got ${describeValue(value)}.`);
  return value as PathSettings[K];
}

/** The modes each `paths:` field accepts. */
export const PATH_MODES = {
  escapedSlashes: ['reject', 'decode', 'keep'],
  semicolons: ['reject', 'strip', 'keep'],
  doubleEncoding: ['reject', 'keep'],
} as const;

/**
 * Compiles a `pathPattern`, refusing one with a quantified group that
 * itself holds a quantifier (`(a+)+`, `(\/[a-z]*)*`, `(?:x|y+){2,}`): the
 * shape whose backtracking grows exponentially with the path's length.
 * A conservative check: it may refuse a harmless pattern, which can then
 * be written without the nesting.
 */
export function parsePathPattern(value: unknown): RegExp {
  if (typeof value !== 'string')
    throw new InvalidValue(`must be a regular expression as a string, e.g. "^/users/[0-9]+$"; got ${describeValue(value)}.`);
  let pattern: RegExp;
  try {
    pattern = new RegExp(value);
  } catch (error) {
    throw new InvalidValue(`is not a valid regular expression: ${(error as Error).message}`);
  }
  const nested = nestedQuantifier(value);
  if (nested !== undefined) {
    throw new InvalidValue(
      `has a repeated group that holds a repetition (${JSON.stringify(nested)}), which can take exponential time on a crafted path; write it without the nesting, e.g. "^/[a-z/]+$" rather than "^(/[a-z]+)+$".`,
    );
  }
  return pattern;
}

/** The first group (as written) that is quantified and holds a quantifier, or undefined. */
function nestedQuantifier(source: string): string | undefined {
  // Per open group: where it starts and whether a quantifier was seen inside it.
  const open: Array<{ start: number; quantified: boolean }> = [];
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === '\\') {
      i += 1;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === '(') open.push({ start: i, quantified: false });
    else if (c === ')') {
      const group = open.pop();
      if (group === undefined) continue;
      const repeated = isRepeat(source, i + 1);
      if (repeated && group.quantified) return source.slice(group.start, i + 2);
      // A group with a quantifier inside is a quantified thing for the group around it too.
      if ((group.quantified || repeated) && open.length > 0) open[open.length - 1]!.quantified = true;
    } else if (isRepeat(source, i) && open.length > 0 && source[i - 1] !== '(') {
      open[open.length - 1]!.quantified = true;
    }
  }
  return undefined;
}

/** True when `source[i]` starts a quantifier that repeats (`*`, `+`, `{n,}`, `{n,m}` with m > 1); `?` does not repeat. */
function isRepeat(source: string, i: number): boolean {
  const c = source[i];
  if (c === '*' || c === '+') return true;
  if (c !== '{') return false;
  const m = /^\{(\d+)(,(\d*))?\}/.exec(source.slice(i));
  if (m === null) return false;
  if (m[2] === undefined) return Number(m[1]) > 1;
  return m[3] === '' || Number(m[3]) > 1;
}
