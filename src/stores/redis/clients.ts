/** Client adapters for ioredis (Redis, Cluster) and node-redis (client, cluster). */
/**
 * Recognised by duck typing so neither library is ever imported; valkey-glide's is in client-glide.ts.
 */
import { EventEmitter } from 'node:events';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { assertKnownOptions } from '../../core/validate.js';
import type { RedisAdapter, ReplyHandler, ScriptCall } from './client-adapter.js';
import { adaptGlide, GLIDE_MINIMUM, looksLikeGlide } from './client-glide.js';

// The slices of each client's API the adapters use; the real classes have far more.
interface IoredisLike {
  readonly isCluster: boolean;
  readonly status: string;
  /** The connection's socket while connected (ioredis's `Redis#stream`); absent on a Cluster. */
  readonly stream?: { cork(): void; uncork(): void; readonly destroyed?: boolean };
  evalsha(...args: unknown[]): Promise<unknown>;
  eval(...args: unknown[]): Promise<unknown>;
}
interface NodeRedisLike {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  sendCommand(args: string[]): Promise<unknown>;
}
interface NodeRedisClusterLike {
  sendCommand(firstKey: string, isReadonly: boolean, args: string[]): Promise<unknown>;
}

/** True for the error Redis answers EVALSHA with when its script cache lacks the script. */
function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/** What a call's NOSCRIPT fallback needs: the same call as EVAL, with the script's text. */
interface EvalText {
  evalText(c: ScriptCall): Promise<unknown>;
}

/**
 * Reports call `index`'s reply from `evalsha`, the call's EVALSHA, or on
 * NOSCRIPT (after a restart, a failover or SCRIPT FLUSH) from its EVAL,
 * which also puts the script back in Redis's cache for the next calls. One
 * reaction on the EVALSHA's promise: no promise in between and no closure
 * per call for the fallback, which is needed once per script and server.
 */
function settle(evalsha: Promise<unknown>, fallback: EvalText, c: ScriptCall, index: number, onReply: ReplyHandler): void {
  evalsha.then(
    (reply) => onReply(index, undefined, reply),
    (error: unknown) => {
      if (!isNoScript(error)) return onReply(index, error, undefined);
      try {
        report(fallback.evalText(c), index, onReply);
      } catch (error) {
        onReply(index, error, undefined);
      }
    },
  );
}

function report(promise: Promise<unknown>, index: number, onReply: ReplyHandler): void {
  promise.then(
    (reply) => onReply(index, undefined, reply),
    (error: unknown) => onReply(index, error, undefined),
  );
}

/** An ioredis client's EVAL of a call, the NOSCRIPT fallback of {@link sendIoredis}. */
class IoredisEval implements EvalText {
  constructor(private readonly client: IoredisLike) {}

  evalText(c: ScriptCall): Promise<unknown> {
    return this.client.eval(c.script.text, c.keys.length, ...c.keys, ...c.args);
  }
}

/** One script call on an ioredis client (EVALSHA, EVAL on NOSCRIPT), its reply or failure reported as call `index`. */
function sendIoredis(client: IoredisLike, fallback: EvalText, c: ScriptCall, index: number, onReply: ReplyHandler): void {
  try {
    settle(client.evalsha(c.script.sha, c.keys.length, ...c.keys, ...c.args), fallback, c, index, onReply);
  } catch (error) {
    onReply(index, error, undefined);
  }
}

/** ioredis status while it retries a lost connection; commands would wait in its offline queue. */
function ioredisDown(status: string): string | undefined {
  return status === 'reconnecting' ? 'the connection to Redis is down (ioredis is reconnecting)' : undefined;
}

/**
 * ioredis `Redis`: a flush's calls go out as separate EVALSHAs written to the
 * socket together (one write, one round trip), by corking the connection
 * while they are queued. An ioredis `Pipeline` would do the same write, but
 * each one costs a third more CPU per call and leaves garbage that outlives
 * young-generation collections (measured: about 4.0 against 2.5 µs per call,
 * and 10 times the scavenge time, at 64 calls in flight).
 */
class IoredisAdapter implements RedisAdapter {
  readonly kind = 'ioredis';
  private readonly fallback: EvalText;
  constructor(private readonly client: IoredisLike) {
    this.fallback = new IoredisEval(client);
  }

  unavailable(): string | undefined {
    return ioredisDown(this.client.status);
  }

