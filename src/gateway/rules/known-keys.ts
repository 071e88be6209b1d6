/** A rule's allow list kept in a Redis set. */
/**
 * Each key looked up once, cached for a short time, lookups coalesced, batched and bounded so a flood of made-up keys
 * cannot become a flood of Redis calls.
 */
import type { KnownKeysSettings } from '../config/settings.js';
import type { KnownKeyChanges } from './known-key-changes.js';

/** The Redis commands the allow list needs (an ioredis client has them). */
export interface KnownKeysClient {
  /** SMISMEMBER: 1 or 0 per member, in order (Redis 6.2+). */
  smismember(key: string, ...members: string[]): Promise<number[]>;
}

/**
 * What the allow list says of a key: known, not known, or no answer: Redis
 * failed or timed out (`unavailable`), or too many lookups are under way
 * (`busy`).
 */
export type KnownKeyAnswer = 'known' | 'unknown' | 'unavailable' | 'busy';

/**
 * Redis calls in flight at once per rule. Keys asked while both are out wait
 * and go together in the next call, so under a flood each call carries many
 * keys instead of each key making a call.
 */
const CALLS_IN_FLIGHT = 2;
/** Most keys in one SMISMEMBER: a larger batch would hold Redis for longer than a store call should. */
const BATCH = 500;

/**
 * Characters of key per entry the unknown table holds on average, all its
 * keys together: made-up keys come from clients and may be as long as a
 * request head allows (16 KiB by default), so `cacheSize` entries alone
 * could hold 10 000 × 16 KiB. The known table needs no such bound: only
 * keys in the set get there.
 */
export const UNKNOWN_CHARS_PER_ENTRY = 128;

interface Lookup {
  readonly key: string;
  readonly promise: Promise<KnownKeyAnswer>;
  resolve(answer: KnownKeyAnswer): void;
}

/**
 * The allow list of one rule, read from a Redis set through a bounded cache.
 *
 * A key is looked up with SMISMEMBER and its answer kept for `knownForMs`
 * (known) or `unknownForMs` (not known), each kind in its own table of at
 * most `cacheSize` keys, the oldest entry dropped first: a flood of made-up
 * keys fills the unknown table and never pushes a known key out. Concurrent
 * asks for one key share one lookup; keys wait for a call slot in one batch;
 * at most `maxLookups` keys are under way, and one more is answered `busy`
 * at once rather than queued. A call that fails or outlives `timeoutMs`
 * answers `unavailable` for its keys and frees its slot, so nothing waits
 * on a stalled Redis; nothing is cached from it.
 */
export class KnownKeys {
  private readonly known = new Map<string, number>();
  private readonly unknown = new Map<string, number>();
  /** Characters of the keys in {@link unknown}. */
  private unknownChars = 0;
  /** Every key under way (waiting or sent), for coalescing. */
  private readonly underWay = new Map<string, Lookup>();
  /** Keys waiting for a call slot, in order. */
  private waiting: Lookup[] = [];
  private calls = 0;
  private flushScheduled = false;

  /**
   * @param client - the gateway's Redis client
   * @param settings - the set and the cache's bounds
   * @param timeoutMs - longest wait for one call (the store's timeout)
   * @param report - told of each failed or late call (the gateway logs them, throttled)
   * @param changes - changes heard on pub/sub, which make a cached answer stale at once; undefined to rely on the cache times
   * @param now - the clock, ms
   */
  constructor(
    private readonly client: KnownKeysClient,
    readonly settings: KnownKeysSettings,
    private readonly timeoutMs: number,
    private readonly report: (error: unknown) => void,
    private readonly changes?: KnownKeyChanges,
    private readonly now: () => number = Date.now,
  ) {
    changes?.follow(settings.set);
  }

  /** Keys cached now: known and unknown, each at most `cacheSize`. */
  get cached(): { known: number; unknown: number } {
    return { known: this.known.size, unknown: this.unknown.size };
  }

  /** Characters of the keys cached as unknown (at most `cacheSize` × {@link UNKNOWN_CHARS_PER_ENTRY}). */
  get cachedUnknownChars(): number {
    return this.unknownChars;
  }

  /** Keys under way now (at most `maxLookups`). */
  get lookups(): number {
    return this.underWay.size;
  }

