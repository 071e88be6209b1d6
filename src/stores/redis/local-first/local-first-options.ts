/** LocalFirstStore options: their types and checks, and the subscriber connection the store listens on. */
import type { Clock } from '../../../core/clock.js';
import { describeValue } from '../../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../../core/errors.js';
import { MAX_TIMER_MS, wholeNumber } from '../../../core/validate.js';
import { adaptStoreClient } from '../clients.js';
import type { RedisAdapter, RedisClient } from '../client-adapter.js';
/** Options of {@link LocalFirstStore}. */
export interface LocalFirstStoreOptions {
  /**
   * The command client: an ioredis (5 or later) `Redis` or `Cluster`, a
   * node-redis (4 or later) client (`createClient`), or a valkey-glide (2.3 or
   * later) `GlideClient` or `GlideClusterClient`, connected. node-redis
   * clusters are not supported in local-first mode. The store never quits it.
   */
  client: RedisClient;
  /**
   * A client of the same kind for pub/sub, which the store subscribes to
   * `channel` (and unsubscribes on close, without quitting it). Default:
   * `client.duplicate()`, which the store opens and also closes. Required
   * with valkey-glide, which cannot be duplicated: a second glide client
   * created without `pubsubSubscriptions`, for this store (and other
   * LocalFirstStores) alone; the store subscribes it and unsubscribes on
   * close, and its owner closes it.
   */
  subscriber?: RedisClient;
  /** How long a lease or other call waits for Redis before STORE_TIMEOUT, in ms. Default 500. */
  timeoutMs?: number;
  /** Most keys whose lease and marks are kept in memory; the least recently used is dropped (its lease given back). Default 10 000. */
  maxKeys?: number;
  /**
   * The pub/sub channel of block broadcasts. Stores that share counters must
   * share it; give unrelated applications on one Redis their own. Default
   * `"floodgate:local-first"`.
   */
  channel?: string;
  /**
   * Time source, as RedisStore's `clock`: with it the scripts use its time
   * instead of Redis's, and leases expire on it; tests drive it with a
   * ManualClock. Default: Redis's clock for windows and `performance.now()`
   * for lease deadlines.
   */
  clock?: Clock;
  /**
   * How many ms of this process's recent demand on a key one lease should
   * cover. Longer means fewer Redis calls and more quota held locally.
   * Default 100.
   */
  leaseMs?: number;
  /**
   * The largest share (0–1] of a key's remaining quota one lease may take, so
   * quota stranded in idle processes stays small. Default 0.25.
   */
  maxShare?: number;
  /** As RedisStore's `crossSlot`: on Redis Cluster, `'split'` decides a composite over several slots one slot at a time. Default `'reject'`. */
  crossSlot?: 'reject' | 'split';
}

/** Counters of a {@link LocalFirstStore}, for tests, metrics and the benchmark. */
export interface LocalFirstStats {
  /** Consumes answered from memory (lease, exhausted or blocked mark), without Redis. */
  localDecisions: number;
  /** Lease script calls sent. */
  leaseCalls: number;
  /** Return script calls sent. */
  returnCalls: number;
  /** Units granted by leases. */
  unitsLeased: number;
  /** Units Redis took back from returns. */
  unitsReturned: number;
  /** Largest single grant. */
  maxGrant: number;
  /** Keys held in memory. */
  keys: number;
  /** Whether the pub/sub subscription is confirmed; leases hold no surplus while it is not. */
  live: boolean;
}

const OPTION_NAMES = ['client', 'subscriber', 'timeoutMs', 'maxKeys', 'channel', 'clock', 'leaseMs', 'maxShare', 'crossSlot'] as const;

/** A LocalFirstStore's options, checked, with defaults filled in. */
export interface ResolvedLocalFirstOptions {
  /** The client, as given. */
  readonly client: RedisClient;
  /** The client, behind the adapter the store drives it through. */
  readonly adapter: RedisAdapter;
  /** Call timeout in ms. */
  readonly timeoutMs: number;
  /** Bound on keys held in memory. */
  readonly maxKeys: number;
  /** Target lease duration in ms at the current demand. */
  readonly leaseMs: number;
  /** Largest share of the remaining quota per lease. */
  readonly maxShare: number;
  /** maxShare in thousandths, as the lease script takes it. */
  readonly shareMilli: number;
  /** The pub/sub channel. */
  readonly channel: string;
  /** The injected clock, if any. */
  readonly clock: Clock | undefined;
  /** RedisStore's crossSlot, as given (the inner store checks it). */
  readonly crossSlot: 'reject' | 'split' | undefined;
  /** The pub/sub connection: the one given, or a duplicate of `client`. */
  readonly subscriber: object;
  /** Whether the store made `subscriber` (and so closes it). */
  readonly ownedSubscriber: boolean;
}