  send(calls: readonly ScriptCall[], onReply: ReplyHandler): void {
    if (calls.length === 1) {
      sendIoredis(this.client, this.fallback, calls[0]!, 0, onReply);
      return;
    }
    // Only a connected client writes at once; otherwise ioredis queues the calls itself, in order.
    const stream = this.client.status === 'ready' && this.client.stream?.destroyed !== true ? this.client.stream : undefined;
    stream?.cork();
    try {
      for (let i = 0; i < calls.length; i++) sendIoredis(this.client, this.fallback, calls[i]!, i, onReply);
    } finally {
      stream?.uncork();
    }
  }
}

/**
 * ioredis `Cluster`: one call per batch, all in the same tick. A Cluster
 * pipeline must stay on one node, so it cannot carry a flush that spans
 * slots; ioredis's `enableAutoPipelining` option, when set, batches the
 * writes per node.
 */
class IoredisClusterAdapter implements RedisAdapter {
  readonly kind = 'ioredis-cluster';
  private readonly fallback: EvalText;
  constructor(private readonly client: IoredisLike) {
    this.fallback = new IoredisEval(client);
  }

  unavailable(): string | undefined {
    return ioredisDown(this.client.status);
  }

  send(calls: readonly ScriptCall[], onReply: ReplyHandler): void {
    for (let i = 0; i < calls.length; i++) sendIoredis(this.client, this.fallback, calls[i]!, i, onReply);
  }
}

/** node-redis commands as raw argument lists: EVALSHA or EVAL, then the key count, KEYS and ARGV. */
function commandArgs(verb: 'EVALSHA' | 'EVAL', c: ScriptCall): string[] {
  return [verb, verb === 'EVALSHA' ? c.script.sha : c.script.text, String(c.keys.length), ...c.keys, ...c.args];
}

/**
 * node-redis client: one call per batch, all in the same tick, which
 * node-redis writes to the socket together (it pipelines by itself).
 */
class NodeRedisAdapter implements RedisAdapter, EvalText {
  readonly kind = 'node-redis';
  // node-redis is also "not ready" while its first connect runs; only a drop after that counts as down.
  private wasReady: boolean;
  constructor(private readonly client: NodeRedisLike) {
    this.wasReady = client.isReady;
  }

  unavailable(): string | undefined {
    if (this.client.isReady) {
      this.wasReady = true;
      return undefined;
    }
    return this.wasReady && this.client.isOpen ? 'the connection to Redis is down (node-redis is reconnecting)' : undefined;
  }

  send(calls: readonly ScriptCall[], onReply: ReplyHandler): void {
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      try {
        settle(this.client.sendCommand(commandArgs('EVALSHA', c)), this, c, i, onReply);
      } catch (error) {
        onReply(i, error, undefined);
      }
    }
  }

  /** The call as EVAL, the NOSCRIPT fallback. */
  evalText(c: ScriptCall): Promise<unknown> {
    return this.client.sendCommand(commandArgs('EVAL', c));
  }
}

/** node-redis cluster: one call per batch, routed by its first key, all in the same tick. */
class NodeRedisClusterAdapter implements RedisAdapter, EvalText {
  readonly kind = 'node-redis-cluster';
  constructor(private readonly client: NodeRedisClusterLike) {}

  unavailable(): string | undefined {
    return undefined;
  }

  send(calls: readonly ScriptCall[], onReply: ReplyHandler): void {
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      try {
        settle(this.client.sendCommand(c.keys[0]!, false, commandArgs('EVALSHA', c)), this, c, i, onReply);
      } catch (error) {
        onReply(i, error, undefined);
      }
    }
  }

  /** The call as EVAL on the node of its first key, the NOSCRIPT fallback. */
  evalText(c: ScriptCall): Promise<unknown> {
    return this.client.sendCommand(c.keys[0]!, false, commandArgs('EVAL', c));
  }
}

const fn = (value: Record<string, unknown>, name: string) => typeof value[name] === 'function';

/** The supported client majors, as the messages name them. */
const SUPPORTED =
  'an ioredis Redis or Cluster (ioredis 5 or later: new Redis(url), new Cluster(nodes)), a node-redis client or cluster (node-redis 4 or later: createClient(), createCluster(), then await client.connect())' +
  ` or a valkey-glide client (valkey-glide ${GLIDE_MINIMUM} or later: await GlideClient.createClient(config), await GlideClusterClient.createClient(config))`;

