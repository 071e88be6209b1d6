/** KnownRefusals: the worker-side memory of keys the primary said are refused until a given time. */
/**
 * Their consumes are refused without IPC.
 */
import type { Clock } from '../../core/clock.js';
import { OldestEntries } from '../../util/oldest-entries.js';
import { samePolicy, type Operation, type Outcome, type Policy } from '../../core/policy.js';

/**
 * Default of ClusterStoreOptions.knownRefusals: the in-memory block list's
 * default size. A transport's client also leases at most this many keys.
 */
export const KNOWN_REFUSALS = 10_000;

/** One key known to be refused. Times are absolute, in the basis' clock. */
interface Refusal {
  /** The policy the primary decided under; a call under another one must still reach the primary (conflict check). */
  readonly policy: Policy;
  /** The clock the times are read on: a store's own clock, or undefined for this process's `performance.now()`. */
  readonly basis: Clock | undefined;
  /** Until when no unit is available (the outcome's emptyMs): every consume and peek is refused until then. */
  readonly emptyAt: number;
  /** When the quota is whole again (resetMs). */
  readonly resetAt: number;
  /** The cost the hinted outcome's retryAfterMs was computed for. */
  readonly cost: number;
  /** When that cost could succeed (retryAfterMs). */
  readonly retryAt: number;
  /**
   * True when every cost is refused until emptyAt, exactly: fixed windows
   * (every unit comes back at the window's end) and blocks (a block refuses
   * any cost until it ends). Otherwise only costs 1 and `cost` are answered.
   */
  readonly anyCost: boolean;
}

/**
 * What a worker knows to be refused, so that consumes of a key the primary
 * reported exhausted (or blocked) are refused here, without IPC, until the
 * key can admit again.
 *
 * It only ever refuses, so it cannot admit more than the primary would; it
 * must not refuse longer than the primary would, which is why the primary
 * invalidates keys (see `invalidates` in protocol.ts) and why entries are read on the
 * clock they were learned on, from a time no later than the primary's
 * decision. Bounded like the MemoryStore: at most `maxKeys` entries, the
 * least recently learned dropped first; expired entries are dropped when
 * read; no timer per key.
 */
export class KnownRefusals {
  /** Most keys held; 0 keeps nothing. */
  maxKeys: number;
  private readonly entries = new Map<string, Refusal>();
  /** The first-learned key, found without a scan (every learn stores a new entry, as OldestEntries needs). */
  private readonly oldest = new OldestEntries(this.entries);
  /**
   * Keys with an invalidating operation of this process not answered yet,
   * and how many. Their hints are ignored meanwhile: an answer computed
   * before that operation reached the primary would be stale by the time it
   * arrives, and this process's own later calls must see its own reward.
   */
  private readonly held = new Map<string, number>();
  /**
   * The key last answered, and its entry. A refused key is usually refused
   * again and again (that is why it is known), and comparing the caller's
   * freshly built key with this one is cheaper than hashing it for the Map.
   */
  private lastKey: string | undefined;
  private lastEntry: Refusal | undefined;

  /** @param maxKeys - most keys held; 0 keeps nothing */
  constructor(maxKeys: number) {
    this.maxKeys = maxKeys;
  }

  /**
   * The outcome of a consume or peek of a key known to be refused, read on
   * `clock` (this process's `performance.now()` when undefined), or
   * undefined when the primary must decide.
   */
  answer(operation: Operation, clock: Clock | undefined): Outcome | undefined {
    // Most calls are about keys not refused: no hashing when nothing is
    // known, and no clock read unless the key is.
    if (this.entries.size === 0) return undefined;
    let entry: Refusal | undefined;
    if (operation.key === this.lastKey) {
      entry = this.lastEntry!;
    } else {
      entry = this.entries.get(operation.key);
      if (entry === undefined) return undefined;
      this.lastKey = operation.key;
      this.lastEntry = entry;
    }
    if (entry.basis !== clock || !samePolicy(entry.policy, operation.policy)) return undefined;
    const now = clock ? clock() : performance.now();
    if (!(now < entry.emptyAt)) {
      this.delete(operation.key);
      return undefined;
    }
    const cost = operation.kind === 'consume' ? operation.amount : 1;
    let retryAt: number;
    if (cost === 1 || entry.anyCost) retryAt = entry.emptyAt;
    else if (cost === entry.cost) retryAt = entry.retryAt;
    else return undefined;
    return {
      allowed: false,
      remaining: 0,
      resetMs: left(entry.resetAt, now),
      retryAfterMs: left(retryAt, now),
      emptyMs: left(entry.emptyAt, now),
    };
  }

  /**
   * Remembers that `operation`'s key is refused for `ms` from `base` (read on
   * `basis`), with the numbers of `outcome`, unless an invalidating
   * operation of this process on the key is still pending.
   */
  learn(operation: Operation, outcome: Outcome, ms: number, base: number, basis: Clock | undefined): void {
    if (this.maxKeys === 0) return;
    const { key, kind, policy } = operation;
    if (this.held.has(key)) return;
    const cost = kind === 'consume' ? operation.amount : 1;
    const entry: Refusal = {
      policy,
      basis,
      emptyAt: base + ms,
      resetAt: base + outcome.resetMs,
      cost,
      retryAt: base + outcome.retryAfterMs,
      anyCost: policy.algorithm === 'fixed-window' || policy.blockMs > 0 || kind === 'block',
    };
    // Re-inserted, so Map order is the order learned: the first key is the one to drop.
    this.delete(key);
    this.entries.set(key, entry);
    if (this.entries.size > this.maxKeys) this.delete(this.oldest.peek()![0]);
  }

  /** An invalidating operation on `key` is being sent: forget the key, and ignore hints for it until {@link release}. */
  hold(key: string): void {
    this.delete(key);
    this.held.set(key, (this.held.get(key) ?? 0) + 1);
  }

  /** That operation is answered (or failed). */
  release(key: string): void {
    const count = this.held.get(key) ?? 0;
    if (count <= 1) this.held.delete(key);
    else this.held.set(key, count - 1);
  }

  /** Forgets one key (the primary invalidated it). */
  forget(key: string): void {
    this.delete(key);
  }

  /** Forgets every key (held operations stay held: they are still pending). */
  clear(): void {
    this.entries.clear();
    this.lastKey = undefined;
    this.lastEntry = undefined;
  }

  private delete(key: string): void {
    if (this.entries.delete(key) && key === this.lastKey) {
      this.lastKey = undefined;
      this.lastEntry = undefined;
    }
  }
}

/** ms from `now` until `at`, whole and at least 1 while `at` is ahead (Infinity stays Infinity). */
function left(at: number, now: number): number {
  return at === Infinity ? Infinity : Math.max(0, Math.ceil(at - now));
}
