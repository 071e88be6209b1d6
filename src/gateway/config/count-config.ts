/** A rule's `count` section and its `nearLimit` ratio: which responses a rule counts, and when a key is near its limit. */
/**
 * `count: { status: [401, 403] }` counts only the responses with those statuses (or classes such as `5xx`): the login
 * brute-force rule, or a circuit-like rule on upstream failures.
 */
import { describeValue } from '../../core/describe-value.js';
import type { CountSettings } from './settings.js';
import { InvalidValue } from './values.js';
import { mapping, type Cursor, type Path } from './yaml-cursor.js';

const COUNT_FIELDS = ['status'] as const;
const EXAMPLE = 'e.g. count: { status: [401, 403] } or count: { status: [5xx] }';
/** A status class as written: `4xx`, `5XX`. */
const CLASS = /^([1-5])xx$/i;
/** The share of a policy's limit above which an admitted request counts in `floodgate_near_limit_total`, unless the rule says otherwise (envoyproxy/ratelimit's default). */
export const DEFAULT_NEAR_LIMIT = 0.8;

/**
 * Parses a rule's `count`. Refused: an empty list (it would count nothing,
 * so the rule would never refuse), a status outside 100–599, anything but a
 * status or a class `1xx`–`5xx`; with `cost` (each response would then have
 * two prices for one reservation: a rule counts either the units its
 * upstream reports or its matching responses, and two rules on the same
 * match give both); and on a shadow rule, which never refuses, so there is
 * nothing to hold back while a response is awaited.
 */
export function countSettings(c: Cursor, path: Path, value: unknown, withCost: boolean, shadow: boolean): CountSettings {
  const o = mapping(c, path, value, COUNT_FIELDS);
  if (shadow)
    c.fail(path, 'a shadow rule only reports, so it has nothing to hold back while a response is awaited; remove count or shadow.');
  if (withCost)
    c.fail(
      path,
      'a rule counts either the cost its upstream reports (cost) or its matching responses (count), not both: each response would have two prices for one reservation; use two rules with the same match.',
    );
  if (o.status === undefined) c.fail(path, `needs status: the statuses (or classes) of the responses that count, ${EXAMPLE}.`);
  const list = Array.isArray(o.status) ? (o.status as unknown[]) : [o.status];
  if (list.length === 0) c.fail([...path, 'status'], `is empty, so the rule would count nothing and never refuse; ${EXAMPLE}.`);
  const statuses = new Set<number>();
  const classes = new Set<number>();
  list.forEach((item, i) => {
    const at: Path = Array.isArray(o.status) ? [...path, 'status', i] : [...path, 'status'];
    c.at(at, () => {
      const cls = typeof item === 'string' ? CLASS.exec(item.trim()) : null;
      if (cls !== null) return classes.add(Number(cls[1]));
      const n = typeof item === 'string' && /^\d+$/.test(item.trim()) ? Number(item) : item;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 100 || n > 599)
        throw new InvalidValue(`must be a status from 100 to 599 or a class from 1xx to 5xx; got ${describeValue(item)}.`);
      return statuses.add(n);
    });
  });
  return { statuses: [...statuses].sort((a, b) => a - b), classes: [...classes].sort((a, b) => a - b) };
}

/**
 * Parses a rule's `nearLimit`: the share of a policy's limit (above 0, at
 * most 1) that an admitted request's key must have used for it to count in
 * `floodgate_near_limit_total`.
 */
export function nearLimitRatio(c: Cursor, path: Path, value: unknown): number {
  return c.at(path, () => {
    const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0 || n > 1)
      throw new InvalidValue(
        `must be the share of a policy's limit a key has used when it counts as near its limit, above 0 and at most 1 (default ${DEFAULT_NEAR_LIMIT}); got ${describeValue(value)}.`,
      );
    return n;
  });
}
