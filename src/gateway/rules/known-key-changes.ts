/** Changes to the Redis sets of known API keys, heard on Redis pub/sub so every host drops a changed key's cached answer at once instead of when it expires. */

/** The subscriber connection's commands (an ioredis client in subscriber mode has them). */
export interface ChangeSubscriber {
  subscribe(...channels: string[]): Promise<unknown>;
  psubscribe(...patterns: string[]): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'pmessage', listener: (pattern: string, channel: string, message: string) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  disconnect(): void;
}

/** The channel on which a change to `set` is announced: `PUBLISH <set>:changed KEY` (or an empty message for "anything"). */
export function changeChannel(set: string): string {
  return `${set}:changed`;
}

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
  private subscriber: ChangeSubscriber | undefined;
  private closed = false;

  /**
   * @param open - opens the subscriber connection (a duplicate of the store's client), on the first {@link follow}
   * @param now - the clock, ms
   */
  constructor(
    private readonly open: () => ChangeSubscriber,
    private readonly now: () => number = Date.now,
  ) {}

  /** Starts hearing changes to `set` (once per set; later calls do nothing). */
  follow(set: string): void {
    if (this.closed || this.sets.has(set)) return;
    // Until the subscription is confirmed, a change might be missed: every answer cached until then is suspect.
    this.sets.set(set, { all: Number.POSITIVE_INFINITY, keys: new Map() });
    if (this.subscriber === undefined) {
      const sub = this.open();
      this.subscriber = sub;
      sub.on('error', () => {});
      sub.on('message', (channel, message) => this.heard(channel, message, false));
      sub.on('pmessage', (_pattern, channel) => this.heard(channel, '', true));
      // After a (re)connection what was published meanwhile is lost: every answer is suspect until the subscription is confirmed
      // again. Subscribing again is harmless where ioredis resubscribes too, and the only way to learn when it is done.
      sub.on('ready', () => {
        for (const [name, changes] of this.sets) {
          changes.all = Number.POSITIVE_INFINITY;
          this.subscribe(name);
        }
      });
    }
    this.subscribe(set);
  }

  private subscribe(set: string): void {
    const sub = this.subscriber;
    if (sub === undefined) return;
    void sub.subscribe(changeChannel(set)).then(
      () => this.confirmed(set),
      // Refused (an ACL without SUBSCRIBE, say): nothing will be heard, so the cache times alone bound staleness.
      () => this.confirmed(set),
    );
    void sub.psubscribe(`__keyspace@*__:${globEscape(set)}`).catch(() => {});
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
    this.closed = true;
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  private confirmed(set: string): void {
    const changes = this.sets.get(set);
    if (changes !== undefined && changes.all === Number.POSITIVE_INFINITY) changes.all = this.now();
  }

  private heard(channel: string, message: string, keyspace: boolean): void {
    const t = this.now();
    for (const [set, changes] of this.sets) {
      if (keyspace ? !channel.endsWith(`__:${set}`) : channel !== changeChannel(set)) continue;
      if (message === '') {
        changes.all = t;
        changes.keys.clear();
      } else {
        if (changes.keys.size >= MAX_CHANGES) {
          changes.all = t;
          changes.keys.clear();
        }
        changes.keys.set(message, t);
      }
    }
  }
}

/** `set` as a literal in a PSUBSCRIBE pattern. */
function globEscape(set: string): string {
  return set.replace(/[*?[\]\\]/g, '\\$&');
}