  /** What the list says of `key`: from the cache synchronously, else through one (shared) lookup that never rejects. */
  check(key: string): KnownKeyAnswer | Promise<KnownKeyAnswer> {
    const t = this.now();
    const { set, knownForMs, unknownForMs } = this.settings;
    const knownUntil = this.known.get(key);
    if (knownUntil !== undefined) {
      if (knownUntil > t && this.changes?.changedSince(set, key, knownUntil - knownForMs) !== true) return 'known';
      this.known.delete(key);
    }
    const unknownUntil = this.unknown.get(key);
    if (unknownUntil !== undefined) {
      if (unknownUntil > t && this.changes?.changedSince(set, key, unknownUntil - unknownForMs) !== true) return 'unknown';
      this.forgetUnknown(key);
    }
    const pending = this.underWay.get(key);
    if (pending !== undefined) return pending.promise;
    if (this.underWay.size >= this.settings.maxLookups) return 'busy';
    let resolve!: (answer: KnownKeyAnswer) => void;
    const promise = new Promise<KnownKeyAnswer>((r) => (resolve = r));
    const lookup: Lookup = { key, promise, resolve };
    this.underWay.set(key, lookup);
    this.waiting.push(lookup);
    // After this turn's other requests have asked too, so they share the call.
    if (!this.flushScheduled && this.calls < CALLS_IN_FLIGHT) {
      this.flushScheduled = true;
      setImmediate(this.flush);
    }
    return promise;
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    while (this.calls < CALLS_IN_FLIGHT && this.waiting.length > 0) {
      const batch = this.waiting.length <= BATCH ? this.waiting : this.waiting.slice(0, BATCH);
      this.waiting = this.waiting.length <= BATCH ? [] : this.waiting.slice(BATCH);
      this.send(batch);
    }
  };

  /** Caches `key` as unknown until `until`; the oldest entries go while the table is over `cacheSize` or its characters over budget. */
  private rememberUnknown(key: string, until: number): void {
    this.forgetUnknown(key);
    const budget = this.settings.cacheSize * UNKNOWN_CHARS_PER_ENTRY;
    // A key longer than the whole budget is not cached: it would only push every other entry out.
    if (key.length > budget) return;
    while (this.unknown.size > 0 && (this.unknown.size >= this.settings.cacheSize || this.unknownChars + key.length > budget))
      this.forgetUnknown(this.unknown.keys().next().value!);
    this.unknown.set(key, until);
    this.unknownChars += key.length;
  }

  private forgetUnknown(key: string): void {
    if (this.unknown.delete(key)) this.unknownChars -= key.length;
  }

  private send(batch: readonly Lookup[]): void {
    this.calls += 1;
    // Answers are dated from when they were asked: a change heard while the call was out makes them stale.
    const askedAt = this.now();
    let done = false;
    const finish = (answers: readonly number[] | undefined, error?: unknown): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.calls -= 1;
      if (answers === undefined) this.report(error);
      const until = askedAt;
      for (let i = 0; i < batch.length; i += 1) {
        const lookup = batch[i]!;
        this.underWay.delete(lookup.key);
        const answer = answers === undefined ? 'unavailable' : answers[i] === 1 ? 'known' : 'unknown';
        if (answer === 'known') remember(this.known, lookup.key, until + this.settings.knownForMs, this.settings.cacheSize);
        else if (answer === 'unknown' && this.settings.unknownForMs > 0)
          this.rememberUnknown(lookup.key, until + this.settings.unknownForMs);
        lookup.resolve(answer);
      }
      if (this.waiting.length > 0) this.flush();
    };
    const timer = setTimeout(
      () =>
        finish(
          undefined,
          new Error(
            `the allow list ${this.settings.set} did not answer within ${this.timeoutMs} ms (store.timeout); keys not cached are refused with 503.`,
          ),
        ),
      this.timeoutMs,
    );
    timer.unref();
    let call: Promise<number[]>;
    try {
      call = this.client.smismember(this.settings.set, ...batch.map((l) => l.key));
    } catch (error) {
      finish(undefined, error);
      return;
    }
    call.then(
      (answers) =>
        Array.isArray(answers) && answers.length === batch.length
          ? finish(answers)
          : finish(undefined, new Error(`SMISMEMBER ${this.settings.set} answered ${JSON.stringify(answers)}; is it a set?`)),
      (error: unknown) =>
        finish(
          undefined,
          /unknown command/i.test(String((error as Error | undefined)?.message))
            ? new Error(`allowList: { redis } needs Redis 6.2 or later (SMISMEMBER); this server answered: ${(error as Error).message}`)
            : error,
        ),
    );
  }
}

/** Caches `key` until `until`, dropping the oldest entry when the table is full (a re-added key moves to the end). */
function remember(table: Map<string, number>, key: string, until: number, size: number): void {
  table.delete(key);
  if (table.size >= size) table.delete(table.keys().next().value!);
  table.set(key, until);
}
