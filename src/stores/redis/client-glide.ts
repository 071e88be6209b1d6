/** Client adapter for valkey-glide (GlideClient, GlideClusterClient), recognised by shape. */
/**
 * So the package is never imported.
 */
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import type { RedisAdapter, ReplyHandler, ScriptCall } from './client-adapter.js';

/** The oldest valkey-glide the stores drive, as the messages name it. */
export const GLIDE_MINIMUM = '2.3';

// The slice of glide's API the adapter uses; a cluster client routes EVALSHA/EVAL by their first key itself.
interface GlideLike {
  customCommand(args: string[]): Promise<unknown>;
}

const fn = (value: Record<string, unknown>, name: string) => typeof value[name] === 'function';

/**
 * True for anything shaped like a valkey-glide client of any version:
 * `customCommand` and `invokeScript` are glide's own names, which neither
 * ioredis nor node-redis has.
 */
export function looksLikeGlide(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const c = value as Record<string, unknown>;
  return fn(c, 'customCommand') && fn(c, 'invokeScript');
}

/**
 * True for a glide client older than {@link GLIDE_MINIMUM}: 2.3 added
 * subscribing at run time (`subscribeLazy`, `getSubscriptions`), which the
 * local-first store's broadcast needs, so one floor covers both stores.
 */
export function isOldGlide(value: unknown): boolean {
  return (
    looksLikeGlide(value) &&
    !(fn(value as Record<string, unknown>, 'getSubscriptions') && fn(value as Record<string, unknown>, 'subscribeLazy'))
  );
}

/** The typed error for a glide client older than {@link GLIDE_MINIMUM}. */
export function oldGlideError(owner: string): FloodgateError {
  return new FloodgateError(
    ErrorCode.INVALID_CLIENT,
    `${owner} client: valkey-glide older than ${GLIDE_MINIMUM} is not supported: use valkey-glide ${GLIDE_MINIMUM} or later (npm install @valkey/valkey-glide@latest).`,
  );
}

/**
 * True for a GlideClusterClient: its class (or a subclass of it) by name, or,
 * should a bundler have renamed the class, the methods only the cluster client has.
 */
export function isGlideCluster(value: object): boolean {
  for (let p: object | null = Object.getPrototypeOf(value) as object | null; p !== null; p = Object.getPrototypeOf(p) as object | null) {
    const name = (p as { constructor?: { name?: unknown } }).constructor?.name;
    if (name === 'GlideClusterClient') return true;
    if (name === 'GlideClient') return false;
  }
  const c = value as Record<string, unknown>;
  return fn(c, 'fcallWithRoute') && fn(c, 'ssubscribe');
}

/** True for the error glide reports when Redis lacks a script: it wraps Redis's NOSCRIPT as "...NoScriptError...". */
function isGlideNoScript(error: unknown): boolean {
  return error instanceof Error && (error.message.startsWith('NOSCRIPT') || error.message.includes('NoScriptError'));
}

/**
 * glide's own request timeout (its `requestTimeout`, 250 ms by default) as
 * the store's STORE_TIMEOUT, so callers see one code for "Redis did not
 * answer in time" whichever timer fired first.
 */
function glideError(error: unknown): unknown {
  if (error instanceof Error && error.name === 'TimeoutError') {
    return new FloodgateError(
      ErrorCode.STORE_TIMEOUT,
      `Redis did not answer valkey-glide within its requestTimeout (${error.message}); raise the client's requestTimeout if Redis is slow but healthy.`,
      error,
    );
  }
  return error;
}

const noop = (): void => {};

/** What the adapters of one glide client share, so that calls through any of them keep their order per key. */
const perClient = new WeakMap<object, { sent: Set<string>; tails: Map<string, Promise<void>> }>();

