/** RateLimiter options: their types and their checks. */
/**
 * Their types, the checks of the policy, the in-memory block and circuit breaker options, and the watch for limiters
 * that share a default prefix.
 */
import type { Clock } from '../core/clock.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { warnOnce, WarningCode } from '../core/warnings.js';
import { CircuitBreaker } from '../guards/breaker.js';
import type { MemoryBlockRule } from '../guards/memory-block.js';
import { ALGORITHMS, type Algorithm, type Policy } from '../core/policy.js';
import { calendarLabel, isCalendarWindow, longestPeriodMs, parseCalendarWindow, type CalendarWindow } from '../core/calendar-window.js';
import type { Store } from '../stores/store.js';
import type { LimiterCore, StoreFailureMode } from './internals.js';
import type { OverrideLookup, PolicyOverrides } from './overrides.js';
import { assertKnownOptions, invalid, MAX_TIMER_MS, optionalBoolean, wholeNumber } from '../core/validate.js';

export type { StoreFailureMode } from './internals.js';

/** Options of the in-memory block list. */
export interface InMemoryBlockOptions {
  /**
   * Units consumed (as the store reports) at or above which a key is
   * answered from memory as limited. Default: the limit, i.e. once a key's
   * quota is spent. Lower values refuse earlier, trading quota for fewer
   * store calls.
   */
  onConsumed?: number;
  /** How long to keep refusing from memory. Default: until the store would admit one unit again. */
  duration?: Duration;
  /** Most keys held in the block list. Default 10 000. */
  maxKeys?: number;
}

/** Options of the circuit breaker around the store. */
export interface BreakerConfig {
  /** Consecutive store failures that open the circuit. Default 5. */
  failureThreshold?: number;
  /** How long the circuit stays open before one probe call. Default "2s". */
  cooldown?: Duration;
}

/** Options of waiting instead of refusing (the `wait` option). */
export interface WaitOptions {
  /**
   * The longest a `consume` waits for its units. A call whose next retry
   * would fall after it is refused at once (its decision's `retryAfterMs`
   * says how long it would have needed); an admitted call never waited longer
   * than this plus one store round trip (the attempt that started in time).
   */
  timeout: Duration;
  /**
   * Most calls waiting per key in this process; one more is refused at once.
   * Default 1000.
   */
  maxQueue?: number;
}

