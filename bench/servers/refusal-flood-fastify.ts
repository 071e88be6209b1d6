/** Server process of the refusal-flood-fastify benchmark: Fastify 5, 5 random keys, 5 points per second, limited by nothing, floodgate, @fastify/rate-limit or rate-limiter-flexible. */
import fastifyRateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { benchEnv, type BenchEnv, floodgateOnRedis, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { DURATION_S, POINTS, rlfOnRedis } from '../lib/refusal-flood.js';
import { connected } from '../lib/endpoint.js';

/** Which limiter, from REFUSAL_FLOOD_FASTIFY_LIMITER (see bench/scenarios/refusal-flood-fastify.ts). */
type LimiterKind = 'none' | 'floodgate' | 'floodgate-plain' | 'fastify-rate-limit' | 'rlf';
const KINDS: readonly LimiterKind[] = ['none', 'floodgate', 'floodgate-plain', 'fastify-rate-limit', 'rlf'];

/** A random one of 5 keys per request. Every limiter gets this same function. */
const randomKey = (): string => String(Math.floor(Math.random() * 5));

runServer(async () => {
  const env = benchEnv();
  const kind = process.env.REFUSAL_FLOOD_FASTIFY_LIMITER ?? 'none';
  if (!KINDS.includes(kind as LimiterKind)) {
    throw new Error(`REFUSAL_FLOOD_FASTIFY_LIMITER must be one of ${KINDS.join(', ')}; got ${JSON.stringify(kind)}.`);
  }
  // Fastify's defaults (logger off) for every variant; only the limiter differs.
  const app = Fastify();
  // Limiters are registered before the route: the plugins see routes as they are added.
  const close = await addLimiter(app, env, kind as LimiterKind);
  // The handler: 200 with `{}`.
  app.get('/', (_request, reply) => {
    reply.code(200).send({});
  });
  await app.ready();
  // Fastify's server is a plain node:http server once ready, so the shared helper gives it the harness's
  // `ready` line and SIGTERM handling; the Redis client is quit on the way out.
  serve(app.server, env.port, close);
});

/** Adds the variant's limiter to `app`; returns what to close at exit. */
async function addLimiter(app: FastifyInstance, env: BenchEnv, kind: LimiterKind): Promise<() => Promise<void>> {
  if (kind === 'none') return async () => {};

  // Every library gets an ioredis client with default options, so none gains from client tuning.
  const client = new Redis(requireRedisUrl(env));
  // Listen only once connected, so the warm-up exercises the limiter rather than ioredis's offline queue.
  await connected(client);
  const quit = async (): Promise<void> => {
    await client.quit();
  };

  if (kind === 'fastify-rate-limit') {
    // Its defaults otherwise: onRequest hook, x-ratelimit-* headers, JSON error body.
    await app.register(fastifyRateLimit, {
      max: POINTS,
      timeWindow: DURATION_S * 1000,
      redis: client,
      keyGenerator: randomKey,
    });
    return quit;
  }

  if (kind === 'rlf') {
    const limiter = rlfOnRedis(client, true);
    // rate-limiter-flexible has no Fastify plugin; an onRequest hook is where the other two check too.
    app.addHook('onRequest', (_request, reply, done) => {
      limiter.consume(randomKey()).then(
        () => done(),
        (reason: unknown) => {
          // It rejects with a RateLimiterRes when limited (answer without calling done) and with an Error when Redis fails.
          if (reason instanceof RateLimiterRes) reply.code(429).send('Too Many Requests');
          else done(reason instanceof Error ? reason : new Error(String(reason)));
        },
      );
    });
    return quit;
  }

  // From the run's copy of dist/, the package as users get it (see importDist).
  const { limiter, close: closeStore } = await floodgateOnRedis(client, POINTS, DURATION_S);
  const { rateLimit } = await importDist<typeof import('../../dist/esm/http/adapters/fastify.js')>(
    'esm/http/adapters/fastify.js',
    'the Fastify plugin (src/http/adapters/fastify)',
  );
  await app.register(
    rateLimit,
    kind === 'floodgate-plain'
      ? // The response rlf's hook sends: a 429 with a short text body and no rate-limit fields, so both do the same work per refusal.
        { limiter, key: randomKey, headers: 'none', body: 'text' }
      : // @fastify/rate-limit's default is the x-ratelimit-* trio; 'legacy' is floodgate's closest mode.
        { limiter, key: randomKey, headers: 'legacy' },
  );
  return async () => {
    await closeStore();
    await quit();
  };
}
