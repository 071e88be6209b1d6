/** Scenario postgres: node:http limiting per API key on PostgreSQL — floodgate's PostgresStore against rate-limiter-flexible's RateLimiterPostgres on the same server. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/postgres.ts', import.meta.url));

/** One variant of bench/servers/postgres.ts, selected by its POSTGRES_LIMITER environment. */
function variant(name: string, description: string, limiter: string): Variant {
  return { name, description, server, env: { POSTGRES_LIMITER: limiter }, postgres: limiter !== 'none' };
}

/**
 * Each request names an API key (`/?key=k123`): 9 in 10 one of 10 000 keys
 * chosen at random, which never reach their 600 a minute; 1 in 10 the one hot
 * key, over its limit within the warm-up, so the refusal path runs too. Every
 * variant gets a pg.Pool of 10 connections to the one PostgreSQL of the run
 * (fsync off, as the tests run it).
 *
 * Target (issue 34): floodgate-postgres ≥ 2 × rlf-postgres in requests/s
 * from one run, server µs/req printed; with the in-memory block, the hot
 * key's refusals cost no query.
 */
export default defineScenario({
  name: 'postgres',
  description:
    'node:http, per API key on PostgreSQL (10 000 keys + 1 hot key, 600/min): PostgresStore (logged, unlogged, in-memory block) vs RateLimiterPostgres',
  connections: 64,
  wrkLua: `
request = function()
  if math.random(1, 10) == 1 then
    return wrk.format("GET", "/?key=hot")
  end
  return wrk.format("GET", "/?key=k" .. math.random(0, 9999))
end
`,
  variants: [
    variant('bare', 'no limiter, always 200', 'none'),
    variant(
      'floodgate-postgres',
      'RateLimiter on PostgresStore (pg.Pool), in-memory block off: every request one decision in PostgreSQL',
      'floodgate',
    ),
    variant('floodgate-postgres-unlogged', 'the same on an UNLOGGED table (no WAL; emptied by a crash)', 'floodgate-unlogged'),
    variant('floodgate-postgres-block', 'the same with the in-memory block on: the hot key refused in the process', 'floodgate-block'),
    variant('rlf-postgres', "rate-limiter-flexible's RateLimiterPostgres (pg.Pool), its defaults", 'rlf'),
  ],
});