/** Options of {@link RateLimiter}. */
export interface RateLimiterOptions {
  /**
   * Units admitted per window. A positive integer. For token-bucket, the
   * refill (`limit` tokens per `window`) and, without `burst`, the bucket size.
   */
  limit: number;
  /**
   * The window (for token-bucket: time to refill the whole bucket). For the
   * fixed window, a {@link CalendarWindow} instead makes windows follow the
   * calendar, e.g. `{ calendar: 'month', timeZone: 'Europe/Berlin' }`: a
   * quota that resets at midnight on the 1st, Berlin time. See docs/calendar.md.
   */
  window: Duration | CalendarWindow;
  /** The algorithm. Default `"fixed-window"`. */
  algorithm?: Algorithm;
  /**
   * Token bucket only: the bucket size, the most units admitted at once,
   * apart from the rate (`limit` per `window`): `{ algorithm: 'token-bucket',
   * limit: 10, window: '1s', burst: 50 }` admits 50 at once, then 10 a second.
   * A positive integer. Default: `limit`. See docs/algorithms.md#token-bucket-gcra.
   */
  burst?: number;
  /**
   * Token bucket only: the tokens a new key starts with, from 0 to `burst`
   * (0: a new key earns its first unit at the refill rate). A key is
   * forgotten once its bucket is full again, so it then starts anew with
   * these. Default: a full bucket (`burst`).
   */
  initialTokens?: number;
  /** Where counters live. Default: a new {@link MemoryStore}. */
  store?: Store;
  /** A consume that goes over the limit blocks the key in the store for this long. Default: no block. */
  blockDuration?: Duration;
  /**
   * Namespace of this limiter's keys in the store. Limiters that share a
   * store and a prefix share counters. Default: derived from the policy,
   * e.g. `"fg:fixed-window:100:1000:0"`.
   */
  prefix?: string;
  /**
   * On Redis Cluster, keeps one key's counters of every limiter with the same
   * `hashTag` in one slot: the store key becomes `PREFIX:{HASHTAG:KEY}` (a
   * Redis hash tag), so a composite over such limiters for one key
   * (`consumeAll`, or an HTTP route's policies) is one atomic script. Keys of
   * different clients still spread over the slots. Needs a prefix without
   * `{` or `}`. Default: none, the store key is `PREFIX:KEY`.
   */
  hashTag?: string;
  /** Refuse keys known to be over the limit from process memory. `true` for the defaults. */
  inMemoryBlock?: boolean | InMemoryBlockOptions;
  /** A RateLimiter (usually on a MemoryStore) that decides while the store fails. */
  insurance?: LimiterCore;
  /** With no insurance: reject the promise (default), admit, or refuse while the store fails. */
  onStoreFailure?: StoreFailureMode;
  /** Circuit breaker settings, or `false` to call the store even while it keeps failing. */
  breaker?: boolean | BreakerConfig;
  /** Time source of the block list, the breaker, waiting, and the default MemoryStore when no `store` is given (a store passed in keeps its own clock). Default `Date.now`. */
  clock?: Clock;
  /**
   * Wait for units instead of being refused: `consume` waits in a FIFO line
   * per key (in this process) and is retried against the store when the store
   * says a unit is due, until admitted or until `timeout`. See docs/reservations.md#waiting.
   */
  wait?: WaitOptions;
  /**
   * Spread a key's admitted actions evenly over the window: each admitted
   * `consume` resolves at its own slot, window/limit after the previous one
   * of that key, across processes sharing the store. Refusals are not
   * delayed. See docs/reservations.md#waiting.
   */
  execEvenly?: boolean;
  /**
   * Per-key changes of this policy (limit, window, block), changed live: a
   * {@link PolicyOverrides} table, or a function of the key. An overridden
   * key keeps its store key and counter. See docs/overrides.md.
   */
  overrides?: PolicyOverrides | OverrideLookup;
  /**
   * Shadow mode (a dry run): the limiter decides and counts exactly as it
   * would enforce, but never refuses. A consume the policy would refuse
   * resolves `allowed: true` with `shadowLimited: true` and the refusal's
   * numbers (remaining, reset, retry after), spending nothing, as a refusal
   * spends nothing; metrics count it as `shadow_limited`. For measuring a
   * new limit on live traffic before enforcing it. The same word as the
   * gateway's `shadow` rules. Not with `wait` or `execEvenly`. Default false.
   */
  shadow?: boolean;
}

/** The option names of {@link RateLimiterOptions}, for strict validation. */
export const OPTION_NAMES = [
  'limit',
  'window',
  'algorithm',
  'burst',
  'initialTokens',
  'store',
  'blockDuration',
  'prefix',
  'hashTag',
  'inMemoryBlock',
  'insurance',
  'onStoreFailure',
  'breaker',
  'clock',
  'wait',
  'execEvenly',
  'overrides',
  'shadow',
] as const;
/** The values of {@link StoreFailureMode}. */
export const FAILURE_MODES: readonly StoreFailureMode[] = ['reject', 'fail-open', 'fail-closed'];
/** limit × window must stay below this so every algorithm's integer arithmetic is exact. */
const MAX_PRODUCT = 2 ** 50;

/**
 * The policy `options` describe (algorithm, limit, window and block, in
 * whole ms), frozen; warns once about a window that reads like seconds
 * written as milliseconds.
 * @throws FloodgateError INVALID_LIMIT, INVALID_WINDOW, LIMIT_TOO_LARGE, INVALID_ALGORITHM or INVALID_DURATION
 */
