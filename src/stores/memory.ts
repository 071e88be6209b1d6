/** MemoryStore: counters in this process, O(1) per decision, LRU-bounded, expired keys reclaimed lazily and by an unref'd sweep. */
import { applyOperation, type KeyState } from '../algorithms/index.js';
import { systemClock, type Clock } from '../clock.js';
import { describe } from '../duration.js';
import { ErrorCode, FloodgateError } from '../errors.js';
import type { Operation, Outcome } from '../policy.js';
import { assertKnownOptions } from '../validate.js';
import type { Store } from './store.js';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Most keys held at once; when full, the least recently used key is
   * forgotten (its usage is lost, so it may be admitted again early).
   * Default 100 000.
   */
  maxKeys?: number;
  /** How often the background sweep drops expired keys, in ms. Default 30 000; 0 disables it. */
  sweepIntervalMs?: number;
  /** Time source; inject a {@link ManualClock} in tests. Default `Date.now`. */
  clock?: Clock;
}

interface Entry {
  state: KeyState;
  expiresAt: number;
}

const OPTION_NAMES = ['maxKeys', 'sweepIntervalMs', 'clock'] as const;

/** The largest interval setInterval honours; above it node fires every millisecond instead. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Checks the options a MemoryStore and a ClusterStorePrimary (which holds
 * one) share, naming `owner` in the messages.
 * @throws FloodgateError INVALID_OPTIONS or INVALID_DURATION
 */
export function memoryOptions(
  options: Pick<MemoryStoreOptions, 'maxKeys' | 'sweepIntervalMs' | 'clock'>,
  owner: string,
): { maxKeys: number; sweepIntervalMs: number; clock: Clock } {
  const maxKeys = options.maxKeys ?? 100_000;
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} maxKeys must be a positive integer; got ${describe(maxKeys)}.`);
  }
  const sweepIntervalMs = options.sweepIntervalMs ?? 30_000;
  if (!Number.isSafeInteger(sweepIntervalMs) || sweepIntervalMs < 0 || sweepIntervalMs > MAX_TIMER_MS) {
    throw new FloodgateError(
      ErrorCode.INVALID_DURATION,
      `${owner} sweepIntervalMs must be a whole number of ms from 0 (no sweep) to ${MAX_TIMER_MS}; got ${describe(sweepIntervalMs)}.`,
    );
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} clock must be a function returning ms; got ${describe(options.clock)}.`);
  }
  return { maxKeys, sweepIntervalMs, clock: options.clock ?? systemClock };
}

/**
 * A store in this process's memory. Synchronous inside, so every operation is
 * atomic; the Map's insertion order doubles as the LRU order.
 */
export class MemoryStore implements Store {
  /** @inheritDoc */
  readonly name = 'memory';
  private readonly entries = new Map<string, Entry>();
  private readonly maxKeys: number;
  private readonly clock: Clock;
  private sweeper: NodeJS.Timeout | undefined;

  /** @param options - see {@link MemoryStoreOptions} */
  constructor(options: MemoryStoreOptions = {}) {
    assertKnownOptions(options, OPTION_NAMES, 'MemoryStore');
    const { maxKeys, sweepIntervalMs, clock } = memoryOptions(options, 'MemoryStore');
    this.maxKeys = maxKeys;
    this.clock = clock;
    if (sweepIntervalMs > 0) {
      this.sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
      this.sweeper.unref();
    }
  }

  /** Number of keys held (expired ones not yet reclaimed included). */
  get size(): number {
    return this.entries.size;
  }

  /** @inheritDoc */
  apply(operation: Operation): Promise<Outcome> {
    return Promise.resolve(this.applySync(operation, this.clock()));
  }

  /** @inheritDoc */
  applyNow(operation: Operation): Outcome {
    return this.applySync(operation, this.clock());
  }

  /**
   * Applies an operation synchronously at time `now`. The cluster store's
   * primary calls this directly, batching many operations per message.
   */
  applySync(operation: Operation, now: number): Outcome {
    const { key } = operation;
    const entry = this.entries.get(key);
    const current = entry && entry.expiresAt > now ? entry.state : undefined;
    const applied = applyOperation(current, operation.kind, operation.amount, operation.policy, now);
    if (entry) this.entries.delete(key);
    if (applied.state !== undefined) {
      this.entries.set(key, { state: applied.state, expiresAt: applied.expiresAt });
      if (this.entries.size > this.maxKeys) {
        // Map iteration starts at the least recently written key.
        this.entries.delete(this.entries.keys().next().value!);
      }
    }
    return applied.outcome;
  }

  /** Drops every expired key now; the background sweep calls this. */
  sweep(): void {
    const now = this.clock();
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= now) this.entries.delete(key);
    }
  }

  /** Forgets every key. */
  clear(): void {
    this.entries.clear();
  }

  /** @inheritDoc */
  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
