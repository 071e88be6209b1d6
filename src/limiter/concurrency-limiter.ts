/** ConcurrencyLimiter: at most N holders of a key at once, across processes. */
/**
 * It works through the store's concurrency slots: acquire, heartbeat renewals, owner-checked release.
 */
import { parseDuration, type Duration } from '../core/duration.js';
import { ErrorCode, FloodgateError, isStoreFailure, toStoreError } from '../core/errors.js';
import { callSignal, FAILURE_MODES, parseWait, type StoreFailureMode, type WaitCallOptions, type WaitOptions } from './options.js';
import { SlotWaiting } from './concurrency-waiting.js';
import type { Slot } from './slot.js';
import { hasSlots, MAX_SLOT_TTL_MS, newOwner, type SlotAcquisition } from '../core/slots.js';
import { MemoryStore } from '../stores/memory.js';
import { isStore, type Store } from '../stores/store.js';
import { assertKey, assertKnownOptions, invalid, oneOf, optionalBoolean, wholeNumber } from '../core/validate.js';
import { WarningCode, warnOnce } from '../core/warnings.js';
import { parseShadow } from './shadow.js';

export type { Slot } from './slot.js';

/** Options of {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** Slots per key: at most this many holders of one key at once. A positive integer. */
  limit: number;
  /**
   * Where slots live: a store with concurrency slots (MemoryStore,
   * RedisStore, local-first RedisStore, ClusterStore). Default: a new
   * {@link MemoryStore}, which limits this process only.
   */
  store?: Store;
  /**
   * How long a slot stays taken without a renewal. With `heartbeat` on, a
   * holder renews it every ttl/3, so only a holder that stopped (crashed,
   * killed, hung) loses it; its slot comes back at most one ttl after its last
   * renewal. Default `"30s"`.
   */
  ttl?: Duration;
  /** Namespace of this limiter's keys in the store. Limiters with one prefix share slots. Default `"fg:concurrency:<limit>"`. */
  prefix?: string;
  /**
   * Renew each held slot every ttl/3 until it is released (an unref'd timer,
   * so it never keeps the process alive). Default true. Without it a slot
   * expires ttl after its acquisition even while in use, and then another
   * caller may take its place: set a ttl longer than any holder runs.
   */
  heartbeat?: boolean;
  /**
   * When the store fails: reject the promise (default), admit without a
   * slot (`"fail-open"`), or refuse (`"fail-closed"`, retry after a second).
   */
  onStoreFailure?: StoreFailureMode;
  /**
   * Wait for a slot instead of being refused: `acquire` waits in a FIFO line
   * per key (in this process), let in at once when a slot of the key is
   * released here and re-checked against the store every 25 ms for releases
   * elsewhere, until admitted or until `timeout`. See docs/reservations.md#waiting.
   */
  wait?: WaitOptions;
  /**
   * Shadow mode (a dry run), as RateLimiter's: an acquire with no slot free
   * resolves `allowed: true`, `shadowLimited: true`, holding nothing (its
   * `release` resolves false); one with a slot free takes it as usual, so the
   * count in flight is the one enforcing would see. Not with `wait`. Default false.
   */
  shadow?: boolean;
}

const OPTION_NAMES = ['limit', 'store', 'ttl', 'prefix', 'heartbeat', 'onStoreFailure', 'wait', 'shadow'] as const;
/** Below this ttl a pause of the holder (GC, a slow store call) can outlast the slot. */
const SHORT_TTL_MS = 1000;
/** Above this ttl without heartbeat, a crashed holder's slot stays taken for a long time. */
const LONG_UNRENEWED_TTL_MS = 10 * 60_000;

/**
 * A concurrency (in-flight) limiter: at most `limit` holders of each key at
 * once, in every process that shares the store.
 *
 * `acquire(key)` takes a slot when fewer than `limit` are held; the caller
 * runs its work and calls `release()`. Each slot has an owner id of its own
 * and an expiry a ttl ahead, which the heartbeat keeps pushing back while the
 * slot is held, so a holder that crashes loses its slot within ttl + ttl/3 of
 * its last renewal. Release and renew act only on the caller's own unexpired
 * slot: a slot that expired and went to another caller is never freed by its
 * old holder.
 *
 * Being refused is a result (`allowed: false`); a promise rejects only with a
 * {@link FloodgateError}: an invalid key, or a store failure with
 * `onStoreFailure: "reject"`.
 */
export class ConcurrencyLimiter {
  /**
   * `value instanceof ConcurrencyLimiter` is also true for one of the
   * package's other build (ESM or CommonJS, both loaded in one process), as
   * for RateLimiter: both builds mark their instances with one registered symbol.
   */
  static [Symbol.hasInstance](value: unknown): value is ConcurrencyLimiter {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    return (
      this === ConcurrencyLimiter &&
      typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[CONCURRENCY_LIMITER_BRAND] === true
    );
  }

