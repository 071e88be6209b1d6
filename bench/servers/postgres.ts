/** Server process of the postgres benchmark: node:http, each request limited per API key on PostgreSQL — floodgate's PostgresStore (with and without the in-memory block, logged or unlogged) or rate-limiter-flexible's RateLimiterPostgres. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import pg from 'pg';
import { RateLimiterPostgres } from 'rate-limiter-flexible';
import { benchEnv, importDist, requirePostgresUrl, runServer, serve } from '../lib/serve.js';
import { limited, ok, oneOf, rlfDecide, type Decide } from '../lib/endpoint.js';

type Core = typeof import('../../dist/esm/index.js');
type Postgres = typeof import('../../dist/esm/stores/postgres/index.js');

/** Which limiter, from the variant's environment (see bench/scenarios/postgres.ts). */
const KINDS = ['none', 'floodgate', 'floodgate-block', 'floodgate-unlogged', 'rlf'] as const;
type Kind = (typeof KINDS)[number];

/** Per API key: 600 a minute. The many keys never reach it; the hot key is over it within the warm-up. */
const LIMIT = 600;
const WINDOW_S = 60;
/** Connections each library gets to PostgreSQL: pg.Pool's default. */
const POOL_SIZE = 10;

runServer(async () => {
  const env = benchEnv();
  const kind = oneOf('POSTGRES_LIMITER', KINDS);
  const { decide, close } = kind === 'none' ? { decide: undefined, close: async () => {} } : await setUp(kind, requirePostgresUrl(env));
  let failures = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const key = new URLSearchParams((req.url ?? '/').slice((req.url ?? '/').indexOf('?') + 1)).get('key');
    if (decide === undefined || !key) {
      if (!key) res.writeHead(400).end();
      else ok(res);
      return;
    }
    decide(key).then(
      (allowed) => (allowed ? ok(res) : limited(res)),
      (error: unknown) => {
        if (failures++ < 3) console.error('limit check failed:', error);
        res.writeHead(500).end();
      },
    );
  });
  serve(server, env.port, close);
});

async function setUp(kind: Exclude<Kind, 'none'>, url: string): Promise<{ decide: Decide; close: () => Promise<void> }> {
  // Both libraries get a pg.Pool with default options, so neither gains from client tuning.
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE });
  const end = async (): Promise<void> => {
    await pool.end();
  };
  if (kind === 'rlf') {
    const limiter = await new Promise<RateLimiterPostgres>((resolve, reject) => {
      const made: RateLimiterPostgres = new RateLimiterPostgres(
        { storeClient: pool, points: LIMIT, duration: WINDOW_S, tableName: 'rlf_bench', keyPrefix: 'bench' },
        (error?: Error) => (error ? reject(error) : resolve(made)),
      );
    });
    return { decide: rlfDecide(limiter), close: end };
  }
  const { RateLimiter } = await importDist<Core>('esm/index.js', 'the core');
  const { PostgresStore } = await importDist<Postgres>('esm/stores/postgres/index.js', 'the PostgreSQL store');
  const store = new PostgresStore({ client: pool, unlogged: kind === 'floodgate-unlogged' });
  const limiter = new RateLimiter({
    store,
    limit: LIMIT,
    window: `${WINDOW_S}s`,
    prefix: 'bench',
    // Off but in the block variant: every request is then one PostgreSQL decision.
    inMemoryBlock: kind === 'floodgate-block',
  });
  const decide: Decide = async (key) => (await limiter.consume(key)).allowed;
  return {
    decide,
    close: async () => {
      await store.close();
      await end();
    },
  };
}
