/** Block broadcast for the local-first store. */
/**
 * The message format, and one pub/sub subscription that says when it can be trusted.
 */
import { describeValue } from '../../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../../core/errors.js';
import { redisKeys } from '../key-names.js';
import { LOCAL_FIRST_SCRIPTS } from '../lua/local-first.generated.js';
import type { PipelineCall } from '../turn-pipeline.js';
import { forgetUsage, type Entry } from './lease.js';
import { glideSubscription } from './glide-subscription.js';
import type { Subscription, SubscriptionHandlers } from './subscription.js';
import { looksLikeGlide } from '../client-glide.js';

/**
 * What a message says about a key:
 * - `exhausted`: Redis has no quota left until the window ends in `ms`;
 * - `blocked` for `ms` (-1: until reset);
 * - `available`: units came back (a return or a reward), forget `exhausted`;
 * - `reset`: forget everything about the key, its leases included.
 */
export type MessageKind = 'exhausted' | 'blocked' | 'available' | 'reset';

/** The one-letter form of each kind on the wire, as lease-fixed-window.lua writes it too. */
const WIRE_KIND: Readonly<Record<MessageKind, string>> = { exhausted: 'x', blocked: 'b', available: 'a', reset: 'r' };
const KIND_OF_WIRE: Readonly<Record<string, MessageKind>> = { x: 'exhausted', b: 'blocked', a: 'available', r: 'reset' };

/** One decoded message. */
export interface Message {
  /** See {@link MessageKind}. */
  readonly kind: MessageKind;
  /** Id of the store that sent it. */
  readonly sender: string;
  /** ms the state lasts from when Redis published it; -1 for "until reset". */
  readonly ms: number;
  /** The store key (prefix included). */
  readonly key: string;
}

/**
 * `kind\nsender\nms\nkey`, as lease-fixed-window.lua also writes it. The key
 * goes last so it may hold any character, newlines included.
 */
function encodeMessage(message: Message): string {
  return `${WIRE_KIND[message.kind]}\n${message.sender}\n${Math.trunc(message.ms)}\n${message.key}`;
}

/** The script call that publishes `message` on `channel`, routed by the key's slot; its reply is not awaited. */
export function publishCall(message: Message, channel: string): PipelineCall {
  return {
    script: LOCAL_FIRST_SCRIPTS.publish,
    keys: [redisKeys(message.key).state],
    args: [channel, encodeMessage(message)],
    answer: () => {},
  };
}

/** Parses a message, or returns undefined for anything else on the channel (never throws). */
export function decodeMessage(text: string): Message | undefined {
  const a = text.indexOf('\n');
  const b = text.indexOf('\n', a + 1);
  const c = text.indexOf('\n', b + 1);
  if (a !== 1 || b < 0 || c < 0) return undefined;
  const kind = KIND_OF_WIRE[text[0]!];
  if (kind === undefined) return undefined;
  const ms = Number(text.slice(b + 1, c));
  if (!Number.isSafeInteger(ms)) return undefined;
  return { kind, sender: text.slice(a + 1, b), ms, key: text.slice(c + 1) };
}

// The slices of each client's pub/sub API used here.
interface IoredisSubscriber {
  readonly status: string;
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
  quit(): Promise<unknown>;
  disconnect(): void;
}
interface NodeRedisSubscriber {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  unsubscribe(channel: string, listener?: (message: string, channel: string) => void): Promise<unknown>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
  quit?(): Promise<unknown>;
}

const noop = (): void => {};

/**
 * Subscribes `subscriber` (an ioredis Redis/Cluster, a node-redis client or
 * a valkey-glide client) to `channel`. `up` is reported once Redis confirms the subscription, and
 * again after every reconnection; `down` whenever the connection is lost.
 * Errors never escape: a failed subscribe just leaves the subscription down.
 */
export function subscribe(subscriber: object, owned: boolean, channel: string, handlers: SubscriptionHandlers): Subscription {
  const s = subscriber as Record<string, unknown>;
  if (looksLikeGlide(subscriber)) return glideSubscription(subscriber, channel, handlers);
  if (typeof s.subscribe !== 'function' || typeof s.on !== 'function') {
    throw new FloodgateError(
      ErrorCode.INVALID_CLIENT,
      `LocalFirstStore subscriber must be an ioredis, node-redis or valkey-glide client it can SUBSCRIBE with (e.g. client.duplicate()); got ${describeValue(subscriber)}.`,
    );
  }
  if (typeof s.status === 'string') return ioredisSubscription(subscriber as IoredisSubscriber, owned, channel, handlers);
  if (typeof s.isOpen === 'boolean' && typeof s.connect === 'function') {
    return nodeRedisSubscription(subscriber as NodeRedisSubscriber, owned, channel, handlers);
  }
  throw new FloodgateError(
    ErrorCode.INVALID_CLIENT,
    `LocalFirstStore subscriber must be an ioredis Redis/Cluster or a node-redis client; got ${describeValue(subscriber)}.`,
  );
}

