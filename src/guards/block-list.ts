/** The in-memory block list (seed 000): keys known to be over their limit are refused from process memory, without a store call. */

/** Options of the in-memory block list. */
export interface BlockListOptions {
  /** Most keys held; the oldest entry is dropped past it. */
  maxKeys: number;
}

/**
 * Maps key → absolute ms until which it is refused. There is no timer per
 * key: expired entries are dropped when looked up, by a collection that runs
 * at most once a second while blocked keys are being looked up, and when an
 * insert takes the list past a tenth of its bound.
 *
 * A key whose block ended when it was looked up is remembered as lapsed
 * until {@link takeLapsed} claims it, so the limiter can make the first store
 * call after a block the only one in flight for that key (see
 * RateLimiter's lapse probe). The lapsed set is bounded like the list and
 * cleared by each collection: losing an entry only costs that optimisation.
 */
export class BlockList {
  private readonly until = new Map<string, number>();
  private readonly lapsed = new Set<string>();
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
      this.lapsed.add(key);
      return 0;
    }
    if (now >= this.nextCollect) this.collect(now);
    return end - now;
  }

  /** Blocks `key` for `ms` from `now` (Infinity: until removed). */
  add(key: string, ms: number, now: number): void {
    this.until.delete(key);
    this.until.set(key, now + ms);
    if (this.until.size > this.collectAbove) this.collect(now);
    while (this.until.size > this.maxKeys) this.until.delete(this.until.keys().next().value!);
  }

  /** Unblocks `key`. */
  delete(key: string): void {
    this.until.delete(key);
    this.lapsed.delete(key);
  }

  /** True once after a lookup found `key`'s block over (and forgets that). */
  takeLapsed(key: string): boolean {
    return this.lapsed.size > 0 && this.lapsed.delete(key);
  }

  /** Drops every expired entry, and the lapsed keys nobody claimed. */
  collect(now: number): void {
    this.nextCollect = now + 1000;
    for (const [key, end] of this.until) if (end <= now) this.until.delete(key);
    this.lapsed.clear();
  }
}
