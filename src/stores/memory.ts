/** MemoryStore: counters in this process, O(1) per decision, bounded. */
/**
 * Bounded by LRU eviction or an overflow sketch; expired keys are reclaimed lazily and by an unref'd sweep.
 */
import { performance } from 'node:perf_hooks';
import { applyComposite, type CompositePart } from '../algorithms/composite.js';
import { applyOperation, type Applied, type KeyState } from '../algorithms/index.js';
import { calendarLabel, periodEnd } from '../core/calendar-window.js';
import { systemClock, type Clock } from '../core/clock.js';
import { ErrorCode } from '../core/errors.js';
import { limitArgument, policyScope, type Operation, type Outcome, type Policy } from '../core/policy.js';
import { assertKnownOptions, invalid, MAX_TIMER_MS, oneOf, wholeNumber } from '../core/validate.js';
import { OverflowSketch, SKETCH_ROWS } from './overflow-sketch.js';
import { OldestEntries } from '../util/oldest-entries.js';
import { slotCallError, type SlotAcquisition } from '../core/slots.js';
import { SlotTable } from './slot-table.js';
import type { Store } from './store.js';
import {
  adoptRestored,
  checkSnapshot,
  shapeOf,
  SNAPSHOT_FORMAT,
  SNAPSHOT_VERSION,
  type MemorySnapshot,
  type SnapshotEntry,
  type SnapshotSketch,
  type StateShape,
} from './memory-snapshot.js';

/** What a full {@link MemoryStore} does with a key it holds no state for. */
export type OnFull = 'evict' | 'overflow';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Most keys held at once. What happens when a new key finds them all
   * live is `onFull`'s choice. Default 100 000.
   */
  maxKeys?: number;
  /**
   * When `maxKeys` live keys are held and another key comes:
   * - `'evict'` (default): a least recently used key is forgotten (its
   *   usage is lost, so it may be admitted again early); approximately LRU:
   *   a key used again while in the younger half of the table keeps its place;
   * - `'overflow'`: no live key is ever forgotten. Expired keys are reclaimed
   *   first; if none is free, the new key is decided in a bounded count-min
   *   sketch of `overflowCells` cells per policy and limiter prefix, which may refuse it early
   *   but never admits it over its limit. A reward or reset of a key held
   *   only in the sketch does nothing. Use it where keys come from clients.
   */
  onFull?: OnFull;
  /** With `onFull: 'overflow'`: cells of the sketch of each policy and limiter prefix (split into 4 rows). Default 16 384. */
  overflowCells?: number;
  /** How often the background sweep drops expired keys, in ms. Default 30 000; 0 disables it. */
  sweepIntervalMs?: number;
  /** Time source; inject a {@link ManualClock} in tests. Default `Date.now`. */
  clock?: Clock;
}

interface Entry {
  state: KeyState;
  expiresAt: number;
  /** The store's insertion count when the key was put at the young end of the table. */
  placed: number;
  /** Written in place since then: more recently used than its place in the table says. */
  rewritten: boolean;
  /** Restored from a snapshot and not used since: the algorithm its state is of (a policy of another starts afresh). */
  restored: StateShape | undefined;
}

const OPTION_NAMES = ['maxKeys', 'sweepIntervalMs', 'clock', 'onFull', 'overflowCells'] as const;

/** Most sketches (policy and prefix) in one store; an operation under yet another that finds the table full is refused. */
const MAX_SKETCHES = 256;
/**
 * Least time between two full sweeps a full table triggers (real ms): a flood
 * of new keys must not turn an O(keys) sweep per request into a CPU attack.
 */
const FULL_SWEEP_GAP_MS = 1000;
/**
 * Most oldest keys an eviction or reclaim moves to the young end in one call because they were written in place
 * since they were put there (see write): amortised, each move stands for an earlier write, and the bound keeps one
 * call from moving a whole table.
 */
const SECOND_CHANCES = 16;

/**
 * Checks the options a MemoryStore and a ClusterStorePrimary (which holds
 * one) share, naming `owner` in the messages.
 * @throws FloodgateError INVALID_OPTIONS or INVALID_DURATION
 */
