/** RateLimiter's store, prefix and clock options, checked. */
/**
 * The prefix is derived from the policy when none is given.
 */
import { hashTag as redisHashTag } from '../stores/redis/key-names.js';
import { systemClock, type Clock } from '../core/clock.js';
import { calendarLabel } from '../core/calendar-window.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { noteDefaultPrefix, type RateLimiterOptions } from './options.js';
import type { Policy } from '../core/policy.js';
import { MemoryStore } from '../stores/memory.js';
import { isStore, type Store } from '../stores/store.js';

/**
 * The `store` option, or a new MemoryStore on the limiter's `clock`.
 * @throws FloodgateError INVALID_STORE for a value that is not a Store
 */
export function storeOption(o: RateLimiterOptions, clock: Clock): Store {
  if (o.store !== undefined && !isStore(o.store)) {
    throw new FloodgateError(
      ErrorCode.INVALID_STORE,
      `store must implement the Store contract (a name and an apply(operation) method), e.g. new MemoryStore() or new RedisStore({ client }); got ${describeValue(o.store)}.`,
    );
  }
  // The default store counts on the limiter's clock: a limiter given a clock (a test's ManualClock, a simulation) then
  // opens and ends windows on that time, as its in-memory block and waiting already do.
  return o.store ?? new MemoryStore({ clock });
}

/**
 * The `prefix` option, or one derived from `policy` (noted, so two limiters
 * meeting under one derived prefix are warned about).
 * @throws FloodgateError INVALID_OPTIONS for an empty or non-string prefix
 */
export function prefixOption(o: RateLimiterOptions, policy: Policy, store: Store, owner: object): string {
  if (o.prefix !== undefined && (typeof o.prefix !== 'string' || o.prefix.length === 0)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `prefix must be a non-empty string; got ${describeValue(o.prefix)}.`);
  }
  if (o.prefix !== undefined) return o.prefix;
  const { algorithm, limit, windowMs, blockMs, calendar, burst, initialTokens } = policy;
  // A calendar window names its period, so a monthly limiter never shares keys with one of 745 hours;
  // a bucket's burst and initial tokens are named when set, so buckets of other sizes keep their own keys.
  const bucket = `${burst === undefined ? '' : `:b${burst}`}${initialTokens === undefined ? '' : `:i${initialTokens}`}`;
  const prefix = `fg:${algorithm}:${limit}:${calendar ? calendarLabel(calendar) : windowMs}:${blockMs}${bucket}`;
  // Only a derived prefix can be shared by accident; one written twice is shared on purpose.
  noteDefaultPrefix(store, prefix, owner);
  return prefix;
}

/**
 * The `clock` option, or the system clock.
 * @throws FloodgateError INVALID_OPTIONS for a value that is not a function
 */
export function clockOption(o: RateLimiterOptions): Clock {
  if (o.clock !== undefined && typeof o.clock !== 'function') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `clock must be a function returning ms; got ${describeValue(o.clock)}.`);
  }
  return o.clock ?? systemClock;
}

/**
 * The `hashTag` option, checked against the prefix it follows.
 * @throws FloodgateError INVALID_OPTIONS for an empty or non-string tag, or a prefix holding `{` or `}` (Redis would take its
 *   tag from the prefix, and one key's counters would no longer share a slot)
 */
export function hashTagOption(o: RateLimiterOptions, prefix: string): string | undefined {
  if (o.hashTag === undefined) return undefined;
  if (typeof o.hashTag !== 'string' || o.hashTag.length === 0) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `hashTag must be a non-empty string; got ${describeValue(o.hashTag)}.`);
  }
  if (/[{}]/.test(prefix)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `hashTag needs a prefix without { or }, but the prefix is ${JSON.stringify(prefix)}: Redis would hash by the prefix's braces instead.`,
    );
  }
  return o.hashTag;
}

/**
 * The store key of `key`: `PREFIX:KEY`, or with a hash tag `PREFIX:{TAG}` where TAG is `HASHTAG:KEY` as a Redis hash tag
 * (encoded when the key holds `{` or `}`, so a client's key cannot end the tag early and pick another's slot).
 */
export function storeKeyOf(prefix: string, hashTag: string | undefined, key: string): string {
  return hashTag === undefined ? `${prefix}:${key}` : `${prefix}:{${redisHashTag(`${hashTag}:${key}`)}}`;
}
