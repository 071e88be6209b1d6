/** Scenario refusal-flood: the in-memory block strategy (5 random keys, 5 points/s) — floodgate vs rate-limiter-flexible on Redis. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/refusal-flood.ts', import.meta.url));

/** One variant of bench/servers/refusal-flood.ts, configured through its REFUSAL_FLOOD_* environment. */
function variant(name: string, description: string, limiter: string, store: string, block: boolean): Variant {
  return {
    name,
    description,
    server,
    env: { REFUSAL_FLOOD_LIMITER: limiter, REFUSAL_FLOOD_STORE: store, REFUSAL_FLOOD_BLOCK: block ? '1' : '0' },
    redis: store !== 'memory',
  };
}

/**
 * floodgate with and without its in-memory block next to rate-limiter-flexible
 * with and without `inMemoryBlockOnConsumed`, on the same endpoint side by
 * side, plus a bare server as the baseline and floodgate's memory store as
 * the in-process ceiling. floodgate's variants call `consumeNow` first and
 * `consume` only when it returns undefined, as floodgate's HTTP middleware
 * does; rate-limiter-flexible has only its promise API.
 */
export default defineScenario({
  name: 'refusal-flood',
  description: 'node:http, random key of 5, 5 points per 1 s: in-memory block on/off, floodgate vs rate-limiter-flexible',
  variants: [
    variant('bare', 'no limiter, always 200', 'none', 'memory', false),
    variant('floodgate-memory', 'RateLimiter on MemoryStore', 'floodgate', 'memory', false),
    variant('floodgate-redis', 'RateLimiter on RedisStore (ioredis), no in-memory block', 'floodgate', 'redis', false),
    variant('floodgate-redis-block', 'RateLimiter on RedisStore (ioredis) + inMemoryBlock: true', 'floodgate', 'redis', true),
    variant('floodgate-glide', 'RateLimiter on RedisStore (valkey-glide GlideClient), no in-memory block', 'floodgate', 'glide', false),
    variant(
      'floodgate-glide-block',
      'RateLimiter on RedisStore (valkey-glide GlideClient) + inMemoryBlock: true',
      'floodgate',
      'glide',
      true,
    ),
    variant('rlf-redis', 'rate-limiter-flexible RateLimiterRedis (ioredis)', 'rlf', 'redis', false),
    variant('rlf-redis-block', 'RateLimiterRedis (ioredis) + inMemoryBlockOnConsumed: 5', 'rlf', 'redis', true),
  ],
});