export function parsePolicy(o: RateLimiterOptions): Policy {
  if (typeof o.limit !== 'number' || !Number.isSafeInteger(o.limit) || o.limit <= 0) {
    throw new FloodgateError(ErrorCode.INVALID_LIMIT, `limit must be a positive whole number; got ${describeValue(o.limit)}.`);
  }
  if (o.window === undefined) {
    throw new FloodgateError(ErrorCode.INVALID_WINDOW, 'window is required, e.g. { limit: 100, window: "1m" }.');
  }
  if (isCalendarWindow(o.window)) return calendarPolicy(o, o.window);
  const windowMs = parseDuration(o.window, 'window', ErrorCode.INVALID_WINDOW);
  if (typeof o.window === 'number' && windowMs < 1000) {
    // `window: 60` meaning a minute is a likelier slip than a sub-second window written as a bare number.
    warnOnce(
      WarningCode.WINDOW_IN_MILLISECONDS,
      `RateLimiter window: ${windowMs} is ${windowMs} milliseconds (a bare number counts milliseconds). If you meant ${windowMs} seconds, write window: '${windowMs}s'; write window: '${windowMs}ms' to keep milliseconds without this warning.`,
      String(windowMs),
    );
  }
  if (o.limit * windowMs > MAX_PRODUCT) {
    throw new FloodgateError(
      ErrorCode.LIMIT_TOO_LARGE,
      `limit × window (in ms) must not exceed 2^50 so that counts stay exact; got ${o.limit} × ${windowMs}. Use a shorter window or a smaller limit.`,
    );
  }
  const algorithm = checkAlgorithm(o.algorithm);
  const blockMs = o.blockDuration === undefined ? 0 : parseDuration(o.blockDuration, 'blockDuration');
  return Object.freeze({ algorithm, limit: o.limit, windowMs, blockMs, ...parseBucket(o, algorithm, windowMs) });
}

/**
 * The `burst` and `initialTokens` of a token bucket, checked; each is left out
 * when it is the default (burst = limit, initialTokens = burst), so equal
 * buckets have equal policies however they are written.
 * @throws FloodgateError INVALID_BURST, INVALID_INITIAL_TOKENS or LIMIT_TOO_LARGE
 */
export function parseBucket(
  o: { readonly limit: number; readonly burst?: unknown; readonly initialTokens?: unknown },
  algorithm: Algorithm,
  windowMs: number,
  owner = '',
): { burst?: number; initialTokens?: number } {
  const { burst, initialTokens } = o;
  if (burst === undefined && initialTokens === undefined) return {};
  if (algorithm !== 'token-bucket') {
    const [name, code] =
      burst !== undefined ? (['burst', ErrorCode.INVALID_BURST] as const) : (['initialTokens', ErrorCode.INVALID_INITIAL_TOKENS] as const);
    throw new FloodgateError(
      code,
      `${owner}${name} is a token bucket's: ${JSON.stringify(algorithm)} admits limit per window and holds no tokens. Use algorithm: 'token-bucket', or leave ${name} out.`,
    );
  }
  const size =
    burst === undefined
      ? o.limit
      : wholeNumber(burst, `${owner}burst`, {
          min: 1,
          code: ErrorCode.INVALID_BURST,
          expected: 'a whole number of at least 1 (the most tokens the bucket holds)',
        });
  if (size * windowMs > MAX_PRODUCT) {
    throw new FloodgateError(
      ErrorCode.LIMIT_TOO_LARGE,
      `${owner}burst × window (in ms) must not exceed 2^50 so that counts stay exact; got ${size} × ${windowMs}. Use a smaller burst or a shorter window.`,
    );
  }
  const initial =
    initialTokens === undefined
      ? size
      : wholeNumber(initialTokens, `${owner}initialTokens`, {
          min: 0,
          max: size,
          code: ErrorCode.INVALID_INITIAL_TOKENS,
          expected: `a whole number from 0 to the burst (${size})`,
        });
  return {
    ...(size === o.limit ? {} : { burst: size }),
    ...(initial === size ? {} : { initialTokens: initial }),
  };
}

function checkAlgorithm(algorithm: Algorithm = 'fixed-window'): Algorithm {
  if (!ALGORITHMS.includes(algorithm)) {
    throw new FloodgateError(
      ErrorCode.INVALID_ALGORITHM,
      `algorithm must be one of ${ALGORITHMS.map((a) => JSON.stringify(a)).join(', ')}; got ${describeValue(algorithm)}.`,
    );
  }
  return algorithm;
}

/** The policy of a calendar `window`: a fixed window whose windows end where the period does. */
function calendarPolicy(o: RateLimiterOptions, window: CalendarWindow): Policy {
  const calendar = parseCalendarWindow(window);
  const algorithm = checkAlgorithm(o.algorithm);
  if (algorithm !== 'fixed-window') {
    // The other algorithms look back over a rolling span; only a fixed window has an end for the calendar to set.
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `window: { calendar: ${JSON.stringify(calendar.unit)} } makes calendar windows, which are fixed windows (a quota that resets when the ${calendar.unit} ends); ${JSON.stringify(algorithm)} rolls over time instead. Use algorithm: 'fixed-window' (the default), or a duration window such as window: '30d'.`,
    );
  }
  const windowMs = longestPeriodMs(calendar.unit);
  if (o.limit * windowMs > MAX_PRODUCT) {
    throw new FloodgateError(
      ErrorCode.LIMIT_TOO_LARGE,
      `limit × window (in ms, ${windowMs} for the longest ${calendarLabel(calendar)}) must not exceed 2^50 so that counts stay exact; got limit ${o.limit}. Use a smaller limit.`,
    );
  }
  parseBucket(o, algorithm, windowMs);
  const blockMs = o.blockDuration === undefined ? 0 : parseDuration(o.blockDuration, 'blockDuration');
  return Object.freeze({ algorithm, limit: o.limit, windowMs, blockMs, calendar });
}

