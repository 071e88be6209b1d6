/** What the Redis store needs from a client. */
/**
 * The adapter contract every client adapter fulfils, and which client library it drives.
 */
import type { LuaScript } from './lua/scripts.generated.js';

/**
 * A Redis client the store can drive: an ioredis (5 or later) `Redis` or
 * `Cluster`, a node-redis (4 or later) client from `createClient` or
 * cluster from `createCluster`, connected with `await client.connect()`, or
 * a valkey-glide (2.3 or later) `GlideClient` or `GlideClusterClient`.
 *
 * Typed as `object` so the store's declarations name neither library: users
 * of one client need not install the other's types.
 */
export type RedisClient = object;

/** Which client library an adapter drives. */
export type ClientKind = 'ioredis' | 'ioredis-cluster' | 'node-redis' | 'node-redis-cluster' | 'glide' | 'glide-cluster';

/** True for the kinds that talk to a Redis Cluster, where a script's keys must share one slot. */
export function isClusterKind(kind: ClientKind): boolean {
  return kind === 'ioredis-cluster' || kind === 'node-redis-cluster' || kind === 'glide-cluster';
}

/** One script call: the script, its KEYS and its ARGV. */
export interface ScriptCall {
  /** The script; sent by SHA, and by text only when Redis does not have it. */
  readonly script: LuaScript;
  /** KEYS; the first one routes the call in a cluster. */
  readonly keys: readonly string[];
  /** ARGV. */
  readonly args: readonly string[];
}

/** Receives the reply (or error) of call `index`; called exactly once per call. */
export type ReplyHandler = (index: number, error: unknown, reply: unknown) => void;

/** What the store needs from a client. */
export interface RedisAdapter {
  /** The client library. */
  readonly kind: ClientKind;
  /**
   * Why the client cannot take commands now (it knows its connection is
   * down), or undefined. The store then fails at once instead of waiting for
   * its timeout, and does not queue commands that would run long after their
   * callers were answered by a fallback.
   */
  unavailable(): string | undefined;
  /** Sends every call now, pipelined, and reports each reply to `onReply`. Never throws. */
  send(calls: readonly ScriptCall[], onReply: ReplyHandler): void;
}
