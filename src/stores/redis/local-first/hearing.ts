/** Hearing: whether a LocalFirstStore hears the other processes' news over pub/sub. */
/**
 * It also says what it gives up when it may have missed some.
 */
import { FloodgateError } from '../../../core/errors.js';
import { applyNews, decodeMessage } from './broadcast.js';
import type { Entry } from './lease.js';

/** What {@link Hearing} works through of its store. */
export interface HearingHost {
  /** The store's id in broadcast messages: its own news is not applied twice. */
  readonly id: string;
  /** The keys held, in any order. */
  readonly entries: Iterable<[string, Entry]> & { get(key: string): Entry | undefined };
  /** True once the store is closed: news no longer matters. */
  closed(): boolean;
  /** The store's time, or the clock's failure. */
  readTime(): number | FloodgateError;
  /** The key's entry, created if needed. */
  touch(key: string, t: number): Entry;
  /** Returns the entry's unspent units to Redis and forgets them. */
  giveBack(key: string, e: Entry): void;
}

/**
 * The subscription's state as the store uses it. Leases and marks are
 * trusted only while the subscription is confirmed ({@link live}): a
 * revocation or a block broadcast while it was down would not have been
 * heard, so going down, and coming up again after a gap, gives back every
 * lease and drops every mark.
 */
export class Hearing {
  /** True while the subscription is confirmed. */
  live = false;
  private everLive = false;

  /** @param host - the store */
  constructor(private readonly host: HearingHost) {}

  /** A message on the channel: another process's news, applied to the keys held here. */
  message(text: string): void {
    const host = this.host;
    const m = decodeMessage(text);
    // Our own news we applied when Redis answered; applying it again late could undo newer news.
    if (m === undefined || m.sender === host.id || host.closed()) return;
    const t = host.readTime();
    if (t instanceof FloodgateError) return;
    const blocked = applyNews(m, t, host.entries, (key) => host.touch(key, t));
    if (blocked !== undefined) host.giveBack(m.key, blocked);
  }

  /** The subscription is confirmed. */
  up(): void {
    // Messages may have been missed since the last confirmation: start from what Redis says.
    if (this.everLive) this.forgetAll();
    this.everLive = true;
    this.live = true;
  }

  /** The subscription went down. */
  down(): void {
    if (!this.live) return;
    this.live = false;
    this.forgetAll();
  }

  /** Gives back every lease and drops every mark whose freshness is unknown. */
  private forgetAll(): void {
    for (const [key, e] of this.host.entries) {
      this.host.giveBack(key, e);
      e.exhaustedUntil = 0;
      e.blockedUntil = 0;
    }
  }
}