/**
 * The checked `insurance` and `onStoreFailure` options of a limiter on
 * `store`: what decides while the store fails.
 * @throws FloodgateError INVALID_OPTIONS or CONFLICTING_OPTIONS
 */
export function parseFailureHandling(
  o: RateLimiterOptions,
  store: Store,
): { insurance: LimiterCore | undefined; failureMode: StoreFailureMode } {
  if (o.insurance !== undefined && !isRateLimiter(o.insurance)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `insurance must be a RateLimiter (usually on a MemoryStore); got ${describeValue(o.insurance)}.`,
    );
  }
  if (o.insurance !== undefined && o.insurance.store === store) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      'insurance must use a different store than the limiter it insures; it only decides while that store fails.',
    );
  }
  if (o.onStoreFailure !== undefined && !FAILURE_MODES.includes(o.onStoreFailure)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `onStoreFailure must be one of ${FAILURE_MODES.map((m) => JSON.stringify(m)).join(', ')}; got ${describeValue(o.onStoreFailure)}.`,
    );
  }
  if (o.insurance !== undefined && o.onStoreFailure !== undefined && o.onStoreFailure !== 'reject') {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `insurance and onStoreFailure: ${JSON.stringify(o.onStoreFailure)} both say what to do when the store fails; set only one.`,
    );
  }
  return { insurance: o.insurance, failureMode: o.onStoreFailure ?? 'reject' };
}

/** Checks the `inMemoryBlock` option of a limiter whose limit is `limit`; undefined when it is off. */
export function parseMemoryBlock(option: boolean | InMemoryBlockOptions | undefined, limit: number): MemoryBlockRule | undefined {
  if (option === undefined || option === false) return undefined;
  const o: InMemoryBlockOptions = option === true ? {} : option;
  assertKnownOptions(o, ['onConsumed', 'duration', 'maxKeys'], 'inMemoryBlock');
  const onConsumed = o.onConsumed ?? limit;
  if (!Number.isSafeInteger(onConsumed) || onConsumed < 1) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `inMemoryBlock.onConsumed must be a positive whole number; got ${describeValue(onConsumed)}.`,
    );
  }
  if (onConsumed > limit) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `inMemoryBlock.onConsumed (${onConsumed}) is above limit (${limit}); a refused consume spends nothing, so usage never gets there. Use at most the limit.`,
    );
  }
  const maxKeys = o.maxKeys ?? 10_000;
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `inMemoryBlock.maxKeys must be a positive whole number; got ${describeValue(maxKeys)}.`,
    );
  }
  const durationMs = o.duration === undefined ? undefined : parseDuration(o.duration, 'inMemoryBlock.duration');
  return { onConsumed, durationMs, maxKeys };
}

/** Checks the `breaker` option; undefined when it is off. */
export function parseBreaker(option: boolean | BreakerConfig | undefined): CircuitBreaker | undefined {
  if (option === false) return undefined;
  const o: BreakerConfig = option === undefined || option === true ? {} : option;
  assertKnownOptions(o, ['failureThreshold', 'cooldown'], 'breaker');
  const failureThreshold = o.failureThreshold ?? 5;
  if (!Number.isSafeInteger(failureThreshold) || failureThreshold < 1) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `breaker.failureThreshold must be a positive whole number; got ${describeValue(failureThreshold)}.`,
    );
  }
  const cooldownMs = parseDuration(o.cooldown ?? 2000, 'breaker.cooldown');
  return new CircuitBreaker({ failureThreshold, cooldownMs });
}

/** The `wait` option, checked. */
export interface WaitConfig {
  /** The longest wait, in ms. */
  readonly timeoutMs: number;
  /** Most waiters per key. */
  readonly maxQueue: number;
}