  /** Slots per key. */
  readonly limit: number;
  /** True when a refused `acquire` waits for a slot (the `wait` option). */
  get waits(): boolean {
    return this.waiting !== undefined;
  }
  /** A slot's lifetime without renewal, in ms. */
  readonly ttlMs: number;
  /** The key namespace in the store. */
  readonly prefix: string;
  /** The store in use. */
  readonly store: Store;
  /** Whether held slots are renewed every ttl/3. */
  readonly heartbeat: boolean;
  /** Shadow mode (the `shadow` option): an acquire with no slot free is admitted holding nothing, marked `shadowLimited`. */
  readonly shadow: boolean;
  private readonly failureMode: StoreFailureMode;
  private readonly waiting: SlotWaiting | undefined;

  /** @param options - see {@link ConcurrencyLimiterOptions}; invalid ones throw a FloodgateError. */
  constructor(options: ConcurrencyLimiterOptions) {
    assertKnownOptions(options, OPTION_NAMES, 'ConcurrencyLimiter');
    const o = options;
    this.limit = wholeNumber(o.limit, 'ConcurrencyLimiter limit', {
      min: 1,
      code: ErrorCode.INVALID_LIMIT,
      expected: 'a positive whole number',
    });
    const ttlMs = parseDuration(o.ttl ?? '30s', 'ConcurrencyLimiter ttl');
    if (ttlMs > MAX_SLOT_TTL_MS) {
      invalid(ErrorCode.INVALID_DURATION, 'ConcurrencyLimiter ttl', `at most ${MAX_SLOT_TTL_MS} ms (about 24 days)`, o.ttl);
    }
    this.ttlMs = ttlMs;
    this.heartbeat = optionalBoolean(o.heartbeat, 'ConcurrencyLimiter heartbeat') ?? true;
    if (o.store !== undefined && !isStore(o.store)) {
      invalid(
        ErrorCode.INVALID_STORE,
        'ConcurrencyLimiter store',
        'a Store, e.g. new MemoryStore() or new RedisStore({ client })',
        o.store,
      );
    }
    const store = o.store ?? new MemoryStore();
    if (!hasSlots(store)) {
      throw new FloodgateError(
        ErrorCode.INVALID_STORE,
        `ConcurrencyLimiter store must support concurrency slots (acquireSlot, releaseSlot and renewSlot), as MemoryStore, RedisStore and ClusterStore do; the ${store.name} store does not.`,
      );
    }
    this.store = store;
    if (o.prefix !== undefined && (typeof o.prefix !== 'string' || o.prefix.length === 0)) {
      invalid(ErrorCode.INVALID_OPTIONS, 'ConcurrencyLimiter prefix', 'a non-empty string', o.prefix);
    }
    this.prefix = o.prefix ?? `fg:concurrency:${this.limit}`;
    this.failureMode = oneOf(o.onStoreFailure ?? 'reject', 'ConcurrencyLimiter onStoreFailure', FAILURE_MODES);
    warnAboutTtl(ttlMs, this.heartbeat, o.ttl);
    this.shadow = parseShadow(o, 'ConcurrencyLimiter');
    const wait = parseWait(o.wait);
    this.waiting = wait === undefined ? undefined : new SlotWaiting(this.limit, wait);
  }

  /**
   * Takes a slot of `key` when fewer than `limit` are held. When allowed,
   * call `release()` once the work ends (in a `finally`): until then the
   * slot counts against the key, renewed by the heartbeat.
   * @param options - `signal`: abandons the wait when it aborts (see {@link WaitCallOptions})
   * @throws FloodgateError INVALID_KEY for an empty key (as a rejection), the store's failure with `onStoreFailure: "reject"`,
   *   or ABORTED when `signal` aborted while the call waited
   */
  async acquire(key: string, options?: WaitCallOptions): Promise<Slot> {
    assertKey(key);
    const signal = callSignal(options, 'acquire');
    if (this.shadow) return shadowSlot(await this.acquireOnce(key));
    return this.waiting === undefined ? this.acquireOnce(key) : this.waiting.acquire(key, () => this.acquireOnce(key), signal);
  }

  private async acquireOnce(key: string): Promise<Slot> {
    const storeKey = `${this.prefix}:${key}`;
    const owner = newOwner();
    let answer: SlotAcquisition;
    try {
      answer = await this.store.acquireSlot!(storeKey, this.limit, owner, this.ttlMs);
    } catch (error) {
      const failure = toStoreError(error, this.store.name);
      if (!isStoreFailure(failure) || this.failureMode === 'reject') throw failure;
      const open = this.failureMode === 'fail-open';
      return unheld({ allowed: open, inFlight: 0, limit: this.limit, retryAfterMs: open ? 0 : 1000, source: this.failureMode });
    }
    const decided = {
      allowed: answer.admitted,
      inFlight: answer.inUse,
      limit: this.limit,
      retryAfterMs: answer.retryAfterMs,
      source: 'store' as const,
    };
    return answer.admitted
      ? new HeldSlot(this.store, this.ttlMs, this.heartbeat, (call) => this.withFailureMode(call), storeKey, owner, decided)
      : unheld(decided);
  }

