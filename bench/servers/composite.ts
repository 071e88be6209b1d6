/** Server process of the composite benchmark: node:http, each request checked against a per-second bucket and a per-day window on its user and a per-minute window on its org, on Redis — by floodgate's consumeAll, one policy, three separate consumes, or rate-limiter-flexible's RateLimiterUnion. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterUnion } from 'rate-limiter-flexible';
import { benchEnv, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { connected, limited, ok, oneOf } from '../lib/endpoint.js';

/** Which limiter, from the variant's environment (see bench/scenarios/composite.ts). */
const KINDS = ['none', 'single', 'composite', 'parallel', 'rlf-union'] as const;
type Kind = (typeof KINDS)[number];

/** The three policies: per user 100 a second (a token bucket) and 1 000 000 a day, per org 100 000 a minute. */
const PER_SECOND = 100;
const PER_DAY = 1_000_000;
const PER_MINUTE = 100_000;

/** Decides a request of `user` (`{o12}:u345`) in `org` (`{o12}`): true when admitted. */
type Decide = (user: string, org: string) => Promise<boolean>;

runServer(async () => {
  const env = benchEnv();
  const kind = oneOf('COMPOSITE_LIMITER', KINDS);
  const { decide, close } = kind === 'none' ? { decide: undefined, close: async () => {} } : await setUp(kind, requireRedisUrl(env));
  let failures = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    // Bare baseline: answer synchronously, so the ratio shows the whole cost of limiting (the query is parsed all the same).
    const keys = keysOf(req.url ?? '/');
    if (decide === undefined || keys === undefined) {
      if (keys === undefined) res.writeHead(400).end();
      else ok(res);
      return;
    }
    decide(keys.user, keys.org).then(
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

/** The user and org keys of `/?org=o12&user=u345`, sharing the hash tag `{o12}`; undefined when either is missing. */
function keysOf(url: string): { user: string; org: string } | undefined {
  const query = new URLSearchParams(url.slice(url.indexOf('?') + 1));
  const org = query.get('org');
  const user = query.get('user');
  if (!org || !user) return undefined;
  return { user: `{${org}}:${user}`, org: `{${org}}` };
}

async function setUp(kind: Exclude<Kind, 'none'>, redisUrl: string): Promise<{ decide: Decide; close: () => Promise<void> }> {
  // Every library gets an ioredis client with default options, so none gains from client tuning.
  const client = new Redis(redisUrl);
  await connected(client);
  const quit = async (): Promise<void> => {
    await client.quit();
  };
  if (kind === 'rlf-union') return { decide: rlfUnion(client), close: quit };

  // From the run's copy of dist/, the package as users get it (see importDist).
  const { RateLimiter, consumeAll } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
  const { RedisStore } = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>(
    'esm/stores/redis/index.js',
    'RedisStore (src/stores/redis)',
  );
  const store = new RedisStore({ client });
  // No inMemoryBlock: it would answer the hot user's refusals in process, and this scenario measures the decisions on Redis.
  const perSecond = new RateLimiter({ store, limit: PER_SECOND, window: '1s', algorithm: 'token-bucket' });
  const perDay = new RateLimiter({ store, limit: PER_DAY, window: '1d' });
  const perOrg = new RateLimiter({ store, limit: PER_MINUTE, window: '1m' });
  const close = async (): Promise<void> => {
    await store.close?.();
    await quit();
  };
  switch (kind) {
    case 'single':
      return { decide: (user) => perSecond.consume(user).then((d) => d.allowed), close };
    case 'composite':
      return {
        decide: (user, org) =>
          consumeAll([
            { limiter: perSecond, key: user },
            { limiter: perDay, key: user },
            { limiter: perOrg, key: org },
          ]).then((d) => d.allowed),
        close,
      };
    case 'parallel':
      // For reference: what stacking limiters costs. Not all or nothing: the parts that admitted keep their units.
      return {
        decide: (user, org) =>
          Promise.all([perSecond.consume(user), perDay.consume(user), perOrg.consume(org)]).then((ds) => ds.every((d) => d.allowed)),
        close,
      };
  }
}

/**
 * RateLimiterUnion of the same three limits. rate-limiter-flexible has no
 * token bucket, so the per-second limit is a 1-s fixed window of the same
 * points. The union consumes one key on every limiter; the per-org limiter
 * maps the user key to its org's key, so it counts per org as floodgate's
 * third part does.
 */
function rlfUnion(client: Redis): Decide {
  class PerOrg extends RateLimiterRedis {
    override consume(key: string | number, points?: number, options?: Record<string, unknown>) {
      const user = String(key);
      return super.consume(user.slice(0, user.indexOf('}') + 1), points, options);
    }
  }
  const union = new RateLimiterUnion(
    new RateLimiterRedis({ storeClient: client, keyPrefix: 'rlf-second', points: PER_SECOND, duration: 1 }),
    new RateLimiterRedis({ storeClient: client, keyPrefix: 'rlf-day', points: PER_DAY, duration: 86_400 }),
    new PerOrg({ storeClient: client, keyPrefix: 'rlf-org', points: PER_MINUTE, duration: 60 }),
  );
  // The union rejects with an object keyed by limiter prefix: a RateLimiterRes for a limiter that refused, an Error for one whose Redis call failed.
  return (user) =>
    union.consume(user).then(
      () => true,
      (reason: Record<string, unknown>) => {
        const failure = Object.values(reason).find((value) => value instanceof Error);
        if (failure !== undefined) throw failure;
        return false;
      },
    );
}
