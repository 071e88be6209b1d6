/** The last count this process saw of each descriptor counter, for the parts of a refused request left unread. */
/**
 * A request refused by one descriptor (its in-memory block, or a count that cannot fit) spends nothing of its other
 * descriptors, and their statuses only say how much they have left. Reading each one from the store costs a round
 * trip per descriptor per refused request, which is most of a refusal's cost when a client keeps retrying; this
 * keeps what the last decision or read of a counter said, for a short time, so those statuses come from it instead.
 * A remembered count is at most {@link RECENT_MS} old; what other processes spent since is not in it. Envoy takes the
 * smallest remaining of an answer's statuses, which for a refused request is the refusing descriptor's 0.
 */

/** How long a remembered count stands in for a read, in ms. */
const RECENT_MS = 1_000;
/** Most counters remembered per generation (two generations are kept: at most twice this many). */
const MAX_KEYS = 10_000;

interface Recent {
  /** Units left after the decision or read. */
  readonly remaining: number;
  /** When the window resets, epoch ms. */
  readonly resetAt: number;
  /** When it was seen, epoch ms. */
  readonly at: number;
}

/** What a counter had left, by its store key, for {@link RECENT_MS}. */
export class RecentCounts {
  /**
   * Two generations of keys: when the newer fills, it becomes the older and the oldest goes. A bounded table without
   * a per-key eviction, so a flood of new descriptor values costs no more than one Map per generation.
   */
  private newer = new Map<string, Recent>();
  private older = new Map<string, Recent>();

  /** Remembers that `storeKey` had `remaining` left at `nowMs`, its window resetting `resetMs` later. */
  remember(storeKey: string, remaining: number, resetMs: number, nowMs: number): void {
    if (!Number.isFinite(resetMs)) return;
    if (this.newer.size >= MAX_KEYS && !this.newer.has(storeKey)) {
      this.older = this.newer;
      this.newer = new Map();
    }
    this.newer.set(storeKey, { remaining, resetAt: nowMs + resetMs, at: nowMs });
  }

  /** What `storeKey` had left, with ms until its reset, when seen within {@link RECENT_MS} and its window still runs. */
  recall(storeKey: string, nowMs: number): { readonly remaining: number; readonly resetMs: number } | undefined {
    const seen = this.newer.get(storeKey) ?? this.older.get(storeKey);
    if (seen === undefined || nowMs - seen.at > RECENT_MS || seen.resetAt <= nowMs) return undefined;
    return { remaining: seen.remaining, resetMs: seen.resetAt - nowMs };
  }
}