function ioredisSubscription(sub: IoredisSubscriber, owned: boolean, channel: string, h: SubscriptionHandlers): Subscription {
  let closed = false;
  const onMessage = (ch: string, message: string): void => {
    if (ch === channel) h.message(message);
  };
  // Subscribing again on every 'ready' is harmless when ioredis also resubscribes, and it is
  // the only way to learn when the subscription is confirmed. (A subscriber the store duplicated
  // has ioredis's autoResubscribe off: this is its only resubscription.)
  const onReady = (): void => {
    if (closed) return;
    sub.subscribe(channel).then(() => {
      if (!closed && sub.status === 'ready') h.up();
    }, noop);
  };
  const onDown = (): void => {
    if (!closed) h.down();
  };
  sub.on('message', onMessage as never);
  sub.on('ready', onReady);
  sub.on('close', onDown);
  sub.on('end', onDown);
  sub.on('reconnecting', onDown);
  // An ioredis client with no 'error' listener prints every connection error; ours are reported as `down`.
  if (owned) sub.on('error', noop);
  if (sub.status === 'ready') onReady();
  return {
    async close() {
      if (closed) return;
      closed = true;
      sub.off('message', onMessage as never);
      sub.off('ready', onReady);
      sub.off('close', onDown);
      sub.off('end', onDown);
      sub.off('reconnecting', onDown);
      if (owned) {
        if (sub.status === 'ready') await sub.quit().catch(noop);
        sub.disconnect();
      } else if (sub.status === 'ready') {
        await sub.unsubscribe(channel).catch(noop);
      }
    },
  };
}

function nodeRedisSubscription(sub: NodeRedisSubscriber, owned: boolean, channel: string, h: SubscriptionHandlers): Subscription {
  let closed = false;
  const listener = (message: string): void => {
    if (!closed) h.message(message);
  };
  // node-redis resubscribes by itself after a reconnection; subscribing with the same listener
  // again is deduplicated, and its reply is the confirmation we wait for.
  const confirm = (): void => {
    if (closed) return;
    sub.subscribe(channel, listener).then(() => {
      if (!closed && sub.isReady) h.up();
    }, noop);
  };
  const onDown = (): void => {
    if (!closed) h.down();
  };
  sub.on('ready', confirm);
  sub.on('end', onDown);
  sub.on('reconnecting', onDown);
  sub.on('error', onDown);
  if (sub.isReady) confirm();
  else if (owned && !sub.isOpen) sub.connect().catch(noop);
  return {
    async close() {
      if (closed) return;
      closed = true;
      sub.off('ready', confirm);
      sub.off('end', onDown);
      sub.off('reconnecting', onDown);
      if (owned) {
        try {
          if (typeof sub.destroy === 'function') sub.destroy();
          else if (typeof sub.disconnect === 'function') await sub.disconnect();
        } catch {
          // already closed
        }
        sub.off('error', onDown);
      } else {
        sub.off('error', onDown);
        if (sub.isReady) await sub.unsubscribe(channel, listener).catch(noop);
      }
    },
  };
}

/**
 * Applies another process's news about a key to this process's entries: an
 * `available` or `reset` clears marks of a key held here; `exhausted` and
 * `blocked` mark the key (created with `touch`). Returns the entry when a
 * block makes its unspent units go back to Redis (the caller returns them).
 */
export function applyNews(
  m: Message,
  t: number,
  entries: { get(key: string): Entry | undefined },
  touch: (key: string) => Entry,
): Entry | undefined {
  if (m.kind === 'available' || m.kind === 'reset') {
    const e = entries.get(m.key);
    if (e === undefined) return undefined;
    // After a reset the window the lease came from is gone: nothing to give back to.
    if (m.kind === 'reset') forgetUsage(e);
    else e.exhaustedUntil = 0;
    return undefined;
  }
  if (m.ms === 0) return undefined;
  const e = touch(m.key);
  if (m.kind === 'exhausted') {
    e.exhaustedUntil = Math.max(e.exhaustedUntil, t + m.ms);
    e.remote = 0;
    return undefined;
  }
  e.blockedUntil = m.ms < 0 ? Infinity : Math.max(e.blockedUntil, t + m.ms);
  return e;
}
