/** Scenario algorithms: node:http, random key of 0–10, 100 requests per 1 s, at saturation — floodgate's four algorithms on Redis vs a fixed-window and two rolling-window peers. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/algorithms.ts', import.meta.url));

/** One variant of bench/servers/algorithms.ts, selected by its ALGORITHMS_LIMITER environment. */
function variant(name: string, description: string, limiter: string): Variant {
  return { name, description, server, env: { ALGORITHMS_LIMITER: limiter }, redis: limiter !== 'none' };
}

/**
 * The peers: rate-limiter-flexible's fixed window and two rolling-window
 * libraries (rolling-rate-limiter, ratelimiter) on Redis, at 100 requests per
 * second per key, keys 0–10, far more load than the limit allows, so most
 * answers are 429 and every request costs a Redis decision. Here floodgate
 * runs all four of its algorithms on the same endpoint, without the in-memory
 * block (which would answer most of these 429s without Redis and hide the
 * algorithms' cost), next to the three peers and a bare server.
 *
 * Expect 2xx near 0 for rolling-rate-limiter and ratelimiter: both add every
 * attempt, refused ones included, to the key's sorted set (rolling-rate-limiter
 * documents it), so a key kept above 100/s is refused for as long as the load
 * lasts. They still admit 100 per key per second below saturation; the
 * refusals are their semantics, not a broken setup.
 */
export default defineScenario({
  name: 'algorithms',
  description:
    'node:http, random key of 0–10, 100 per 1 s, saturated: floodgate algorithms on Redis vs rate-limiter-flexible, rolling-rate-limiter, ratelimiter',
  variants: [
    variant('bare', 'no limiter, always 200', 'none'),
    variant('floodgate-fixed-window', 'RateLimiter fixed-window on RedisStore (ioredis)', 'fixed-window'),
    variant('floodgate-sliding-window', 'RateLimiter sliding-window on RedisStore (ioredis)', 'sliding-window'),
    variant('floodgate-sliding-log', 'RateLimiter sliding-log on RedisStore (ioredis)', 'sliding-log'),
    variant('floodgate-token-bucket', 'RateLimiter token-bucket on RedisStore (ioredis)', 'token-bucket'),
    variant('rlf-redis', 'rate-limiter-flexible RateLimiterRedis (ioredis), fixed window', 'rlf'),
    variant('rolling-rate-limiter', 'rolling-rate-limiter 0.4 RedisRateLimiter (ioredis), rolling window', 'rolling'),
    variant('ratelimiter', 'ratelimiter 3.4 (tj) Limiter (ioredis as db), rolling window', 'ratelimiter'),
  ],
});
