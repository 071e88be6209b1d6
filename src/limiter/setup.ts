/** RateLimiter's store, prefix and clock options, checked. */
/**
 * The prefix is derived from the policy when none is given.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { calendarLabel } from '../core/calendar-window.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { noteDefaultPrefix, type RateLimiterOptions } from './options.js';
import type { Policy } from '../core/policy.js';
import { MemoryStore } from '../stores/memory.js';
import { isStore, type Store } from '../stores/store.js';

/**
 * The `store` option, or a new MemoryStore.
 * @throws FloodgateError INVALID_STORE for a value that is not a Store
 */
export function storeOption(o: RateLimiterOptions): Store {
  if (o.store !== undefined && !isStore(o.store)) {
    throw new FloodgateError(
      ErrorCode.INVALID_STORE,
      `store must implement the Store contract (a name and an apply(operation) method), e.g. new MemoryStore() or new RedisStore({ client }); got ${describeValue(o.store)}.`,
    );
  }
  return o.store ?? new MemoryStore();
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
  const { algorithm, limit, windowMs, blockMs, calendar } = policy;
  // A calendar window names its period, so a monthly limiter never shares keys with one of 745 hours.
  const prefix = `fg:${algorithm}:${limit}:${calendar ? calendarLabel(calendar) : windowMs}:${blockMs}`;
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
