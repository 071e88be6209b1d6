/** Follows `<name>:changed` Redis channels on a subscriber connection of its own. */
/**
 * That way what the gateway caches from Redis can be read again when another host announces a change.
 */

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

/** The Redis side the admin broadcast needs: a publish, a counter, and a subscriber connection of its own (the key tables hand it over from the store's client). */
export interface AdminPubSub {
  /** `PUBLISH channel message` on the store's client. */
  publish(channel: string, message: string): Promise<unknown>;
  /** `INCR key` on the store's client: numbers the announcements. */
  incr(key: string): Promise<number>;
  /** `GET key` on the store's client. */
  get(key: string): Promise<string | null>;
  /** Opens a subscriber connection (a duplicate of the store's client). */
  subscriber(): ChangeSubscriber;
}

/** The channel on which a change to `name` is announced: `PUBLISH <name>:changed WHAT` (an empty message for "anything"). */
export function changeChannel(name: string): string {
  return `${name}:changed`;
}

const SUFFIX = changeChannel('');

/** What a {@link ChangeChannels} tells its owner. */
export interface ChangeHooks {
  /** A message on the channel of `name` (for a keyspace event: an empty message). */
  heard(name: string, message: string): void;
  /**
   * After every (re)connection, once every channel is being subscribed
   * again: what was published while the connection was down is lost, so
   * everything followed must be read whole again.
   */
  reread(): void;
  /** The SUBSCRIBE of `name`'s channel was answered, accepted or refused (from then on a change is heard, if it can be). */
  subscribed?(name: string): void;
}

/**
 * The `<name>:changed` channels of a set of names, on one subscriber
 * connection opened on the first {@link follow}. Subscriber errors are
 * ignored (ioredis reconnects by itself); each reconnection subscribes every
 * channel again, which is harmless where ioredis resubscribes too and the
 * only way to learn when it is done.
 */
export class ChangeChannels {
  private readonly names = new Set<string>();
  private subscriber: ChangeSubscriber | undefined;
  private closedFlag = false;

  /**
   * @param open - opens the subscriber connection (a duplicate of the store's client)
   * @param hooks - where changes, reconnections and confirmations go
   * @param keyspace - also hear the Redis keyspace events of each name's key (`notify-keyspace-events K`), as a change of anything in it
   */
  constructor(
    private readonly open: () => ChangeSubscriber,
    private readonly hooks: ChangeHooks,
    private readonly keyspace = false,
  ) {}

  /** True once {@link close} was called: nothing is followed any more. */
  get closed(): boolean {
    return this.closedFlag;
  }

  /** Starts hearing the channel of `name`; false when it was followed already (or closed). */
  follow(name: string): boolean {
    if (this.closedFlag || this.names.has(name)) return false;
    this.names.add(name);
    this.subscriber ??= this.connect();
    this.subscribe(name);
    return true;
  }

  /** Closes the subscriber connection. */
  close(): void {
    this.closedFlag = true;
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  private connect(): ChangeSubscriber {
    const sub = this.open();
    sub.on('error', () => {});
    sub.on('message', (channel, message) => {
      const name = channel.endsWith(SUFFIX) ? channel.slice(0, -SUFFIX.length) : undefined;
      if (name !== undefined && this.names.has(name)) this.hooks.heard(name, message);
    });
    if (this.keyspace) {
      sub.on('pmessage', (_pattern, channel) => {
        for (const name of this.names) if (channel.endsWith(`__:${name}`)) this.hooks.heard(name, '');
      });
    }
    sub.on('ready', () => {
      for (const name of this.names) this.subscribe(name);
      this.hooks.reread();
    });
    return sub;
  }

  private subscribe(name: string): void {
    const sub = this.subscriber;
    if (sub === undefined) return;
    const report = (): void => this.hooks.subscribed?.(name);
    void sub.subscribe(changeChannel(name)).then(report, report);
    if (this.keyspace) void sub.psubscribe(`__keyspace@*__:${globEscape(name)}`).catch(() => {});
  }
}

/** `name` as a literal in a PSUBSCRIBE pattern. */
function globEscape(name: string): string {
  return name.replace(/[*?[\]\\]/g, '\\$&');
}