  /**
   * A store call of a held slot (release or renew): its answer, or false when
   * the store failed and the failure mode is not `reject` (the slot then
   * comes back at its expiry, as a crashed holder's would).
   */
  private async withFailureMode(call: () => Promise<boolean>): Promise<boolean> {
    try {
      return await call();
    } catch (error) {
      const failure = toStoreError(error, this.store.name);
      if (!isStoreFailure(failure) || this.failureMode === 'reject') throw failure;
      return false;
    }
  }
}

type Decided = Pick<Slot, 'allowed' | 'inFlight' | 'limit' | 'retryAfterMs' | 'source'>;

/** A shadow limiter's answer: a refusal becomes an admission that holds nothing (see the `shadow` option). */
function shadowSlot(slot: Slot): Slot {
  return slot.allowed ? slot : { ...slot, allowed: true, shadowLimited: true };
}

/** A slot handle that holds nothing: a refusal, or a decision made while the store failed. */
function unheld(decided: Decided): Slot {
  const no = (): Promise<boolean> => Promise.resolve(false);
  return { ...decided, release: no, renew: no };
}

/** A slot taken in the store: its owner id, its heartbeat, and the calls that act on it. */
class HeldSlot implements Slot {
  readonly allowed: boolean;
  readonly inFlight: number;
  readonly limit: number;
  readonly retryAfterMs: number;
  readonly source: 'store';
  private released: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** A heartbeat renewal still waiting for the store: the next beat skips, so a slow store never piles renewals up. */
  private beating = false;

  constructor(
    private readonly store: Store,
    private readonly ttlMs: number,
    heartbeat: boolean,
    /** Runs a store call under the limiter's failure mode. */
    private readonly withFailureMode: (call: () => Promise<boolean>) => Promise<boolean>,
    private readonly key: string,
    private readonly owner: string,
    decided: Decided,
  ) {
    this.allowed = decided.allowed;
    this.inFlight = decided.inFlight;
    this.limit = decided.limit;
    this.retryAfterMs = decided.retryAfterMs;
    this.source = 'store';
    if (heartbeat) {
      this.timer = setInterval(() => this.beat(), Math.max(1, Math.floor(ttlMs / 3)));
      this.timer.unref();
    }
  }

  release(): Promise<boolean> {
    if (this.released !== undefined) return this.released.then(() => false);
    this.stop();
    this.released = this.withFailureMode(() => this.store.releaseSlot!(this.key, this.owner));
    return this.released;
  }

  renew(): Promise<boolean> {
    if (this.released !== undefined) return Promise.resolve(false);
    return this.withFailureMode(() => this.store.renewSlot!(this.key, this.owner, this.ttlMs)).then((renewed) => {
      // Expired (and perhaps taken by another caller): nothing left to keep alive.
      if (!renewed) this.stop();
      return renewed;
    });
  }

  /** One heartbeat: a failed renewal is retried at the next beat (the slot may still be alive). */
  private beat(): void {
    if (this.beating) return;
    this.beating = true;
    this.renew()
      .catch(() => {})
      .finally(() => (this.beating = false));
  }

  private stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** The one-time warnings for a ttl that is probably not what was meant. */
function warnAboutTtl(ttlMs: number, heartbeat: boolean, written: Duration | undefined): void {
  if (ttlMs < SHORT_TTL_MS) {
    const seconds = typeof written === 'number' ? ` (a bare number counts milliseconds: for ${ttlMs} seconds write ttl: '${ttlMs}s')` : '';
    warnOnce(
      WarningCode.SLOT_TTL_SHORT,
      `ConcurrencyLimiter ttl is ${ttlMs} ms${seconds}. A holder that pauses longer than that (a GC pause, a slow store call, a busy event loop) loses its slot while still working, and another caller takes it, so more than limit run at once. Use a ttl of a few seconds or more; the heartbeat keeps live slots held.`,
      String(ttlMs),
    );
  }
  if (!heartbeat && ttlMs > LONG_UNRENEWED_TTL_MS) {
    warnOnce(
      WarningCode.HEARTBEAT_OFF_LONG_TTL,
      `ConcurrencyLimiter has heartbeat: false and ttl ${ttlMs} ms: a holder that crashes keeps its slot taken for up to ${Math.round(ttlMs / 60_000)} minutes. Leave heartbeat on (the default) with a short ttl such as '30s', which brings a crashed holder's slot back within 40 s and keeps live ones held.`,
      String(ttlMs),
    );
  }
}

/** The mark of a ConcurrencyLimiter of either build (see its Symbol.hasInstance). */
const CONCURRENCY_LIMITER_BRAND = Symbol.for('floodgate.ConcurrencyLimiter');
// On the prototype, so every instance carries it without a per-instance field.
Object.defineProperty(ConcurrencyLimiter.prototype, CONCURRENCY_LIMITER_BRAND, { value: true });
