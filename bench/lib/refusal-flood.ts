/** The refusal-flood scenarios' shared policy (5 points per 1 s window) and their rate-limiter-flexible peer, so the node:http, Express and Fastify servers measure the same limits. */
import type { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';

/** The policy: 5 points per 1 s window, so a flood of requests on 5 keys is nearly all refused. */
export const POINTS = 5;
export const DURATION_S = 1;

/**
 * rate-limiter-flexible's Redis limiter on the same policy; with `block`,
 * its in-memory block (keys that used their points are refused
 * without Redis until the window ends).
 */
export function rlfOnRedis(client: Redis, block: boolean): RateLimiterRedis {
  return new RateLimiterRedis({
    storeClient: client,
    points: POINTS,
    duration: DURATION_S,
    ...(block ? { inMemoryBlockOnConsumed: POINTS } : {}),
  });
}
