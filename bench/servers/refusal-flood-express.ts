/** Server process of the refusal-flood-express benchmark: Express 5, 5 random keys, 5 points per second, limited by nothing, floodgate, express-rate-limit or rate-limiter-flexible. */
import { createServer } from 'node:http';
import express, { type RequestHandler } from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { Redis } from 'ioredis';
import { RedisStore as ExpressRateLimitRedisStore, type RedisReply } from 'rate-limit-redis';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { benchEnv, type BenchEnv, floodgateOnRedis, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { DURATION_S, POINTS, rlfOnRedis } from '../lib/refusal-flood.js';
import { connected } from '../lib/endpoint.js';

/** Which limiter, from REFUSAL_FLOOD_EXPRESS_LIMITER (see bench/scenarios/refusal-flood-express.ts). */
type LimiterKind = 'none' | 'floodgate' | 'express-rate-limit' | 'rlf';
const KINDS: readonly LimiterKind[] = ['none', 'floodgate', 'express-rate-limit', 'rlf'];

/** A random one of 5 keys per request. Every limiter gets this same function. */
const randomKey = (): string => String(Math.floor(Math.random() * 5));

interface Setup {
  middleware: RequestHandler | undefined;
  close: () => Promise<void>;
}

runServer(async () => {
  const env = benchEnv();
  const kind = process.env.REFUSAL_FLOOD_EXPRESS_LIMITER ?? 'none';
  if (!KINDS.includes(kind as LimiterKind)) {
    throw new Error(`REFUSAL_FLOOD_EXPRESS_LIMITER must be one of ${KINDS.join(', ')}; got ${JSON.stringify(kind)}.`);
  }
  const { middleware, close } = await setUp(env, kind as LimiterKind);

  // The same app for every variant; only the middleware in front of the route differs.
  const app = express();
  if (middleware) app.use(middleware);
  // The handler: 200 with `{}`.
  app.get('/', (_req, res) => {
    res.status(200).json({});
  });
  serve(createServer(app), env.port, close);
});

async function setUp(env: BenchEnv, kind: LimiterKind): Promise<Setup> {
  if (kind === 'none') return { middleware: undefined, close: async () => {} };

  // Every library gets an ioredis client with default options, so none gains from client tuning.
  const client = new Redis(requireRedisUrl(env));
  // Listen only once connected, so the warm-up exercises the limiter rather than ioredis's offline queue.
  await connected(client);
  const quit = async (): Promise<void> => {
    await client.quit();
  };

  if (kind === 'express-rate-limit') {
    const middleware = expressRateLimit({
      windowMs: DURATION_S * 1000,
      limit: POINTS,
      keyGenerator: randomKey,
      // Its defaults, spelled out: legacy X-RateLimit-* headers, no IETF draft headers.
      legacyHeaders: true,
      standardHeaders: false,
      // rate-limit-redis's documented ioredis adapter.
      store: new ExpressRateLimitRedisStore({
        sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as Promise<RedisReply>,
      }),
    });
    return { middleware, close: quit };
  }

  if (kind === 'rlf') {
    const limiter = rlfOnRedis(client, true);
    // rate-limiter-flexible has no Express middleware; this is one consume call per request, made a middleware.
    const middleware: RequestHandler = (_req, res, next) => {
      limiter.consume(randomKey()).then(
        () => next(),
        (reason: unknown) => {
          // It rejects with a RateLimiterRes when limited and with an Error when Redis fails.
          if (reason instanceof RateLimiterRes) res.status(429).send('Too Many Requests');
          else next(reason);
        },
      );
    };
    return { middleware, close: quit };
  }

  // From the run's copy of dist/, the package as users get it (see importDist).
  const { limiter, close: closeStore } = await floodgateOnRedis(client, POINTS, DURATION_S);
  const { rateLimit } = await importDist<typeof import('../../dist/esm/http/adapters/express.js')>(
    'esm/http/adapters/express.js',
    'the Express middleware (src/http/adapters/express)',
  );
  const middleware = rateLimit({
    limiter,
    key: randomKey,
    // express-rate-limit's default is the legacy X-RateLimit-* trio (rlf sends none), so floodgate sends the same.
    headers: 'legacy',
  });
  return {
    middleware,
    close: async () => {
      await closeStore();
      await quit();
    },
  };
}
