/** Scenario refusal-flood-express: the refusal-flood endpoint (5 random keys, 5 points/s, in-memory block) under Express 5 — floodgate vs express-rate-limit vs rate-limiter-flexible on Redis. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/refusal-flood-express.ts', import.meta.url));

/** One variant of bench/servers/refusal-flood-express.ts, configured through REFUSAL_FLOOD_EXPRESS_LIMITER. */
function variant(name: string, description: string, limiter: string): Variant {
  return { name, description, server, env: { REFUSAL_FLOOD_EXPRESS_LIMITER: limiter }, redis: limiter !== 'none' };
}

/**
 * The refusal-flood endpoint on Express, with each library's Express
 * integration. Fastify is a separate scenario
 * (refusal-flood-fastify) rather than more rows here, because the harness divides
 * every ratio by the first row only: each framework needs its own bare
 * baseline for the ratios to mean "cost of the limiter on this framework".
 * Run both with `npm run bench -- refusal-flood-express` and `… refusal-flood-fastify`.
 */
export default defineScenario({
  name: 'refusal-flood-express',
  description:
    'Express 5, random key of 5, 5 points per 1 s, Redis + in-memory block: floodgate vs express-rate-limit vs rate-limiter-flexible',
  variants: [
    variant('express-bare', 'Express, no limiter, always 200', 'none'),
    variant('express-floodgate', "floodgate/express on RedisStore (ioredis) + inMemoryBlock: true, headers: 'legacy'", 'floodgate'),
    variant('express-rate-limit', 'express-rate-limit + rate-limit-redis (ioredis call), default legacy headers', 'express-rate-limit'),
    variant('express-rlf', 'rate-limiter-flexible RateLimiterRedis (ioredis) + inMemoryBlockOnConsumed: 5 in a middleware', 'rlf'),
  ],
});
