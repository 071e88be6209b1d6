/** Tells every gateway host on one Redis that an operator reset or unblocked a key. */
/**
 * Each host then drops its in-memory block of the key at once instead of refusing it until that block runs out.
 */
import type { AdminPubSub, ChangeSubscriber } from '../rules/change-channels.js';

/** The channel of a gateway's admin changes, under its store prefix: gateways sharing a prefix share counters, so they share this too. */
export function adminChannel(prefix: string): string {
  return `${prefix}:admin:changed`;
}

/**
 * Announces and hears "the state of KEY under RULE changed" on
 * {@link adminChannel}. A message is `{"rule": RULE, "key": KEY}`; anything
 * else heard there is ignored. The host that announced hears its own
 * message too, which changes nothing (its block was already dropped).
 */
export class AdminBroadcast {
  private subscriber: ChangeSubscriber | undefined;

  /**
   * @param pubsub - the store's Redis client
   * @param channel - see {@link adminChannel}
   * @param heard - drops the in-memory block of `key` in `rule`'s limiters
   */
  constructor(
    private readonly pubsub: AdminPubSub,
    private readonly channel: string,
    heard: (rule: string, key: string) => void,
  ) {
    const sub = pubsub.subscriber();
    this.subscriber = sub;
    // Reconnections are ioredis's; a change published while it was away is bounded by the in-memory block's own time.
    sub.on('error', () => {});
    sub.on('message', (ch, message) => {
      if (ch !== channel) return;
      const change = parse(message);
      if (change !== undefined) heard(change.rule, change.key);
    });
    void sub.subscribe(channel).catch(() => {});
  }

  /** Announces a change of `key` under `rule`; a failed publish is reported through the returned promise, never thrown. */
  announce(rule: string, key: string): Promise<unknown> {
    return this.pubsub.publish(this.channel, JSON.stringify({ rule, key })).catch((error: unknown) => error);
  }

  /** Closes the subscriber connection. */
  close(): void {
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }
}

function parse(message: string): { rule: string; key: string } | undefined {
  try {
    const v = JSON.parse(message) as { rule?: unknown; key?: unknown };
    return typeof v.rule === 'string' && typeof v.key === 'string' ? { rule: v.rule, key: v.key } : undefined;
  } catch {
    return undefined;
  }
}
