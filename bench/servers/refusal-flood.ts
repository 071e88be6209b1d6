/** Server process of the refusal-flood benchmark: node:http, 5 random keys, 5 points per second, limited by nothing, floodgate (memory, Redis through ioredis or valkey-glide) or rate-limiter-flexible. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Redis } from 'ioredis';
import type { Store } from '../../dist/esm/index.js';
import { benchEnv, type BenchEnv, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { DURATION_S, POINTS, rlfOnRedis } from '../lib/refusal-flood.js';
import { type Setup, connected, rlfDecide, ok, limited, oneOf } from '../lib/endpoint.js';

/** Which limiter, from the variant's environment (see bench/scenarios/refusal-flood.ts). */
type LimiterKind = 'none' | 'floodgate' | 'rlf';
type StoreKind = 'memory' | 'redis' | 'glide';

/** The variant, as bench/scenarios/refusal-flood.ts configures it. */
interface Config {
  env: BenchEnv;
  limiter: LimiterKind;
  store: StoreKind;
  block: boolean;
}

runServer(async () => {
  const config: Config = {
    env: benchEnv(),
    limiter: oneOf<LimiterKind>('REFUSAL_FLOOD_LIMITER', ['none', 'floodgate', 'rlf']),
    store: oneOf<StoreKind>('REFUSAL_FLOOD_STORE', ['memory', 'redis', 'glide']),
    block: process.env.REFUSAL_FLOOD_BLOCK === '1',
  };
  const { decide, decideNow, close } = await setUp(config);
  let failures = 0;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    // Bare baseline: answer synchronously, so the ratio shows the whole cost of limiting.
    if (decide === undefined) {
      ok(res);
      return;
    }
    // A random one of 5 keys per request.
    const key = String(Math.floor(Math.random() * 5));
    // floodgate answers at once when it can (in-memory block, memory store), as its HTTP middleware does.
    const now = decideNow?.(key);
    if (now !== undefined) {
      if (now) ok(res);
      else limited(res);
      return;
    }
    decide(key).then(
      (allowed) => (allowed ? ok(res) : limited(res)),
      (error: unknown) => {
        // Report the first few failures only: a dead Redis would otherwise flood stderr at wrk's rate.
        if (failures++ < 3) console.error('consume failed:', error);
        res.writeHead(500).end();
      },
    );
  });
  serve(server, config.env.port, close);
});

async function setUp({ env, limiter: limiterKind, store: storeKind, block }: Config): Promise<Setup> {
  if (limiterKind === 'none') return { decide: undefined, close: async () => {} };
  if (storeKind === 'glide') return floodgateOnGlide(env, block);

  // Both libraries get an ioredis client with default options, so neither gains from client tuning.
  const client = storeKind === 'redis' ? new Redis(requireRedisUrl(env)) : undefined;
  // Listen only once connected, so the warm-up exercises the limiter rather than ioredis's offline queue.
  if (client) await connected(client);
  const quit = async (): Promise<void> => {
    await client?.quit();
  };

  if (limiterKind === 'rlf') {
    if (client === undefined) throw new Error('rlf variants are measured on Redis only; set REFUSAL_FLOOD_STORE=redis.');
    const limiter = rlfOnRedis(client, block);
    return {
      decide: rlfDecide(limiter),
      close: quit,
    };
  }

  // From the run's copy of dist/, the package as users get it (see importDist).
  const { MemoryStore, RateLimiter } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
  let store: Store;
  if (client === undefined) {
    store = new MemoryStore();
  } else {
    const { RedisStore } = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>(
      'esm/stores/redis/index.js',
      'RedisStore (src/stores/redis)',
    );
    store = new RedisStore({ client });
  }
  const limiter = new RateLimiter({
    limit: POINTS,
    window: `${DURATION_S}s`,
    store,
    ...(block ? { inMemoryBlock: true } : {}),
  });
  return {
    decide: (key) => limiter.consume(key).then((decision) => decision.allowed),
    decideNow: (key) => limiter.consumeNow(key)?.allowed,
    close: async () => {
      await store.close?.();
      await quit();
    },
  };
}

/** floodgate's RedisStore on a valkey-glide GlideClient, loaded only by the glide variants. */
async function floodgateOnGlide(env: BenchEnv, block: boolean): Promise<Setup> {
  const { GlideClient } = await import('@valkey/valkey-glide');
  const url = new URL(requireRedisUrl(env));
  // glide's request timeout (250 ms by default) set to the store's own default, so only one timer decides a timeout.
  const client = await GlideClient.createClient({ addresses: [{ host: url.hostname, port: Number(url.port) }], requestTimeout: 500 });
  const { RateLimiter } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
  const { RedisStore } = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>(
    'esm/stores/redis/index.js',
    'RedisStore (src/stores/redis)',
  );
  const store = new RedisStore({ client });
  const limiter = new RateLimiter({ limit: POINTS, window: `${DURATION_S}s`, store, ...(block ? { inMemoryBlock: true } : {}) });
  return {
    decide: (key) => limiter.consume(key).then((decision) => decision.allowed),
    decideNow: (key) => limiter.consumeNow(key)?.allowed,
    close: async () => {
      await store.close();
      client.close();
    },
  };
}
