/** koa-grounded compatibility: `grounded(options)` maps koa-grounded's option names onto a floodgate Koa middleware. */
import { describeValue } from '../../../core/describe-value.js';
import { ErrorCode, FloodgateError, toStoreError } from '../../../core/errors.js';
import { RateLimiter } from '../../../limiter/rate-limiter.js';
import type { RateLimiterOptions } from '../../../limiter/options.js';
import type { Operation, Outcome } from '../../../core/policy.js';
import { isStore, type Store } from '../../../stores/store.js';
import { assertKnownOptions } from '../../../core/validate.js';
import { HTTP_OPTION_NAMES, type DecisionInfo, type HttpRateLimitOptions } from '../../types.js';
import { HttpLimiter } from '../../http-limiter.js';
import { koaMiddleware, type KoaContextLike, type KoaMiddleware } from '../koa-middleware.js';

/**
 * koa-grounded's options, plus the floodgate Koa options except `limiter`
 * (which these build) and `timeout` (koa-grounded's `timeout` means
 * something else; the middleware keeps its default 5 s bound). See
 * docs/http/koa.md for the mapping.
 */
export interface GroundedOptions<Ctx extends KoaContextLike = KoaContextLike> extends Omit<
  HttpRateLimitOptions<Ctx>,
  'limiter' | 'timeout'
> {
  /** koa-grounded: the Redis key namespace. floodgate: the limiter's `prefix`. Default: floodgate's policy-derived prefix. */
  partitionKey?: string;
  /** koa-grounded: requests per session. floodgate: `limit` (fixed window). Required. */
  ratelimit: number;
  /** koa-grounded: session length in microseconds. floodgate: `window` = globalEXP / 1000 ms; must be whole milliseconds. Required. */
  globalEXP: number;
  /**
   * koa-grounded: worker ↔ Redis sync interval in ms. floodgate: with
   * `dbStr`, the LocalFirstStore's `leaseMs` — each lease covers about this
   * long of the process's own traffic, so Redis is asked about as often as
   * koa-grounded synced, but without deciding on stale counts. A whole
   * number from 1 to 3 600 000. Default 100.
   */
  timeout?: number;
  /** koa-grounded: local LRU size. floodgate: the in-memory block list's `maxKeys` (turns the block list on), and with `dbStr` the LocalFirstStore's `maxKeys`. */
  cacheSize?: number;
  /** koa-grounded: Redis connection string. floodgate: an ioredis client and a LocalFirstStore (local-first mode, as koa-grounded worked), loaded on first use. */
  dbStr?: string;
  /** koa-grounded: access log. floodgate: one line per decision through `logger`. */
  verbose?: boolean;
  /** Where `verbose` lines go. Default `console.log`. */
  logger?: (line: string) => void;
  /** A store to use instead of `dbStr` (e.g. a RedisStore you built). Default: memory, or Redis with `dbStr`. */
  store?: Store;
}

/** The names `grounded` accepts beyond the shared HTTP options. */
export const GROUNDED_OPTION_NAMES = [
  'partitionKey',
  'ratelimit',
  'globalEXP',
  'timeout',
  'cacheSize',
  'dbStr',
  'verbose',
  'logger',
  'store',
] as const;

/** The middleware `grounded` returns, with a way to wait for the store and to release it. */
export type GroundedMiddleware<Ctx extends KoaContextLike = KoaContextLike> = KoaMiddleware<Ctx> & {
  /** The underlying limiter (for `peek`, `reset`, …). */
  readonly limiter: RateLimiter;
  /** Resolves when the store is ready; rejects if `dbStr` could not be used (requests then follow `onStoreError`). */
  readonly ready: Promise<void>;
  /** Closes the Redis client this middleware opened for `dbStr`. Idempotent. */
  close(): Promise<void>;
};

/**
 * Creates a Koa middleware from koa-grounded's options, so an app using
 * `Grounded({...})` can switch by changing the import.
 *
 * Differences from koa-grounded: clients are identified by the socket
 * address unless `trustProxy` says otherwise (koa-grounded read `ctx.ip`,
 * which with `app.proxy = true` believes any X-Forwarded-For a client
 * sends); and counters are kept exactly: a process spends only quota it has leased,
where koa-grounded decided on counts up to `timeout` ms stale.
 *
 * @throws FloodgateError for invalid options
 */