/**
 * True for anything shaped like a Redis client of either library, of any
 * version: what a store would get from `new RedisStore(client)`, where its
 * options belong.
 */
function looksLikeClient(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const c = value as Record<string, unknown>;
  return fn(c, 'sendCommand') || fn(c, 'send_command') || (fn(c, 'evalsha') && fn(c, 'pipeline')) || looksLikeGlide(c);
}

/**
 * True for an ioredis client older than 5. ioredis 4's `Redis` and `Cluster`
 * inherit from EventEmitter; from 5 on both extend ioredis's own `Commander`
 * and only copy EventEmitter's methods in, so they are no instances of it.
 * (Their static `Promise`, the other difference, warns when read on 5.)
 */
function isOldIoredis(c: Record<string, unknown>): boolean {
  return fn(c, 'evalsha') && fn(c, 'pipeline') && typeof c.status === 'string' && c instanceof EventEmitter;
}

/** True for a node-redis 3 (or older) client: callback API, snake_case commands, no `connect()`. */
function isOldNodeRedis(c: Record<string, unknown>): boolean {
  return fn(c, 'send_command') && !fn(c, 'connect');
}

/**
 * Wraps a supported client in its adapter.
 * @param owner - the store the client was given to, as the message names it
 * @throws FloodgateError INVALID_CLIENT for anything else, naming the version found and the one needed when it is an older client
 */
function adaptClient(client: unknown, owner = 'RedisStore'): RedisAdapter {
  if (typeof client === 'object' && client !== null) {
    const c = client as Record<string, unknown>;
    const glide = adaptGlide(c, owner);
    if (glide !== undefined) return glide;
    if (isOldIoredis(c)) {
      throw new FloodgateError(
        ErrorCode.INVALID_CLIENT,
        `${owner} client: ioredis 4 is not supported: use ioredis 5 or later (npm install ioredis@latest), or a node-redis 4+ client.`,
      );
    }
    if (isOldNodeRedis(c)) {
      throw new FloodgateError(
        ErrorCode.INVALID_CLIENT,
        `${owner} client: node-redis 3 is not supported: use node-redis 4 or later (npm install redis@latest; createClient(), then await client.connect()), or an ioredis 5+ client.`,
      );
    }
    if (fn(c, 'evalsha') && fn(c, 'eval') && fn(c, 'pipeline') && typeof c.status === 'string') {
      if (c.isCluster === true) return new IoredisClusterAdapter(client as IoredisLike);
      if (c.isCluster === false) return new IoredisAdapter(client as IoredisLike);
    }
    if (fn(c, 'sendCommand') && fn(c, 'connect')) {
      // node-redis clusters expose their master nodes; single clients expose isOpen/isReady.
      if ('masters' in c) return new NodeRedisClusterAdapter(client as NodeRedisClusterLike);
      if (typeof c.isOpen === 'boolean' && typeof c.isReady === 'boolean') return new NodeRedisAdapter(client as NodeRedisLike);
    }
  }
  throw new FloodgateError(ErrorCode.INVALID_CLIENT, `${owner} client must be ${SUPPORTED}; got ${describeClient(client)}.`);
}

/**
 * The checks every Redis-backed store runs on its options first: an options
 * object (not a client given where the options belong), only known options,
 * a `client`, and a client this version drives.
 *
 * @param owner - the store's class name, as the messages name it
 * @param known - the store's option names
 * @returns the client's adapter
 * @throws FloodgateError INVALID_OPTIONS, UNKNOWN_OPTION or INVALID_CLIENT
 */
export function adaptStoreClient(options: unknown, owner: string, known: readonly string[]): RedisAdapter {
  // Checked before the option names, which would otherwise report a client's own properties as unknown options.
  if (looksLikeClient(options)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} takes options: write new ${owner}({ client })`);
  }
  assertKnownOptions(options, known, owner);
  const client = (options as { client?: unknown }).client;
  if (client === undefined) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} needs a client: write new ${owner}({ client }) with ${SUPPORTED}.`);
  }
  return adaptClient(client, owner);
}

function describeClient(value: unknown): string {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    return typeof name === 'string' && name !== 'Object' ? `an instance of ${name}` : 'a plain object';
  }
  return describeValue(value);
}
