/** Pieces every benchmark server shares: waiting for Redis, the 200 and 429 answers every server gives, and reading its variant from the environment. */
import type { ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import { RateLimiterRes } from 'rate-limiter-flexible';

/** Resolves true when the request is admitted, false when limited; rejects only on a real failure. */
export type Decide = (key: string) => Promise<boolean>;

/** What a server's limiter set-up returns: how to decide (undefined for the bare baseline) and what to close at exit. */
export interface Setup {
  decide: Decide | undefined;
  /** The decision made synchronously when the limiter can (floodgate's consumeNow), else undefined: then ask `decide`. */
  decideNow?: (key: string) => boolean | undefined;
  close: () => Promise<void>;
}

/**
 * A {@link Decide} over a rate-limiter-flexible limiter, which rejects with a
 * RateLimiterRes when limited (false here) and with an Error when its store
 * fails (a rejection here).
 */
export function rlfDecide(limiter: { consume(key: string): Promise<unknown> }): Decide {
  return (key) =>
    limiter.consume(key).then(
      () => true,
      (reason: unknown) => {
        if (reason instanceof RateLimiterRes) return false;
        throw reason;
      },
    );
}

/** Resolves once `client` is ready, so a warm-up exercises the limiter rather than ioredis's offline queue. */
export function connected(client: Redis): Promise<void> {
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', (error: Error) =>
      reject(new Error(`cannot connect to Redis at ${client.options.host}:${client.options.port}: ${error.message}`)),
    );
  });
}

/** The answer to an admitted request: 200 `{}`. */
export function ok(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
}

/** The answer to a limited request: 429 `Too Many Requests`. */
export function limited(res: ServerResponse): void {
  res.writeHead(429, { 'content-type': 'text/plain' }).end('Too Many Requests');
}

/** Reads environment variable `name`, which must be one of `allowed` (default: the first). */
export function oneOf<T extends string>(name: string, allowed: readonly T[]): T {
  const value = process.env[name] ?? allowed[0];
  if (!allowed.includes(value as T)) {
    throw new Error(`${name} must be one of ${allowed.join(', ')}; got ${JSON.stringify(value)}.`);
  }
  return value as T;
}