export function memoryOptions(
  options: Pick<MemoryStoreOptions, 'maxKeys' | 'sweepIntervalMs' | 'clock' | 'onFull' | 'overflowCells'>,
  owner: string,
): { maxKeys: number; sweepIntervalMs: number; clock: Clock; onFull: OnFull; overflowCells: number } {
  const maxKeys = wholeNumber(options.maxKeys ?? 100_000, `${owner} maxKeys`, { min: 1, expected: 'a positive integer' });
  // Above the timer limit node fires every millisecond instead.
  const sweepIntervalMs = wholeNumber(options.sweepIntervalMs ?? 30_000, `${owner} sweepIntervalMs`, {
    max: MAX_TIMER_MS,
    code: ErrorCode.INVALID_DURATION,
    expected: `a whole number of ms from 0 (no sweep) to ${MAX_TIMER_MS}`,
  });
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    invalid(ErrorCode.INVALID_OPTIONS, `${owner} clock`, 'a function returning ms', options.clock);
  }
  const onFull = oneOf(options.onFull ?? 'evict', `${owner} onFull`, ['evict', 'overflow'] as const);
  const overflowCells = wholeNumber(options.overflowCells ?? 16_384, `${owner} overflowCells`, { min: SKETCH_ROWS, max: 2 ** 26 });
  return { maxKeys, sweepIntervalMs, clock: options.clock ?? systemClock, onFull, overflowCells };
}

/**
 * A store in this process's memory. Synchronous inside, so every operation is
 * atomic; the Map's insertion order doubles as the (approximate) LRU order.
 */
export class MemoryStore implements Store {
  /** @inheritDoc */
  readonly name = 'memory';
  private readonly entries = new Map<string, Entry>();
  /** The oldest key in the table, found without a scan (a key that moves gets a new Entry, as OldestEntries needs). */
  private readonly oldest = new OldestEntries(this.entries);
  /** Keys put at the young end of the table so far (an entry's `placed` is this count then). */
  private insertions = 0;
  private readonly maxKeys: number;
  private readonly clock: Clock;
  private readonly overflow: boolean;
  private readonly overflowCells: number;
  /** One sketch per policy and limiter prefix (its cells hold that policy's algorithm state), made when first needed. */
  private readonly sketches = new Map<string, OverflowSketch>();
  private lastFullSweep = -Infinity;
  private overflowed = 0;
  /** Concurrency slots, bounded by maxKeys on their own: held slots are never evicted for counters or the reverse. */
  readonly slots: SlotTable;
  private sweeper: NodeJS.Timeout | undefined;
  /** Sketches of a restored snapshot, by id, taken up when their policy first needs a sketch. */
  private savedSketches: Map<string, SnapshotSketch> | undefined;

  /** @param options - see {@link MemoryStoreOptions} */
  constructor(options: MemoryStoreOptions = {}) {
    assertKnownOptions(options, OPTION_NAMES, 'MemoryStore');
    const { maxKeys, sweepIntervalMs, clock, onFull, overflowCells } = memoryOptions(options, 'MemoryStore');
    this.maxKeys = maxKeys;
    this.clock = clock;
    this.overflow = onFull === 'overflow';
    this.overflowCells = overflowCells;
    this.slots = new SlotTable(maxKeys);
    if (sweepIntervalMs > 0) {
      this.sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
      this.sweeper.unref();
    }
  }

  /** Number of keys held (expired ones not yet reclaimed included). */
  get size(): number {
    return this.entries.size;
  }

  /** Operations decided in the overflow sketch (`onFull: 'overflow'`) since start: keys that found the table full. */
  get overflows(): number {
    return this.overflowed;
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
    let current = entry && entry.expiresAt > now ? entry.state : undefined;
    if (entry?.restored !== undefined) current = adoptRestored(entry, operation.policy, current);
    if (entry === undefined && this.overflow) {
      const sketch = this.sketchFor(operation.policy);
      if (this.entries.size >= this.maxKeys && !this.reclaim(now)) {
        this.overflowed++;
        return sketch === undefined ? refusal(operation.policy, now) : sketch.apply(operation, now);
      }
      // A key the sketch may have counted enters with its cell's usage, never afresh.
      if (sketch !== undefined && sketch.active(now)) current = sketch.seed(key, now);
    }
    const applied = applyOperation(current, operation.kind, operation.amount, operation.policy, now);
    this.write(key, entry, applied);
    return applied.outcome;
  }

