/** Helpers for benchmark server processes: read the harness's environment, listen, say "ready", exit on SIGTERM. */
import type { Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** What the harness tells a server process (see {@link Variant} in bench/types.ts). */
export interface BenchEnv {
  /** Port to listen on, on 127.0.0.1. */
  readonly port: number;
  /** The variant's name. */
  readonly variant: string;
  /** URL of the run's Redis, when the harness started one. */
  readonly redisUrl: string | undefined;
  /** The run's PostgreSQL, for variants with `postgres: true`. */
  readonly postgresUrl: string | undefined;
  /** `host:port,…` of the run's Redis Cluster, when the harness started one. */
  readonly redisCluster: string | undefined;
}

/** Reads the harness's environment; throws when started without it (e.g. by hand without FLOODGATE_BENCH_PORT). */
export function benchEnv(): BenchEnv {
  const port = Number(process.env.FLOODGATE_BENCH_PORT);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error('FLOODGATE_BENCH_PORT must be set to a free port; benchmark servers are started by `npm run bench`.');
  }
  return {
    port,
    variant: process.env.FLOODGATE_BENCH_VARIANT ?? '',
    redisUrl: process.env.FLOODGATE_BENCH_REDIS_URL || undefined,
    postgresUrl: process.env.FLOODGATE_BENCH_POSTGRES_URL || undefined,
    redisCluster: process.env.FLOODGATE_BENCH_REDIS_CLUSTER || undefined,
  };
}

/** Returns the PostgreSQL URL or throws a message that says why it is missing. */
export function requirePostgresUrl(env: BenchEnv): string {
  if (!env.postgresUrl) {
    throw new Error(
      `variant ${env.variant} needs PostgreSQL but FLOODGATE_BENCH_POSTGRES_URL is not set; mark the variant with postgres: true.`,
    );
  }
  return env.postgresUrl;
}

/** Returns the Redis URL or throws a message that says why it is missing. */
export function requireRedisUrl(env: BenchEnv): string {
  if (!env.redisUrl) {
    throw new Error(`variant ${env.variant} needs Redis but FLOODGATE_BENCH_REDIS_URL is not set; mark the variant with redis: true.`);
  }
  return env.redisUrl;
}

/**
 * Listens on 127.0.0.1:`port`, prints `ready`, and on SIGTERM/SIGINT closes
 * the server, runs `onClose` (e.g. to quit a Redis client) and exits 0.
 * Exits 1 with the error on stderr if listening fails.
 */
export function serve(server: Server, port: number, onClose?: () => Promise<void> | void): void {
  server.on('error', (error) => {
    console.error(error);
    process.exit(1);
  });
  server.listen(port, '127.0.0.1', () => {
    // The harness waits for exactly this line; anything else on stdout is ignored.
    process.stdout.write('ready\n');
  });
  let closing = false;
  const shutdown = (): void => {
    if (closing) return;
    closing = true;
    // wrk's keep-alive connections would hold close() open; the run is over, so drop them.
    server.closeAllConnections();
    server.close();
    Promise.resolve()
      .then(onClose)
      .catch((error: unknown) => console.error(error))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

/**
 * Runs a server's start-up. A failure prints its message alone, no stack:
 * the harness quotes the server's output in the report, and the message is
 * what a reader needs there. Exits 1.
 */
export function runServer(start: () => Promise<void>): void {
  start().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}

/**
 * Imports a file of the built package, e.g. `importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the core')`,
 * from the run's copy of dist/ (`FLOODGATE_BENCH_DIST`, see bench/lib/dist.ts)
 * or, when started by hand, from dist/ itself. "Module not found" becomes an
 * error that says what is missing.
 */
export async function importDist<T>(path: string, what: string): Promise<T> {
  const dist = process.env.FLOODGATE_BENCH_DIST || fileURLToPath(new URL('../../dist', import.meta.url));
  const url = pathToFileURL(join(dist, path)).href;
  try {
    return (await import(url)) as T;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') {
      throw new Error(
        `${what} could not be loaded from ${join(dist, path)}: is it in src/ yet? (\`npm run bench\` builds dist/ first.) ${(error as Error).message}`,
        { cause: error },
      );
    }
    throw error;
  }
}

/**
 * The refusal-flood framework servers' floodgate limiter: a RateLimiter with the
 * in-memory block on a RedisStore over `client`, from the run's copy of dist/.
 * `close` closes the store (not the client).
 */
export async function floodgateOnRedis(
  client: import('ioredis').Redis,
  limit: number,
  windowS: number,
): Promise<{ limiter: import('../../dist/esm/index.js').RateLimiter; close: () => Promise<void> }> {
  const { RateLimiter } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
  const { RedisStore } = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>(
    'esm/stores/redis/index.js',
    'RedisStore (src/stores/redis)',
  );
  const store = new RedisStore({ client });
  const limiter = new RateLimiter({ limit, window: `${windowS}s`, store, inMemoryBlock: true });
  return { limiter, close: () => store.close() };
}
