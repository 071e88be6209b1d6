/** The in-memory block list: keys known to be over their limit are refused from process memory. */
/**
 * They are refused without a store call.
 */
import { OldestEntries } from '../util/oldest-entries.js';
import { capacityOf, type OperationKind, type Outcome, type Policy } from '../core/policy.js';

/** How long after a block ends its first consume still counts as the key's return (see {@link BlockList.takeLapsed}). */
const LAPSE_MS = 1000;

/** Options of the in-memory block list. */
export interface BlockListOptions {
  /** Most keys held; the oldest entry is dropped past it. */
  maxKeys: number;
}

/**
 * Maps key → absolute ms until which it is refused. There is no timer per
 * key: expired entries are dropped when looked up, by a collection that runs
 * at most once a second while blocked keys are being looked up or while
 * inserts keep the list past a tenth of its bound.
 *
 * A key whose block a lookup found ended is remembered as lapsed, for a
 * second, until {@link takeLapsed} claims it: the limiter then holds back
 * later consumes of that key while the first turn's store calls are out (see
 * RateLimiter's probe). The lapsed map is bounded like the list and cleared
 * by each collection: losing an entry only costs that optimisation.
 */
export class BlockList {
  private readonly until = new Map<string, number>();
  /** The oldest block, found without a scan from the table's start. */
  private readonly oldest = new OldestEntries(this.until);
  /** key → when a lookup found its block over. */
  private readonly lapsed = new Map<string, number>();
  private readonly maxKeys: number;
  private readonly collectAbove: number;
  private nextCollect = 0;

  /** @param options - see {@link BlockListOptions} */
  constructor(options: BlockListOptions) {
    this.maxKeys = options.maxKeys;
    this.collectAbove = Math.max(1000, Math.floor(options.maxKeys / 10));
  }

  /** Number of entries (expired ones not yet collected included). */
  get size(): number {
    return this.until.size;
  }

  /** ms `key` stays blocked from `now`, or 0 when it is not blocked. */
  blockedFor(key: string, now: number): number {
    const end = this.until.get(key);
    if (end === undefined) return 0;
    if (end <= now) {
      this.until.delete(key);
      if (this.lapsed.size >= this.maxKeys) this.lapsed.clear();
      this.lapsed.set(key, now);
      return 0;
    }
    if (now >= this.nextCollect) this.collect(now);
    return end - now;
  }

  /** Blocks `key` for `ms` from `now` (Infinity: until removed). */
  add(key: string, ms: number, now: number): void {
    this.until.delete(key);
    this.until.set(key, now + ms);
    // At most once a second, like the lookups' collection: while a flood of distinct keys keeps the list
    // above a tenth of its bound with live blocks, a scan per insert would cost O(keys) per refusal.
    if (this.until.size > this.collectAbove && now >= this.nextCollect) this.collect(now);
    while (this.until.size > this.maxKeys) this.oldest.shift();
  }

  /** Unblocks `key`. */
  delete(key: string): void {
    this.until.delete(key);
    this.lapsed.delete(key);
  }

  /** Forgets every block (a key's policy changed, and what was learned under the old one no longer holds). */
  clear(): void {
    this.until.clear();
    this.lapsed.clear();
  }

  /**
   * True when a lookup (by a consume, a peek or consumeNow) found `key`'s
   * block over less than a second before `now`; forgets it either way.
   */
  takeLapsed(key: string, now: number): boolean {
    if (this.lapsed.size === 0) return false;
    const at = this.lapsed.get(key);
    if (at === undefined) return false;
    this.lapsed.delete(key);
    return now - at < LAPSE_MS;
  }

  /** Drops every expired entry, and the lapsed keys nobody claimed. */
  collect(now: number): void {
    this.nextCollect = now + 1000;
    for (const [key, end] of this.until) if (end <= now) this.until.delete(key);
    this.lapsed.clear();
  }
}

/** When the in-memory block holds a key: at `onConsumed` units used, for `durationMs` (undefined: until the store would admit again). */
export interface BlockRule {
  readonly onConsumed: number;
  readonly durationMs: number | undefined;
}

/** Feeds `list` from a store's answer to operation `kind` on `key` under `policy`, at `now`. */
export function learnBlock(
  list: BlockList,
  rule: BlockRule,
  policy: Policy,
  kind: OperationKind,
  key: string,
  outcome: Outcome,
  now: number,
): void {
  // onConsumed is set against the limiter's limit; a key whose override moves the limit moves the threshold with it,
  // so the block still starts the same number of units before the key's own limit.
  const moved = policy.base === undefined ? 0 : capacityOf(policy) - capacityOf(policy.base);
  if (capacityOf(policy) - outcome.remaining < rule.onConsumed + moved) {
    list.delete(key);
    return;
  }
  // With blockDuration, the consume that goes over the limit must reach the
  // store so the block is set there for every process; only a refused
  // consume (or an explicit block) proves the store holds the block.
  if (policy.blockMs > 0 && !(kind === 'block' || (kind === 'consume' && !outcome.allowed))) return;
  const ms = rule.durationMs ?? (outcome.emptyMs > 0 ? outcome.emptyMs : outcome.resetMs);
  if (ms > 0) list.add(key, ms, now);
}