  /** @inheritDoc */
  acquireSlot(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition> {
    const bad = slotCallError('MemoryStore', key, owner, ttlMs, limit);
    if (bad !== undefined) return Promise.reject(bad);
    return Promise.resolve(this.slots.acquire(key, limit, owner, ttlMs, this.clock()));
  }

  /** @inheritDoc */
  releaseSlot(key: string, owner: string): Promise<boolean> {
    const bad = slotCallError('MemoryStore', key, owner);
    if (bad !== undefined) return Promise.reject(bad);
    return Promise.resolve(this.slots.release(key, owner, this.clock()));
  }

  /** @inheritDoc */
  renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const bad = slotCallError('MemoryStore', key, owner, ttlMs);
    if (bad !== undefined) return Promise.reject(bad);
    return Promise.resolve(this.slots.renew(key, owner, ttlMs, this.clock()));
  }

  /** @inheritDoc */
  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    return Promise.resolve(this.consumeAllSync(operations, this.clock()));
  }

  /** @inheritDoc */
  consumeAllNow(operations: readonly Operation[]): Outcome[] {
    return this.consumeAllSync(operations, this.clock());
  }

  /**
   * Consumes every operation's amount or none, synchronously at time `now`
   * (`applyComposite`). With `onFull: 'overflow'`, a key that finds the table
   * full of live keys takes part through the overflow sketch: it is asked
   * first whether it admits (without spending), and spends only when every
   * part does; a refusing sketch part is refused there as a single consume is.
   */
  consumeAllSync(operations: readonly Operation[], now: number): Outcome[] {
    const n = operations.length;
    const parts: CompositePart[] = [];
    const inTable: number[] = [];
    let sketched: (OverflowSketch | undefined)[] | undefined;
    let sketchesFit = true;
    let fresh = 0;
    for (let i = 0; i < n; i++) {
      const operation = operations[i]!;
      const entry = this.entries.get(operation.key);
      let state = entry && entry.expiresAt > now ? entry.state : undefined;
      if (entry?.restored !== undefined) state = adoptRestored(entry, operation.policy, state);
      if (entry === undefined && this.overflow) {
        const sketch = this.sketchFor(operation.policy);
        if (this.entries.size + fresh >= this.maxKeys && !this.reclaim(now)) {
          this.overflowed++;
          (sketched ??= new Array<OverflowSketch | undefined>(n))[i] = sketch;
          // No sketch left for the policy: refused, as a single consume would be.
          if (sketch === undefined || !sketch.fits(operation, now)) sketchesFit = false;
          continue;
        }
        fresh++;
        // A key the sketch may have counted enters with its cell's usage, never afresh.
        if (sketch !== undefined && sketch.active(now)) state = sketch.seed(operation.key, now);
      }
      inTable.push(i);
      parts.push({ state, amount: operation.amount, policy: operation.policy });
    }
    if (sketched === undefined) {
      const { outcomes, writes } = applyComposite(parts, now);
      for (let i = 0; i < n; i++) this.writeApplied(operations[i]!.key, writes[i]!);
      return outcomes;
    }
    return this.consumeWithSketches(operations, now, parts, inTable, sketched, sketchesFit);
  }

  /** {@link consumeAllSync} when some parts are decided in the overflow sketch. */
  private consumeWithSketches(
    operations: readonly Operation[],
    now: number,
    parts: CompositePart[],
    inTable: number[],
    sketched: (OverflowSketch | undefined)[],
    sketchesFit: boolean,
  ): Outcome[] {
    const table = applyComposite(parts, now);
    const allowed = table.allowed && sketchesFit;
    const outcomes: Outcome[] = new Array(operations.length);
    inTable.forEach((i, j) => {
      const operation = operations[i]!;
      if (allowed || !table.outcomes[j]!.allowed) {
        outcomes[i] = table.outcomes[j]!;
        this.writeApplied(operation.key, table.writes[j]!);
      } else {
        // The table parts admitted but a sketch part refused: unspent.
        outcomes[i] = applyOperation(parts[j]!.state, 'peek', 0, operation.policy, now).outcome;
      }
    });
    for (let i = 0; i < operations.length; i++) {
      if (!(i in sketched)) continue;
      const operation = operations[i]!;
      const sketch = sketched[i];
      if (sketch === undefined) outcomes[i] = refusal(operation.policy, now);
      else if (allowed) {
        // Spent unconditionally: two parts' keys may share cells, and the first one's units must not refuse the second now.
        outcomes[i] = { ...sketch.apply({ ...operation, kind: 'penalty' }, now), allowed: true, retryAfterMs: 0 };
      } else if (!sketch.fits(operation, now)) outcomes[i] = sketch.apply(operation, now);
      else outcomes[i] = sketch.apply({ ...operation, kind: 'peek' }, now);
    }
    return outcomes;
  }

  /** Writes a composite part's new state, or leaves the key as it is for null. */
  private writeApplied(key: string, applied: Applied | null): void {
    if (applied !== null) this.write(key, this.entries.get(key), applied);
  }

  /**
   * Stores `applied` under `key` (held as `entry`, if held), evicting the least recently used key past maxKeys.
   *
   * A key in the younger half of the table (fewer than half its size of keys put after it) is written in place and
   * marked rewritten; only an older one moves to the young end, as a new Entry. Deleting and setting the key on
   * every write kept a long-lived Map's hash table full of holes that V8 rehashed away again and again, and a new
   * Entry per write. Eviction and reclaim give a rewritten oldest key a second chance (see {@link takeOldest}).
   */
  private write(key: string, entry: Entry | undefined, applied: Applied): void {
    if (applied.state === undefined) {
      if (entry !== undefined) this.entries.delete(key);
      return;
    }
    if (entry !== undefined && this.insertions - entry.placed <= this.entries.size >>> 1) {
      entry.state = applied.state;
      entry.expiresAt = applied.expiresAt;
      entry.rewritten = true;
      return;
    }
    if (entry !== undefined) this.entries.delete(key);
    this.place(key, applied.state, applied.expiresAt);
    if (this.entries.size > this.maxKeys) this.takeOldest(-Infinity, true);
  }

  /** Puts `key` at the young end of the table as a new Entry. */
  private place(key: string, state: KeyState, expiresAt: number, restored?: StateShape): void {
    this.entries.set(key, { state, expiresAt, placed: ++this.insertions, rewritten: false, restored });
  }

  /**
   * Drops the oldest key if it expired by `now`, or with `evict` whatever its expiry, and says whether it did. An
   * oldest key rewritten in place since it was put there was used more recently than its place says: it moves to the
   * young end (as a new Entry) and the next oldest is looked at, at most {@link SECOND_CHANCES} times and never past
   * the older half, so eviction never takes the key just written.
   */
  private takeOldest(now: number, evict: boolean): boolean {
    for (let chances = Math.min(SECOND_CHANCES, (this.entries.size - 1) >>> 1); ; chances--) {
      const [key, entry] = this.oldest.peek()!;
      if (entry.expiresAt <= now || (evict && (!entry.rewritten || chances === 0))) {
        this.oldest.shift();
        return true;
      }
      if (!entry.rewritten || chances === 0) return false;
      this.entries.delete(key);
      this.place(key, entry.state, entry.expiresAt, entry.restored);
    }
  }

  /** Frees one slot without forgetting live state: the oldest key if expired, else (rarely) a full sweep. */
  private reclaim(now: number): boolean {
    if (this.takeOldest(now, false)) return true;
    const mono = performance.now();
    if (mono - this.lastFullSweep < FULL_SWEEP_GAP_MS) return false;
    this.lastFullSweep = mono;
    this.sweep(now);
    return this.entries.size < this.maxKeys;
  }

  /**
   * The sketch of `policy` under its limiter's prefix (its scope), made on first use; undefined once
   * {@link MAX_SKETCHES} have one. Per prefix, not only per numbers: two limiters with equal numbers in one table
   * (two policies of a rule, two limits of a rate limit domain) would otherwise share cells, and a flood of made-up
   * keys under one would refuse the other's new keys. Keyed by the prefix's name, so a limiter made again (a reload)
   * finds its sketch.
   */
  private sketchFor(policy: Policy): OverflowSketch | undefined {
    const window = policy.calendar ? calendarLabel(policy.calendar) : policy.windowMs;
    const id = `${policy.algorithm}:${limitArgument(policy)}:${window}:${policy.blockMs}:${policyScope(policy) ?? ''}`;
    let sketch = this.sketches.get(id);
    if (sketch === undefined && this.sketches.size < MAX_SKETCHES) {
      sketch = new OverflowSketch(this.overflowCells, policy);
      this.sketches.set(id, sketch);
      const saved = this.savedSketches?.get(id);
      if (saved !== undefined) {
        this.savedSketches!.delete(id);
        sketch.restore(saved, this.clock());
      }
    }
    return sketch;
  }

  /** Drops every expired key (as of `now`, default the store's clock); the background sweep calls this. */
  sweep(now: number = this.clock()): void {
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= now) this.entries.delete(key);
    }
    this.slots.sweep(now);
  }

  /**
   * The store's counters, blocks and overflow sketches as they are now (keys least recently used first), for
   * {@link MemoryStore.restore}; expired keys and concurrency slots are left out. Plain data: `encodeSnapshot` writes it
   * as text.
   */
  snapshot(): MemorySnapshot {
    const now = this.clock();
    const entries: SnapshotEntry[] = [];
    for (const [key, e] of this.entries) {
      if (e.expiresAt <= now) continue;
      const usage = e.state.usage ?? null;
      entries.push([key, e.restored ?? shapeOf(usage), usage, e.state.blockedUntil, Number.isFinite(e.expiresAt) ? e.expiresAt : null]);
    }
    const sketches: SnapshotSketch[] = [...(this.savedSketches?.values() ?? [])];
    for (const [id, sketch] of this.sketches) {
      const saved = sketch.snapshot(id, now);
      if (saved !== undefined) sketches.push(saved);
    }
    return { format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, takenAt: now, entries, sketches };
  }

  /**
   * A store made with `options` that holds what `snapshot` held: every key not yet expired by the new store's clock
   * (at most `maxKeys`, the most recently used), with its counts and blocks, and the overflow sketches (taken up
   * when their policy is next used, if `overflowCells` is unchanged). A restored key's state is used only by a policy
   * of the algorithm it was made by; under another, the key starts afresh (its block stays).
   * @throws FloodgateError INVALID_SNAPSHOT for a snapshot that is not one this floodgate reads; INVALID_OPTIONS as the constructor
   */
  static restore(snapshot: MemorySnapshot, options: MemoryStoreOptions = {}): MemoryStore {
    const saved = checkSnapshot(snapshot);
    const store = new MemoryStore(options);
    const now = store.clock();
    const live = saved.entries.filter((e) => (e[4] ?? Infinity) > now);
    for (const [key, shape, usage, blockedUntil, expiresAt] of live.slice(Math.max(0, live.length - store.maxKeys)))
      store.place(key, { usage: usage ?? undefined, blockedUntil }, expiresAt ?? Infinity, shape);
    if (saved.sketches.length > 0) store.savedSketches = new Map(saved.sketches.map((k) => [k.id, k]));
    return store;
  }

  /** Forgets every key, the overflow sketches and every concurrency slot. */
  clear(): void {
    this.entries.clear();
    this.sketches.clear();
    this.slots.clear();
  }

  /** @inheritDoc */
  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}

/** The answer for a full table when no sketch is left for the policy: refused for a window (to the period's end for a calendar one), the conservative choice. */
function refusal(policy: Policy, now: number): Outcome {
  const ms = policy.calendar ? periodEnd(policy.calendar, now) - now : policy.windowMs;
  return { allowed: false, remaining: 0, resetMs: ms, retryAfterMs: ms, emptyMs: ms };
}
