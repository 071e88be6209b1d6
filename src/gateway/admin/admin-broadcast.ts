/** Tells every gateway host on one Redis that an operator reset or unblocked a key. */
/**
 * Each host then drops its in-memory block of the key at once instead of refusing it until that block runs out.
 */
import { ChangeChannels, changeChannel, type AdminPubSub } from '../rules/change-channels.js';

/** The channel of a gateway's admin changes, under its store prefix: gateways sharing a prefix share counters, so they share this too. */
function adminChannel(prefix: string): string {
  return changeChannel(adminName(prefix));
}

/** The name {@link ChangeChannels} follows for `prefix`'s admin changes: its channel is {@link adminChannel}. */
function adminName(prefix: string): string {
  return `${prefix}:admin`;
}

/** The Redis counter of the admin changes announced under `prefix`: each announcement carries its number, so a host sees the ones it missed. */
function adminGenerationKey(prefix: string): string {
  return `${prefix}:admin:generation`;
}

/** How often a host reads the change counter to find announcements lost while its subscriber reconnected or moved nodes. */
const ADMIN_REREAD_MS = 30_000;

/** What an {@link AdminBroadcast} tells its host. */
export interface AdminBroadcastHooks {
  /** Drops the in-memory block of `key` in `rule`'s limiters. */
  heard(rule: string, key: string): void;
  /** Some announcement never arrived: drops every in-memory block, since any key may have been reset or unblocked. */
  missed(): void;
}

/**
 * Announces and hears "the state of KEY under RULE changed" on
 * {@link adminChannel}. A message is `{"rule": RULE, "key": KEY, "n": N}`, N
 * the change counter's value after this change; anything else heard there
 * is ignored. The host that announced hears its own message too, which
 * changes nothing (its block was already dropped).
 *
 * Pub/sub drops what is published while a subscriber is away (a reconnect,
 * a Sentinel failover, a Cluster subscriber moving to another node), and a
 * missed unblock of a block "forever" would refuse the key on this host
 * until a restart. So the counter is read at start, every
 * {@link ADMIN_REREAD_MS} and after each reconnection, and a message whose
 * number skips one: when it is ahead of the last number this host heard,
 * every in-memory block is dropped. That costs one store call per blocked
 * key, and happens only after a loss.
 */
export class AdminBroadcast {
  /** The subscriber of the admin channel, which tells of every reconnection (ChangeChannels' `reread`). */
  private readonly channels: ChangeChannels;
  private readonly channel: string;
  private readonly counter: string;
  private readonly timer: NodeJS.Timeout;
  /** The highest change number heard or read; undefined until the first read or message. */
  private last: number | undefined;

  /**
   * @param pubsub - the store's Redis client
   * @param prefix - the store prefix: the channel is {@link adminChannel}, the counter {@link adminGenerationKey}
   * @param hooks - where changes and losses go
   * @param rereadMs - how often the counter is read (tests shorten it)
   */
  constructor(
    private readonly pubsub: AdminPubSub,
    prefix: string,
    private readonly hooks: AdminBroadcastHooks,
    rereadMs = ADMIN_REREAD_MS,
  ) {
    this.channel = adminChannel(prefix);
    this.counter = adminGenerationKey(prefix);
    this.channels = new ChangeChannels(() => pubsub.subscriber(), {
      heard: (_name, message) => {
        const change = parse(message);
        if (change === undefined) return;
        this.saw(change.n);
        hooks.heard(change.rule, change.key);
      },
      // After each (re)connection: what was announced while the subscriber was away is found in the counter.
      reread: () => this.reread(),
    });
    this.channels.follow(adminName(prefix));
    this.reread();
    this.timer = setInterval(() => this.reread(), rereadMs).unref();
  }

  /** Announces a change of `key` under `rule`; a failed announcement is reported through the returned promise, never thrown. */
  announce(rule: string, key: string): Promise<unknown> {
    return this.pubsub
      .incr(this.counter)
      .then((n) => this.pubsub.publish(this.channel, JSON.stringify({ rule, key, n })))
      .catch((error: unknown) => error);
  }

  /** Closes the subscriber connection and stops reading the counter. */
  close(): void {
    clearInterval(this.timer);
    this.channels.close();
  }

  /** Reads the counter: a number ahead of the last one heard means announcements were lost. A failed read waits for the next. */
  private reread(): void {
    void this.pubsub.get(this.counter).then(
      (value) => {
        const n = Number(value ?? 0);
        if (Number.isSafeInteger(n) && !this.channels.closed) this.saw(n, true);
      },
      () => {},
    );
  }

  /**
   * Notes change number `n`, heard in a message (one past the last is in step) or read from the counter (equal to the
   * last is in step). The first number only sets the start: what came before it was applied to the store already.
   */
  private saw(n: number | undefined, read = false): void {
    if (n === undefined) return;
    const last = this.last;
    if (last !== undefined && n > last + (read ? 0 : 1)) this.hooks.missed();
    if (last === undefined || n > last) this.last = n;
  }
}

function parse(message: string): { rule: string; key: string; n: number | undefined } | undefined {
  try {
    const v = JSON.parse(message) as { rule?: unknown; key?: unknown; n?: unknown };
    if (typeof v.rule !== 'string' || typeof v.key !== 'string') return undefined;
    return { rule: v.rule, key: v.key, n: typeof v.n === 'number' && Number.isSafeInteger(v.n) ? v.n : undefined };
  } catch {
    return undefined;
  }
}
