/** A short, safe description of any value, for the errors that say what was given instead of what was expected. */

/**
 * Describes a value for an error message without echoing it whole: strings are quoted and cut at 40 characters, other values
 * are named by kind (`an object`, `an array`, `1n (a bigint)`), so a secret or a huge input never lands in a log line.
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  // 1n printed as "1" would read as a valid number.
  if (typeof value === 'bigint') return `${value}n (a bigint)`;
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