/** Most waiters per key unless `wait.maxQueue` says otherwise. */
const DEFAULT_MAX_QUEUE = 1000;

/** Checks the `wait` option; undefined when it is off. */
export function parseWait(option: unknown): WaitConfig | undefined {
  if (option === undefined) return undefined;
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `wait takes options, not ${describeValue(option)}: write wait: { timeout: '5s' } (and maxQueue for the most waiting calls per key).`,
    );
  }
  assertKnownOptions(option, ['timeout', 'maxQueue'], 'wait');
  const o = option as WaitOptions;
  if (o.timeout === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      "wait.timeout is required: the longest a consume waits, e.g. wait: { timeout: '5s' }.",
    );
  }
  const timeoutMs = parseDuration(o.timeout, 'wait.timeout');
  if (timeoutMs > MAX_TIMER_MS) {
    throw new FloodgateError(
      ErrorCode.INVALID_DURATION,
      `wait.timeout must be at most ${MAX_TIMER_MS} ms (about 24.8 days); got ${timeoutMs} ms.`,
    );
  }
  const maxQueue = wholeNumber(o.maxQueue ?? DEFAULT_MAX_QUEUE, 'wait.maxQueue', { min: 1, max: 1_000_000 });
  return { timeoutMs, maxQueue };
}

/** Options of one waiting call: `consume(key, cost, { signal })`, `acquire(key, { signal })`. */
export interface WaitCallOptions {
  /**
   * Abandons the call's wait when it aborts (a client that went away): the
   * call leaves its key's line at once and rejects with ABORTED, having spent
   * nothing. Only waiting can be abandoned: a call decided at once (no `wait`
   * option, or admitted without waiting) is not affected.
   */
  signal?: AbortSignal;
}

/** The `signal` of a call's options, checked; `owner` names the call in messages. */
export function callSignal(options: unknown, owner: string): AbortSignal | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    invalid(ErrorCode.INVALID_OPTIONS, `${owner} options`, 'an object such as { signal }', options);
  }
  assertKnownOptions(options, ['signal'], owner);
  const signal = (options as WaitCallOptions).signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    invalid(ErrorCode.INVALID_OPTIONS, `${owner} signal`, 'an AbortSignal, e.g. AbortSignal.timeout(5000) or controller.signal', signal);
  }
  return signal;
}

/** Checks the `execEvenly` option. */
export function parseExecEvenly(option: unknown): boolean {
  return optionalBoolean(option, 'execEvenly') ?? false;
}

/** Marks RateLimiter instances of both builds (ESM and CommonJS); a registered symbol, so each build finds the same one. */
export const RATE_LIMITER_BRAND = Symbol.for('floodgate.RateLimiter');

/**
 * True for a RateLimiter of either build: what `value instanceof RateLimiter`
 * answers, told by the brand every RateLimiter carries on its prototype.
 */
export function isRateLimiter(value: unknown): value is LimiterCore {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[RATE_LIMITER_BRAND] === true;
}

/**
 * The limiters that took a default prefix, per store object and prefix. Weak
 * both ways: a store or a limiter the app drops is collected (a dead entry
 * costs one small object per distinct policy).
 */
const defaultPrefixes = new WeakMap<Store, Map<string, WeakRef<object>>>();

/**
 * Records that `limiter` uses `store` under the default `prefix`, and warns
 * once (per prefix) when another live limiter already does: they share
 * counters. On Redis that is always so, in memory only when the store object
 * is shared, so per-route limits that hold in development would merge in
 * production.
 */
export function noteDefaultPrefix(store: Store, prefix: string, limiter: object): void {
  let byPrefix = defaultPrefixes.get(store);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    defaultPrefixes.set(store, byPrefix);
  }
  const earlier = byPrefix.get(prefix)?.deref();
  if (earlier === undefined) {
    byPrefix.set(prefix, new WeakRef(limiter));
    return;
  }
  warnOnce(
    WarningCode.SHARED_DEFAULT_PREFIX,
    `Two RateLimiters with the same policy use one ${store.name} store under the default prefix ${JSON.stringify(prefix)} (derived from the policy), so they share counters: a request counted by one is counted by the other. If each should have its own quota (one per route, say), give each its own prefix, e.g. prefix: 'login'; if one quota is meant, share one RateLimiter.`,
    prefix,
  );
}