/**
 * Checks a LocalFirstStore's options and resolves its subscriber connection.
 * @throws FloodgateError INVALID_OPTIONS, INVALID_DURATION, INVALID_CLIENT or CONFLICTING_OPTIONS
 */
export function resolveLocalFirstOptions(options: LocalFirstStoreOptions): ResolvedLocalFirstOptions {
  const adapter = adaptStoreClient(options, 'LocalFirstStore', OPTION_NAMES);
  const o = options;
  if (adapter.kind === 'node-redis-cluster') {
    throw new FloodgateError(
      ErrorCode.INVALID_CLIENT,
      'LocalFirstStore does not support node-redis clusters (createCluster); use an ioredis Cluster, a single node, or RedisStore.',
    );
  }
  const timeoutMs = wholeNumber(o.timeoutMs ?? 500, 'LocalFirstStore timeoutMs', {
    min: 1,
    max: MAX_TIMER_MS,
    code: ErrorCode.INVALID_DURATION,
  });
  const maxKeys = wholeNumber(o.maxKeys ?? 10_000, 'LocalFirstStore maxKeys', { min: 1 });
  const leaseMs = wholeNumber(o.leaseMs ?? 100, 'LocalFirstStore leaseMs', { min: 1, max: 3_600_000, code: ErrorCode.INVALID_DURATION });
  const share = o.maxShare ?? 0.25;
  if (typeof share !== 'number' || !(share > 0 && share <= 1)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `LocalFirstStore maxShare must be a number above 0 and at most 1; got ${describeValue(share)}.`,
    );
  }
  const maxShare = share;
  const shareMilli = Math.max(1, Math.round(share * 1000));
  const channel = o.channel ?? 'floodgate:local-first';
  if (typeof channel !== 'string' || channel.length === 0) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `LocalFirstStore channel must be a non-empty string; got ${describeValue(channel)}.`,
    );
  }
  if (o.clock !== undefined && typeof o.clock !== 'function') {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `LocalFirstStore clock must be a function returning ms; got ${describeValue(o.clock)}.`,
    );
  }
  const clock = o.clock;

  let subscriber = o.subscriber;
  const owned = subscriber === undefined;
  if (subscriber === undefined && (adapter.kind === 'glide' || adapter.kind === 'glide-cluster')) {
    // A glide client cannot be copied: its configuration stays inside it.
    const create = adapter.kind === 'glide' ? 'GlideClient' : 'GlideClusterClient';
    throw new FloodgateError(
      ErrorCode.INVALID_CLIENT,
      `LocalFirstStore with a valkey-glide client needs a subscriber: a second client of the same configuration, e.g. subscriber: await ${create}.createClient(config), which the store subscribes to its channel.`,
    );
  }
  if (subscriber === undefined) {
    const duplicate = (o.client as { duplicate?: unknown }).duplicate;
    if (typeof duplicate !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_CLIENT,
        'LocalFirstStore cannot duplicate this client for pub/sub; pass a subscriber client.',
      );
    }
    // ioredis resubscribes by itself after a reconnection, with a promise nobody handles: a store closed while
    // that connection is mid-handshake got an unhandled "Connection is closed." rejection. The subscription
    // (broadcast.ts) subscribes again on every 'ready' with a handler of its own, so ioredis's copy is off.
    // (An ioredis Cluster duplicates with other arguments and resubscribes through its own subscriber.)
    const plainIoredis =
      typeof (o.client as { status?: unknown }).status === 'string' && (o.client as { isCluster?: unknown }).isCluster !== true;
    subscriber = (plainIoredis ? duplicate.call(o.client, { autoResubscribe: false }) : duplicate.call(o.client)) as object;
  } else if (typeof subscriber !== 'object' || subscriber === null) {
    throw new FloodgateError(
      ErrorCode.INVALID_CLIENT,
      `LocalFirstStore subscriber must be a Redis client; got ${describeValue(subscriber)}.`,
    );
  } else if (subscriber === o.client) {
    // A client in subscriber mode refuses every other command: the store's own calls, and the app's.
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      'LocalFirstStore subscriber must be a second connection, not client itself (a subscribed connection runs no other commands); pass client.duplicate(), or leave subscriber out and the store duplicates client.',
    );
  }
  return {
    client: o.client,
    adapter,
    timeoutMs,
    maxKeys,
    leaseMs,
    maxShare,
    shareMilli,
    channel,
    clock,
    crossSlot: o.crossSlot,
    subscriber,
    ownedSubscriber: owned,
  };
}