export function grounded<Ctx extends KoaContextLike = KoaContextLike>(options: GroundedOptions<Ctx>): GroundedMiddleware<Ctx> {
  const owner = 'floodgate/koa grounded';
  assertKnownOptions(options, [...GROUNDED_OPTION_NAMES, ...HTTP_OPTION_NAMES.filter((n) => n !== 'limiter' && n !== 'timeout')], owner);
  const { partitionKey, ratelimit, globalEXP, timeout, cacheSize, dbStr, verbose, logger, store, ...http } = options;

  if (typeof globalEXP !== 'number' || !Number.isSafeInteger(globalEXP) || globalEXP <= 0 || globalEXP % 1000 !== 0) {
    throw new FloodgateError(
      ErrorCode.INVALID_WINDOW,
      `globalEXP is the window in microseconds and must be a positive whole number of milliseconds (a multiple of 1000); got ${describeValue(globalEXP)}.`,
    );
  }
  if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isSafeInteger(timeout) || timeout < 1 || timeout > 3_600_000)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `timeout (the sync interval in ms, floodgate's lease horizon) must be a whole number from 1 to 3600000; got ${describeValue(timeout)}.`,
    );
  }
  if (cacheSize !== undefined && (typeof cacheSize !== 'number' || !Number.isSafeInteger(cacheSize) || cacheSize < 1)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `cacheSize must be a positive whole number; got ${describeValue(cacheSize)}.`);
  }
  if (dbStr !== undefined && (typeof dbStr !== 'string' || dbStr.length === 0)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `dbStr must be a Redis connection string such as "redis://127.0.0.1:6379/"; got ${describeValue(dbStr)}.`,
    );
  }
  if (dbStr !== undefined && store !== undefined) {
    throw new FloodgateError(ErrorCode.CONFLICTING_OPTIONS, 'dbStr and store both say where counters live; set only one.');
  }
  if (verbose !== undefined && typeof verbose !== 'boolean') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `verbose must be true or false; got ${describeValue(verbose)}.`);
  }
  if (logger !== undefined && typeof logger !== 'function') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `logger must be a function; got ${describeValue(logger)}.`);
  }
  // koa-grounded's sync interval has a meaning here only for the Redis store dbStr builds (its lease horizon).
  if (timeout !== undefined && dbStr === undefined) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      'timeout (the sync interval) applies to the Redis store built from dbStr, and dbStr is not set; set dbStr or remove timeout.',
    );
  }
  if (logger !== undefined && verbose !== true) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      'logger receives the verbose lines, and verbose is not true; set verbose: true or remove logger.',
    );
  }
  if (store !== undefined && !isStore(store)) {
    throw new FloodgateError(ErrorCode.INVALID_STORE, `store must implement the Store contract; got ${describeValue(store)}.`);
  }

  const redis = dbStr === undefined ? undefined : new DeferredRedisStore(dbStr, { leaseMs: timeout, maxKeys: cacheSize });
  const limiterOptions: RateLimiterOptions = { limit: ratelimit, window: `${globalEXP / 1000}ms`, algorithm: 'fixed-window' };
  if (partitionKey !== undefined) limiterOptions.prefix = partitionKey;
  if (cacheSize !== undefined) limiterOptions.inMemoryBlock = { maxKeys: cacheSize };
  const chosenStore = redis ?? store;
  if (chosenStore !== undefined) limiterOptions.store = chosenStore;
  const limiter = new RateLimiter(limiterOptions);

  const log = logger ?? ((line: string) => console.log(line));
  const userOnDecision = http.onDecision;
  const onDecision =
    verbose === true
      ? (ctx: Ctx, info: DecisionInfo) => {
          log(formatDecision(ctx, info));
          return userOnDecision?.(ctx, info);
        }
      : userOnDecision;

  const core = new HttpLimiter<Ctx>({ ...http, onDecision, limiter }, { owner, frameworkIp: true });
  if (redis !== undefined) redis.onClientError = (error) => core.reportError(error, undefined);

  const ready = redis === undefined ? Promise.resolve() : redis.ready.then(() => undefined);
  // Nobody has to await ready: a failed setup already shows as store failures on each request.
  ready.catch(() => undefined);

  const middleware = koaMiddleware(core) as GroundedMiddleware<Ctx>;
  Object.defineProperties(middleware, {
    limiter: { value: limiter, enumerable: true },
    ready: { value: ready, enumerable: true },
    close: { value: () => (redis === undefined ? Promise.resolve() : redis.close()), enumerable: true },
  });
  return middleware;
}

