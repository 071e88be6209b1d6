/** Server process of the reservations benchmark: node:http on Redis, each request deciding through one consume, a concurrency slot held until the response ends, or a reservation settled after it, by floodgate and by the peers. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { Semaphore } from 'redis-semaphore';
import { benchEnv, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { connected, limited, ok, oneOf } from '../lib/endpoint.js';

/** Which limiter, from the variant's environment (see bench/scenarios/reservations.ts). */
const KINDS = [
  'none',
  'consume',
  'concurrency',
  'local-first-consume',
  'local-first-reserve',
  'rlf-consume-reward',
  'redis-semaphore',
] as const;
type Kind = (typeof KINDS)[number];

/** 1 000 keys, and limits no key reaches: the scenario measures the cost of the admitted path. */
const KEYS = 1000;
const RATE_LIMIT = 1_000_000;
const IN_FLIGHT = 1000;
/** A reservation's estimate, and its settled cost drawn around it (so commits both give back and charge). */
const ESTIMATE = 10;

/**
 * Admits or refuses one request; `done` runs when its response has ended,
 * where a slot is released or a reservation settled.
 */
type Decide = (key: string) => Promise<{ allowed: boolean; done?: () => void }>;

runServer(async () => {
  const env = benchEnv();
  const kind = oneOf('RESERVATIONS_LIMITER', KINDS);
  const { decide, close } = kind === 'none' ? { decide: undefined, close: async () => {} } : await setUp(kind, requireRedisUrl(env));
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    if (decide === undefined) {
      ok(res);
      return;
    }
    const key = `u${Math.floor(Math.random() * KEYS)}`;
    decide(key).then(
      ({ allowed, done }) => {
        if (done !== undefined) res.once('finish', done);
        if (allowed) ok(res);
        else limited(res);
      },
      (error: unknown) => {
        fail(error);
        res.writeHead(500).end();
      },
    );
  });
  serve(server, env.port, close);
});

let failures = 0;
/** Reports a failed decision or settlement: the first few only, as a dead Redis would otherwise flood stderr at wrk's rate. */
function fail(error: unknown): void {
  if (failures++ < 3) console.error('limit step failed:', error);
}

async function setUp(kind: Exclude<Kind, 'none'>, redisUrl: string): Promise<{ decide: Decide; close: () => Promise<void> }> {
  // Every library gets an ioredis client with default options, so none gains from client tuning.
  const client = new Redis(redisUrl);
  await connected(client);
  const quit = async (): Promise<void> => {
    await client.quit();
  };
  if (kind === 'rlf-consume-reward') return { decide: rlfConsumeReward(client), close: quit };
  if (kind === 'redis-semaphore') return { decide: semaphore(client), close: quit };

  // From the run's copy of dist/, the package as users get it (see importDist).
  const core = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
  const redis = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>('esm/stores/redis/index.js', 'the Redis stores');
  const store = kind.startsWith('local-first') ? new redis.LocalFirstStore({ client }) : new redis.RedisStore({ client });
  const close = async (): Promise<void> => {
    await store.close?.();
    await quit();
  };
  switch (kind) {
    case 'consume': {
      const limiter = new core.RateLimiter({ store, limit: RATE_LIMIT, window: '1m' });
      return { decide: (key) => limiter.consume(key).then((d) => ({ allowed: d.allowed })), close };
    }
    case 'local-first-consume': {
      const limiter = new core.RateLimiter({ store, limit: RATE_LIMIT, window: '1m' });
      return { decide: (key) => limiter.consume(key).then((d) => ({ allowed: d.allowed })), close };
    }
    case 'local-first-reserve': {
      const limiter = new core.RateLimiter({ store, limit: RATE_LIMIT, window: '1m' });
      return {
        decide: (key) =>
          limiter.reserve(key, ESTIMATE).then((reservation) => ({
            allowed: reservation.allowed,
            done: () => void reservation.commit(settledCost()).catch(fail),
          })),
        close,
      };
    }
    case 'concurrency': {
      const limiter = new core.ConcurrencyLimiter({ store, limit: IN_FLIGHT, ttl: '30s' });
      return {
        decide: (key) =>
          limiter.acquire(key).then((slot) => ({
            allowed: slot.allowed,
            done: () => void slot.release().catch(fail),
          })),
        close,
      };
    }
  }
}

/** A settled cost from ESTIMATE − 5 to ESTIMATE + 5. */
function settledCost(): number {
  return ESTIMATE - 5 + Math.floor(Math.random() * 11);
}

/** rate-limiter-flexible's settle-after pattern: consume the estimate, then reward or penalise the difference when the response ends. */
function rlfConsumeReward(client: Redis): Decide {
  const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: 'rlf-reserve', points: RATE_LIMIT, duration: 60 });
  return (key) =>
    limiter.consume(key, ESTIMATE).then(
      () => ({
        allowed: true,
        done: () => {
          const difference = settledCost() - ESTIMATE;
          const settle = difference < 0 ? limiter.reward(key, -difference) : limiter.penalty(key, difference);
          settle.catch(fail);
        },
      }),
      (reason: unknown) => {
        if (reason instanceof RateLimiterRes) return { allowed: false };
        throw reason;
      },
    );
}

/** redis-semaphore's Semaphore: one slot of IN_FLIGHT per key, held until the response ends (its own refresh timer, as floodgate's heartbeat). */
function semaphore(client: Redis): Decide {
  return async (key) => {
    const slot = new Semaphore(client, `sem:${key}`, IN_FLIGHT, { lockTimeout: 30_000, acquireAttemptsLimit: 1 });
    const allowed = await slot.tryAcquire();
    return { allowed, ...(allowed ? { done: () => void slot.release().catch(fail) } : {}) };
  };
}
