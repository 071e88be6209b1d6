/** A rule's `concurrency` and `wait` sections. */
/**
 * `concurrency` is the number of requests of one key in flight at once; `wait` is how long a refused request may wait
 * for a unit or a slot.
 */
import { describeValue } from '../../core/describe-value.js';
import type { ConcurrencySettings, PolicySettings, WaitSettings } from './settings.js';
import { InvalidValue, parseMs, parsePositiveInt } from './values.js';
import { isObject, mapping, type Cursor, type Path } from './yaml-cursor.js';

const CONCURRENCY_FIELDS = ['limit', 'ttl'] as const;
const WAIT_FIELDS = ['timeout', 'maxQueue'] as const;
/** A slot's lifetime without renewal unless the rule says otherwise; the holder renews it every ttl/3 while the response runs. */
const DEFAULT_TTL_MS = 30_000;
/** Below this a pause of the gateway (GC, a slow store call) can outlast a slot, and another request takes its place. */
const MIN_TTL_MS = 1000;
/** Longest ttl: a crashed gateway's slots come back within it. */
const MAX_TTL_MS = 3_600_000;
/** Longest wait: each waiting request is an open client connection the gateway keeps. */
const MAX_WAIT_MS = 60_000;
/** Most requests of one key waiting in one gateway process unless the rule says otherwise. */
const DEFAULT_MAX_QUEUE = 100;
/** Most waiting requests a rule may allow per key and process. */
const MAX_QUEUE = 10_000;

/**
 * Parses a rule's `concurrency`: `4`, or `{ limit: 4, ttl: 30s }`. A shadow
 * rule cannot have one: it never refuses, so a slot would hold nothing back.
 */
export function concurrencySettings(c: Cursor, path: Path, value: unknown, shadow: boolean): ConcurrencySettings {
  if (shadow) c.fail(path, 'a shadow rule only reports, so it has no requests to hold back; remove concurrency or shadow.');
  if (!isObject(value)) {
    const limit = c.at(path, () => {
      if (typeof value !== 'number' && typeof value !== 'string')
        throw new InvalidValue(
          `must be the most requests of one key in flight at once, e.g. 4 or { limit: 4, ttl: 30s }; got ${describeValue(value)}.`,
        );
      return parsePositiveInt(value, 1_000_000);
    });
    return { limit, ttlMs: DEFAULT_TTL_MS };
  }
  const o = mapping(c, path, value, CONCURRENCY_FIELDS);
  if (o.limit === undefined) c.fail(path, 'needs a limit: the most requests of one key in flight at once, e.g. { limit: 4, ttl: 30s }.');
  const limit = c.at([...path, 'limit'], () => parsePositiveInt(o.limit, 1_000_000));
  const ttlMs =
    o.ttl === undefined
      ? DEFAULT_TTL_MS
      : c.at([...path, 'ttl'], () => {
          const ms = parseMs(o.ttl);
          if (ms < MIN_TTL_MS || ms > MAX_TTL_MS)
            throw new InvalidValue(
              `must be from 1s to 1h: the gateway renews a held slot every ttl/3, and a crashed gateway's slots come back after it; got ${describeValue(o.ttl)}.`,
            );
          return ms;
        });
  return { limit, ttlMs };
}

/**
 * Parses a rule's `wait`: `{ timeout: 2s, maxQueue: 100 }`. With
 * `concurrency` the request waits for a slot; otherwise for its policy's
 * unit, which needs a rule of one policy (several are decided together, at
 * once). A shadow rule never refuses, so it has nothing to wait for.
 */
export function waitSettings(
  c: Cursor,
  path: Path,
  value: unknown,
  policies: readonly PolicySettings[],
  inFlight: boolean,
  shadow: boolean,
): WaitSettings {
  if (shadow) c.fail(path, 'a shadow rule never refuses, so no request of it waits; remove wait or shadow.');
  const o = mapping(c, path, value, WAIT_FIELDS);
  if (o.timeout === undefined) c.fail(path, 'needs a timeout: the longest a request waits before it is refused, e.g. { timeout: 2s }.');
  const timeoutMs = c.at([...path, 'timeout'], () => {
    const ms = parseMs(o.timeout);
    if (ms > MAX_WAIT_MS)
      throw new InvalidValue(
        `must be at most 1m: each waiting request keeps its client's connection open; got ${describeValue(o.timeout)}.`,
      );
    return ms;
  });
  const maxQueue =
    o.maxQueue === undefined ? DEFAULT_MAX_QUEUE : c.at([...path, 'maxQueue'], () => parsePositiveInt(o.maxQueue, MAX_QUEUE));
  if (!inFlight && policies.length > 1)
    c.fail(
      path,
      `waits for a unit of one policy, but this rule has ${policies.length}: they are decided together, at once, so none could wait. Split the policy you want to wait for into a rule of its own, or add concurrency (then requests wait for a slot).`,
    );
  return { timeoutMs, maxQueue };
}