/** One verbose log line, e.g. `floodgate 203.0.113.7 GET /ping allowed 999/1000 reset 3600s`. */
function formatDecision(ctx: KoaContextLike, info: DecisionInfo): string {
  const p = info.policies[0];
  const state = p === undefined ? 'no-decision' : `${p.remaining}/${p.limit} reset ${Math.ceil(p.resetMs / 1000)}s`;
  return `floodgate ${info.ip ?? 'unknown'} ${ctx.method} ${ctx.path} ${info.allowed ? 'allowed' : `refused ${info.status}`} ${state}`;
}

interface RedisClientLike {
  on?(event: 'error', listener: (error: unknown) => void): unknown;
  quit?(): Promise<unknown>;
  disconnect?(): void;
}

/** What `grounded` passes on to the LocalFirstStore (undefined: its defaults). */
interface LocalFirstTuning {
  readonly leaseMs: number | undefined;
  readonly maxKeys: number | undefined;
}

/**
 * A Store that creates an ioredis client and a LocalFirstStore on first
 * need, through dynamic imports so that `floodgate/koa` never loads Redis
 * code unless `dbStr` is set. Until then, and if setup fails, operations
 * reject with STORE_ERROR, which the middleware handles like any store failure.
 */
class DeferredRedisStore implements Store {
  readonly name = 'redis-local-first';
  /** Receives client connection errors (ioredis emits them as events). */
  onClientError: ((error: unknown) => void) | undefined;
  readonly ready: Promise<Store>;
  private client: RedisClientLike | undefined;
  private store: Store | undefined;
  private closed = false;

  constructor(
    dbStr: string,
    private readonly tuning: LocalFirstTuning,
  ) {
    this.ready = this.connect(dbStr);
    this.ready.catch(() => undefined);
  }

  apply(operation: Operation): Promise<Outcome> {
    if (this.store !== undefined) return this.store.apply(operation);
    return this.ready.then((store) => store.apply(operation));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const client = this.client;
    try {
      await this.ready;
    } catch {
      // Setup failed: nothing more to release than a client, if one was made.
    }
    await this.store?.close?.();
    if (client?.quit !== undefined) await client.quit().catch(() => client.disconnect?.());
    else client?.disconnect?.();
  }

  private async connect(dbStr: string): Promise<Store> {
    // Specifiers in variables: the core must not depend on ioredis, nor on the Redis store at type-check time.
    const ioredisModule = 'ioredis';
    const storeModule = '../../../stores/redis/index.js';
    let client: RedisClientLike;
    try {
      const mod = (await import(ioredisModule)) as { default?: unknown; Redis?: unknown };
      const Redis = (mod.Redis ?? mod.default) as new (url: string) => RedisClientLike;
      client = new Redis(dbStr);
    } catch (error) {
      throw setupError('ioredis could not be loaded or refused dbStr (npm install ioredis)', error);
    }
    this.client = client;
    client.on?.('error', (error) => this.onClientError?.(error));
    if (this.closed) {
      client.disconnect?.();
      throw new FloodgateError(ErrorCode.CLOSED, 'the grounded middleware was closed before Redis was ready.');
    }
    try {
      const { LocalFirstStore } = (await import(storeModule)) as {
        LocalFirstStore: new (options: { client: unknown; leaseMs?: number; maxKeys?: number }) => Store;
      };
      const options: { client: unknown; leaseMs?: number; maxKeys?: number } = { client };
      if (this.tuning.leaseMs !== undefined) options.leaseMs = this.tuning.leaseMs;
      if (this.tuning.maxKeys !== undefined) options.maxKeys = this.tuning.maxKeys;
      this.store = new LocalFirstStore(options);
      return this.store;
    } catch (error) {
      client.disconnect?.();
      throw setupError('the Redis store could not be created', error);
    }
  }
}

function setupError(what: string, cause: unknown): FloodgateError {
  const wrapped = toStoreError(cause, 'redis');
  return new FloodgateError(ErrorCode.STORE_ERROR, `dbStr: ${what}: ${wrapped.message}`, cause);
}
