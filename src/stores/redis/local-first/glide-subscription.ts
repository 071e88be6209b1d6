/** The local-first broadcast's subscription on a valkey-glide client. */
/**
 * Subscribed at run time, read from glide's message queue, its state polled.
 */
import { ErrorCode, FloodgateError } from '../../../core/errors.js';
import { isGlideCluster, isOldGlide, oldGlideError } from '../client-glide.js';
import type { Subscription, SubscriptionHandlers } from './subscription.js';

/**
 * How often the subscription's state is read, in ms. glide emits no event
 * when its connection drops or when it has subscribed again, and it
 * reconnects within a millisecond or two when Redis is up, too fast to see
 * the subscription missing; so each poll also reads the subscriber
 * connection's CLIENT ID (per node on a cluster), which changes with every
 * new connection: a change means messages may have been missed.
 */
const GLIDE_POLL_MS = 100;

/** glide's `PubSubChannelModes.Exact`, the same value for the standalone and the cluster client. */
const EXACT = 0;

interface GlideMessage {
  message: unknown;
  channel: unknown;
}

// The slice of glide's (2.3 or later) pub/sub API used here.
interface GlideSubscriber {
  subscribeLazy(channels: Iterable<string>): Promise<unknown>;
  unsubscribeLazy(channels: Iterable<string>): Promise<unknown>;
  getSubscriptions(): Promise<{ actualSubscriptions: Partial<Record<number, Set<unknown>>> }>;
  getPubSubMessage(): Promise<GlideMessage>;
  customCommand(args: string[], options?: { route: 'allNodes' }): Promise<unknown>;
  tryGetPubSubMessage(): GlideMessage | null;
}

type Listener = (text: string) => void;

/**
 * One reader of a subscriber's message queue, shared by the stores that
 * subscribe it: glide hands each message to one waiting reader, so two
 * readers of one client would each miss half the messages.
 */
class GlideQueueReader {
  readonly listeners = new Map<string, Set<Listener>>();
  private reading = false;

  constructor(private readonly sub: GlideSubscriber) {}

  dispatch(m: GlideMessage): void {
    const listeners = this.listeners.get(String(m.channel));
    if (listeners === undefined) return;
    const text = String(m.message);
    for (const listener of listeners) listener(text);
  }

  /** Waits for the next message while anyone listens; stops once the client is closed (the wait then rejects). */
  read(): void {
    if (this.reading || this.listeners.size === 0) return;
    this.reading = true;
    this.sub.getPubSubMessage().then(
      (m) => {
        this.reading = false;
        this.dispatch(m);
        this.read();
      },
      () => {
        this.reading = false;
      },
    );
  }
}

const readers = new WeakMap<object, GlideQueueReader>();

/**
 * The connection ids of a CLIENT ID reply as one string: a number from a
 * single node, per node from a cluster (an array of `{ key, value }`, or an
 * object by address), sorted by node so the order of the reply does not matter.
 */
function connectionId(reply: unknown): string {
  if (Array.isArray(reply)) {
    return reply
      .map((e: unknown) =>
        typeof e === 'object' && e !== null
          ? `${String((e as { key?: unknown }).key)}=${String((e as { value?: unknown }).value)}`
          : String(e),
      )
      .sort()
      .join(',');
  }
  if (typeof reply === 'object' && reply !== null) {
    return Object.entries(reply)
      .map(([node, id]) => `${node}=${String(id)}`)
      .sort()
      .join(',');
  }
  return String(reply);
}

/**
 * Subscribes a glide (2.3 or later) client to `channel` with
 * `subscribeLazy` (glide subscribes again by itself after a reconnection)
 * and reads the messages from its queue. `up` and `down` follow the
 * client's actual subscriptions, polled every {@link GLIDE_POLL_MS} ms.
 * @throws FloodgateError INVALID_CLIENT for an older glide, or a client created with a pub/sub callback (which takes the messages from the queue)
 */
export function glideSubscription(subscriber: object, channel: string, h: SubscriptionHandlers): Subscription {
  if (isOldGlide(subscriber)) throw oldGlideError('LocalFirstStore subscriber');
  const sub = subscriber as GlideSubscriber;
  let reader = readers.get(sub);
  let pending: GlideMessage | null;
  try {
    // Throws when the client was created with a callback, or is closed.
    pending = sub.tryGetPubSubMessage();
  } catch (error) {
    const why =
      error instanceof Error && error.name === 'ConfigurationError'
        ? 'was created with a pubsubSubscriptions callback'
        : 'cannot read messages';
    throw new FloodgateError(
      ErrorCode.INVALID_CLIENT,
      `LocalFirstStore subscriber: this glide client ${why} (${error instanceof Error ? error.message : String(error)}); pass a glide client created without pubsubSubscriptions, which the store subscribes itself.`,
    );
  }
  if (reader === undefined) {
    reader = new GlideQueueReader(sub);
    readers.set(sub, reader);
  }
  if (pending !== null) reader.dispatch(pending);
  const queue = reader;
  let closed = false;
  let live = false;
  let polling = false;
  const listener: Listener = (text) => {
    if (!closed) h.message(text);
  };
  const cluster = isGlideCluster(sub);
  let connection: string | undefined;
  const poll = (): void => {
    if (closed || polling) return;
    polling = true;
    // Both go out in one write; a reconnection between their replies shows at the next poll, not never.
    Promise.all([sub.customCommand(['CLIENT', 'ID'], ...(cluster ? [{ route: 'allNodes' as const }] : [])), sub.getSubscriptions()]).then(
      ([id, state]) => {
        polling = false;
        if (closed) return;
        const actual = state.actualSubscriptions[EXACT];
        const subscribed = actual !== undefined && [...actual].some((c) => String(c) === channel);
        const now = connectionId(id);
        const reconnected = connection !== undefined && now !== connection;
        connection = now;
        if (live && (reconnected || !subscribed)) {
          live = false;
          h.down();
        }
        if (subscribed && !live) {
          live = true;
          h.up();
        }
      },
      () => {
        polling = false;
        connection = undefined;
        if (closed || !live) return;
        live = false;
        h.down();
      },
    );
  };
  let listeners = queue.listeners.get(channel);
  if (listeners === undefined) queue.listeners.set(channel, (listeners = new Set()));
  listeners.add(listener);
  queue.read();
  sub.subscribeLazy([channel]).then(poll, () => {});
  const timer = setInterval(poll, GLIDE_POLL_MS);
  timer.unref();
  return {
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      const same = queue.listeners.get(channel);
      same?.delete(listener);
      if (same?.size === 0) {
        queue.listeners.delete(channel);
        // The client is the caller's (the store cannot create a glide client): it is left open.
        await sub.unsubscribeLazy([channel]).catch(() => {});
      }
    },
  };
}