/**
 * A GlideClient or GlideClusterClient. Every call is one `customCommand`
 * EVALSHA; a cluster client routes it by its first key. NOSCRIPT falls back
 * to EVAL, which also caches the script on that node again.
 *
 * glide does not keep the order of requests in flight together (its core
 * runs each as a task of its own), while the store's calls on one key must
 * apply in the order they were made. So a call waits for the calls before it
 * on any of its keys to end; calls on other keys go out at once, in the
 * same tick, which glide writes together. A busy key thus has one call in
 * flight at a time, each carrying every operation of its turn.
 *
 * The flush that first uses a script sends its calls by text (EVAL): glide
 * logs every error reply as a warning, and a Redis this process has not used
 * yet would answer each of them NOSCRIPT.
 */
class GlideAdapter implements RedisAdapter {
  /** SHAs of the scripts sent by text through this client. */
  private readonly sent: Set<string>;
  /** Per Redis key, the end of the last call made on it through this client, while that call is pending. */
  private readonly tails: Map<string, Promise<void>>;

  constructor(
    private readonly client: GlideLike,
    readonly kind: 'glide' | 'glide-cluster',
  ) {
    // Shared by every adapter of the client: a LocalFirstStore and its inner RedisStore each have one.
    let shared = perClient.get(client);
    if (shared === undefined) perClient.set(client, (shared = { sent: new Set(), tails: new Map() }));
    this.sent = shared.sent;
    this.tails = shared.tails;
  }

  // glide reports no connection state: it reconnects by itself, and a command sent meanwhile fails or times out.
  unavailable(): string | undefined {
    return undefined;
  }

  send(calls: readonly ScriptCall[], onReply: ReplyHandler): void {
    const first = new Set<string>();
    calls.forEach((c, i) => {
      const sha = c.script.sha;
      if (!this.sent.has(sha)) first.add(sha);
      const byText = first.has(sha);
      const before = this.after(c.keys);
      const reply = before === undefined ? this.call(c, byText) : before.then(() => this.call(c, byText));
      const ended = reply.then(noop, noop);
      for (const key of c.keys) this.tails.set(key, ended);
      void ended.then(() => {
        for (const key of c.keys) if (this.tails.get(key) === ended) this.tails.delete(key);
      });
      reply.then(
        (value) => onReply(i, undefined, value),
        (error: unknown) => onReply(i, glideError(error), undefined),
      );
    });
    for (const sha of first) this.sent.add(sha);
  }

  /** When the calls already made on `keys` have ended, or undefined when none is pending. */
  private after(keys: readonly string[]): Promise<unknown> | undefined {
    const pending: Promise<void>[] = [];
    for (const key of keys) {
      const tail = this.tails.get(key);
      if (tail !== undefined && !pending.includes(tail)) pending.push(tail);
    }
    if (pending.length === 0) return undefined;
    return pending.length === 1 ? pending[0] : Promise.all(pending);
  }

  /** One script call; never throws (a throw of the client becomes the rejection). */
  private call(c: ScriptCall, byText: boolean): Promise<unknown> {
    try {
      const tail = [String(c.keys.length), ...c.keys, ...c.args];
      if (byText) return this.client.customCommand(['EVAL', c.script.text, ...tail]);
      return this.client.customCommand(['EVALSHA', c.script.sha, ...tail]).catch((error: unknown) => {
        if (isGlideNoScript(error)) return this.client.customCommand(['EVAL', c.script.text, ...tail]);
        throw error;
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

/**
 * The adapter of a supported glide client, or undefined for anything not
 * shaped like glide.
 * @throws FloodgateError INVALID_CLIENT for a glide client older than {@link GLIDE_MINIMUM}
 */
export function adaptGlide(client: object, owner: string): RedisAdapter | undefined {
  if (!looksLikeGlide(client)) return undefined;
  if (isOldGlide(client)) throw oldGlideError(owner);
  return new GlideAdapter(client as GlideLike, isGlideCluster(client) ? 'glide-cluster' : 'glide');
}
