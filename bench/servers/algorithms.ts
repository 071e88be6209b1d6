/** Server process of the algorithms benchmark: node:http, random key of 0–10, 100 requests per second, limited by nothing, one of floodgate's algorithms on Redis, or a peer library. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { RedisRateLimiter } from 'rolling-rate-limiter';
import { benchEnv, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { type Setup, connected, rlfDecide, ok, limited, oneOf } from '../lib/endpoint.js';

/** Which limiter, from the variant's environment (see bench/scenarios/algorithms.ts). */
const ALGORITHMS = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'] as const;
type Algorithm = (typeof ALGORITHMS)[number];
type LimiterKind = 'none' | Algorithm | 'rlf' | 'rolling' | 'ratelimiter';
const KINDS: readonly LimiterKind[] = ['none', ...ALGORITHMS, 'rlf', 'rolling', 'ratelimiter'];

/** The policy: 100 requests per 1 s, per key; keys 0–10. */
const POINTS = 100;
const DURATION_S = 1;
const KEYS = 11;

/** Result of ratelimiter's `get`: `remaining` counts the calls left before this one, so 0 means limited. */
interface TjLimit {
  remaining: number;
  total: number;
  reset: number;
  resetMs: number;
}
interface TjLimiter {
  get(callback: (error: Error | null, limit: TjLimit) => void): void;
}
type TjLimiterConstructor = new (options: { id: string; db: unknown; max: number; duration: number }) => TjLimiter;

runServer(async () => {
  const env = benchEnv();
  const kind = oneOf('ALGORITHMS_LIMITER', KINDS);
  const { decide, close } = kind === 'none' ? { decide: undefined, close: async () => {} } : await setUp(kind, requireRedisUrl(env));
  let failures = 0;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    // Bare baseline: answer synchronously, so the ratio shows the whole cost of limiting.
    if (decide === undefined) {
      ok(res);
      return;
    }
    // A random key from 0 to 10 per request.
    const key = String(Math.floor(Math.random() * KEYS));
    decide(key).then(
      (allowed) => (allowed ? ok(res) : limited(res)),
      (error: unknown) => {
        // Report the first few failures only: a dead Redis would otherwise flood stderr at wrk's rate.
        if (failures++ < 3) console.error('limit check failed:', error);
        res.writeHead(500).end();
      },
    );
  });
  serve(server, env.port, close);
});

async function setUp(kind: Exclude<LimiterKind, 'none'>, redisUrl: string): Promise<Setup> {
  // Every library gets an ioredis client with default options, so none gains from client tuning.
  const client = new Redis(redisUrl);
  // Listen only once connected, so the warm-up exercises the limiter rather than ioredis's offline queue.
  await connected(client);
  const quit = async (): Promise<void> => {
    await client.quit();
  };

  switch (kind) {
    case 'rlf': {
      const limiter = new RateLimiterRedis({ storeClient: client, points: POINTS, duration: DURATION_S });
      return {
        decide: rlfDecide(limiter),
        close: quit,
      };
    }
    case 'rolling': {
      // RedisRateLimiter duck-types its client: an ioredis instance (it has `zremrangebyscore`)
      // gets its ioredis wrapper, one MULTI of ZREMRANGEBYSCORE, ZADD, ZRANGE WITHSCORES, EXPIRE.
      const limiter = new RedisRateLimiter({ client, namespace: 'rrl:', interval: DURATION_S * 1000, maxInInterval: POINTS });
      if (limiter.detectedClientType !== 'ioredis')
        throw new Error(`rolling-rate-limiter took the client for ${limiter.detectedClientType}, not ioredis.`);
      // `limit` resolves true when the action is blocked.
      return { decide: (key) => limiter.limit(key).then((blocked) => !blocked), close: quit };
    }
    case 'ratelimiter': {
      // ratelimiter is CommonJS without types; require it and describe the part used above.
      const Limiter = createRequire(import.meta.url)('ratelimiter') as TjLimiterConstructor;
      // It calls only `db.multi([[cmd, ...args], ...]).exec(callback)` and reads ioredis's
      // [error, result] reply pairs itself, so the ioredis client is its `db` unchanged, no shim.
      // One Limiter per key, made once: its constructor only stores options, and the Redis key
      // (`limit:<id>`) carries the state, so this is the same as its README's one-per-request.
      const limiters = new Map<string, TjLimiter>();
      const limiterFor = (key: string): TjLimiter => {
        let limiter = limiters.get(key);
        if (limiter === undefined) {
          limiter = new Limiter({ id: key, db: client, max: POINTS, duration: DURATION_S * 1000 });
          limiters.set(key, limiter);
        }
        return limiter;
      };
      return {
        decide: (key) =>
          new Promise((resolve, reject) => {
            limiterFor(key).get((error, limit) => (error ? reject(error) : resolve(limit.remaining > 0)));
          }),
        close: quit,
      };
    }
    default: {
      // From the run's copy of dist/, the package as users get it (see importDist).
      const { RateLimiter } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
      const { RedisStore } = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>(
        'esm/stores/redis/index.js',
        'RedisStore (src/stores/redis)',
      );
      const store = new RedisStore({ client });
      // No inMemoryBlock: at saturation it would answer most 429s in process, and this scenario measures the algorithms on Redis.
      const limiter = new RateLimiter({ limit: POINTS, window: `${DURATION_S}s`, algorithm: kind, store });
      return {
        decide: (key) => limiter.consume(key).then((decision) => decision.allowed),
        close: async () => {
          await store.close?.();
          await quit();
        },
      };
    }
  }
}
