/** Changes to the Redis sets of known API keys, heard on Redis pub/sub. */
/**
 * Every host then drops a changed key's cached answer at once instead of when it expires.
 */

import { ChangeChannels, type ChangeSubscriber } from './change-channels.js';

/**
 * Changes remembered per set before they are folded into one "everything
 * changed" mark: past it, each host asks Redis again about every key.
 */
const MAX_CHANGES = 10_000;

interface SetChanges {
  /** Every cached answer of the set taken before this instant is stale (a message about the whole set, or a reconnection). */
  all: number;
  /** Instant of the last change heard per key. */
  readonly keys: Map<string, number>;
}

/**
 * What the gateway has heard of changes to its allow-list sets. Two ways in:
 * `PUBLISH <set>:changed KEY` after `SADD`/`SREM` (an empty message means
 * the whole set), and, when the Redis server has keyspace events for sets
 * on (`notify-keyspace-events Ks`), every `SADD`/`SREM`/`DEL` of the set by
 * itself, which tells the set but not the key. A cached answer taken before
 * a change it concerns is treated as absent, so the next request asks Redis.
 *
 * While the subscription is down nothing is heard, so each (re)connection
 * marks every set as changed: answers cached before it are asked again.
 * Without the subscription, the cache times bound how stale an answer is.
 */
export class KnownKeyChanges {
  private readonly sets = new Map<string, SetChanges>();
  private readonly channels: ChangeChannels;

  /**
   * @param open - opens the subscriber connection (a duplicate of the store's client), on the first {@link follow}
   * @param now - the clock, ms
   */
  constructor(
    open: () => ChangeSubscriber,
    private readonly now: () => number = Date.now,
  ) {
    this.channels = new ChangeChannels(
      open,
      {
        heard: (set, message) => this.heard(set, message),
        // What was published while the connection was down is lost: every answer is suspect until the subscription is confirmed again.
        reread: () => {
          for (const changes of this.sets.values()) changes.all = Number.POSITIVE_INFINITY;
        },
        // Refused too (an ACL without SUBSCRIBE, say): nothing will be heard, so the cache times alone bound staleness.
        subscribed: (set) => this.confirmed(set),
      },
      true,
    );
  }

  /** Starts hearing changes to `set` (once per set; later calls do nothing). */
  follow(set: string): void {
    if (this.channels.closed || this.sets.has(set)) return;
    // Until the subscription is confirmed, a change might be missed: every answer cached until then is suspect.
    this.sets.set(set, { all: Number.POSITIVE_INFINITY, keys: new Map() });
    this.channels.follow(set);
  }

  /**
   * True when an answer about `key` in `set`, taken at `since`, may be
   * stale: a change to the key or to the whole set was heard after it, or
   * the subscription is not confirmed yet.
   */
  changedSince(set: string, key: string, since: number): boolean {
    const changes = this.sets.get(set);
    if (changes === undefined) return false;
    if (changes.all >= since) return true;
    const at = changes.keys.size === 0 ? undefined : changes.keys.get(key);
    return at !== undefined && at >= since;
  }

  /** Closes the subscriber connection. */
  close(): void {
    this.channels.close();
  }

  private confirmed(set: string): void {
    const changes = this.sets.get(set);
    if (changes !== undefined && changes.all === Number.POSITIVE_INFINITY) changes.all = this.now();
  }

  private heard(set: string, message: string): void {
    const changes = this.sets.get(set);
    if (changes === undefined) return;
    const t = this.now();
    if (message === '' || changes.keys.size >= MAX_CHANGES) {
      changes.all = t;
      changes.keys.clear();
    }
    if (message !== '') changes.keys.set(message, t);
  }
}
