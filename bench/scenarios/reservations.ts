/** Scenario reservations: node:http on Redis — a concurrency slot held until the response ends and a reservation settled after it, against one consume, and the peers' ways of doing the same. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/reservations.ts', import.meta.url));

/** One variant of bench/servers/reservations.ts, selected by its RESERVATIONS_LIMITER environment. */
function variant(name: string, description: string, limiter: string): Variant {
  return { name, description, server, env: { RESERVATIONS_LIMITER: limiter }, redis: limiter !== 'none' };
}

/**
 * 1 000 keys at random, limits no key reaches (1 000 in flight per key,
 * 1 000 000 a minute): every request is admitted, so the table shows the
 * cost of the admitted path, the one a service pays on every request.
 *
 * Targets: floodgate-concurrency (acquire, then release when the response
 * ends) ≤ 1.5 × floodgate-consume in server CPU per request;
 * floodgate-local-first-reserve (reserve 10, then commit 5 to 15) within
 * 1.2 × floodgate-local-first-consume. The fixed-rate run gives both
 * processes' CPU per request at one rate for every variant.
 */
export default defineScenario({
  name: 'reservations',
  description:
    'node:http on Redis, 1 000 keys, nothing refused: concurrency slot held until the response ends, reservation settled after it, vs one consume and the peers',
  fixedRate: 5000,
  variants: [
    variant('bare', 'no limiter, always 200', 'none'),
    variant('floodgate-consume', 'one RateLimiter.consume on RedisStore (ioredis)', 'consume'),
    variant('floodgate-concurrency', 'ConcurrencyLimiter on RedisStore: acquire, release when the response ends', 'concurrency'),
    variant('redis-semaphore', "redis-semaphore's Semaphore (ioredis): tryAcquire, release when the response ends", 'redis-semaphore'),
    variant('floodgate-local-first-consume', 'one RateLimiter.consume on LocalFirstStore (ioredis)', 'local-first-consume'),
    variant('floodgate-local-first-reserve', 'reserve 10 on LocalFirstStore, commit 5 to 15 when the response ends', 'local-first-reserve'),
    variant(
      'rlf-consume-reward',
      'rate-limiter-flexible RateLimiterRedis: consume 10, reward or penalty when the response ends',
      'rlf-consume-reward',
    ),
  ],
});
