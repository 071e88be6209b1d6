/** Scenario refusal-flood-fastify: the refusal-flood endpoint (5 random keys, 5 points/s, in-memory block) under Fastify 5 — floodgate vs @fastify/rate-limit vs rate-limiter-flexible on Redis. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/refusal-flood-fastify.ts', import.meta.url));

/** One variant of bench/servers/refusal-flood-fastify.ts, configured through REFUSAL_FLOOD_FASTIFY_LIMITER. */
function variant(name: string, description: string, limiter: string): Variant {
  return { name, description, server, env: { REFUSAL_FLOOD_FASTIFY_LIMITER: limiter }, redis: limiter !== 'none' };
}

/**
 * The refusal-flood endpoint on Fastify, the companion of refusal-flood-express: a
 * scenario of its own so that its ratios divide by a bare Fastify server,
 * not by bare Express (the harness's baseline is always the first row).
 */
export default defineScenario({
  name: 'refusal-flood-fastify',
  description:
    'Fastify 5, random key of 5, 5 points per 1 s, Redis + in-memory block: floodgate vs @fastify/rate-limit vs rate-limiter-flexible',
  variants: [
    variant('fastify-bare', 'Fastify, no limiter, always 200', 'none'),
    variant('fastify-floodgate', "floodgate/fastify plugin on RedisStore (ioredis) + inMemoryBlock: true, headers: 'legacy'", 'floodgate'),
    variant(
      'fastify-floodgate-plain',
      "the same plugin answering as the rlf hook does (headers: 'none', body 'Too Many Requests'), for a like-for-like comparison with it",
      'floodgate-plain',
    ),
    variant('fastify-rate-limit', '@fastify/rate-limit with redis: ioredis client, default headers', 'fastify-rate-limit'),
    variant('fastify-rlf', 'rate-limiter-flexible RateLimiterRedis (ioredis) + inMemoryBlockOnConsumed: 5 in an onRequest hook', 'rlf'),
  ],
});
