/** Scenario composite: node:http on Redis, a request checked against 3 policies on 2 keys (per-second token bucket + per-day window per user, per-minute per org) — consumeAll vs one policy, vs three separate consumes, vs rate-limiter-flexible's RateLimiterUnion. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/composite.ts', import.meta.url));

/** One variant of bench/servers/composite.ts, selected by its COMPOSITE_LIMITER environment. */
function variant(name: string, description: string, limiter: string): Variant {
  return { name, description, server, env: { COMPOSITE_LIMITER: limiter }, redis: limiter !== 'none' };
}

/**
 * Each request names an organisation and a user (`/?org=o12&user=u345`): 50
 * organisations of 1 000 users, chosen at random, so nearly every request is
 * admitted; one in ten goes to one hot user, whose per-second bucket refuses
 * most of them, so the refusal path runs too. floodgate's parts are keyed
 * `{o12}:u345` and `{o12}`: the common hash tag keeps a composite in one slot
 * on Redis Cluster.
 *
 * Targets: floodgate-composite ≥ 0.85 × floodgate-single and ≥ 2 × rlf-union
 * in requests/s, from one run. Every limiter runs without an in-memory block,
 * so each request costs its Redis decision. rate-limiter-flexible has no
 * token bucket: its per-second limiter is a 1-s fixed window of the same
 * points, and RateLimiterUnion consumes one key on every limiter, so its
 * per-org limiter maps the user key to the org's (see the server).
 */
export default defineScenario({
  name: 'composite',
  description:
    'node:http on Redis, 3 policies on 2 keys (user: 100/s bucket + 1M/day; org: 100k/min): consumeAll vs one policy, three consumes, RateLimiterUnion',
  wrkLua: `
request = function()
  local org, user
  if math.random(1, 10) == 1 then
    org, user = 0, 0
  else
    org, user = math.random(1, 49), math.random(0, 999)
  end
  return wrk.format("GET", "/?org=o" .. org .. "&user=u" .. user)
end
`,
  // Every variant at one rate below the composite's saturation: the server's and Redis's CPU per
  // request then compare the work each does, which the saturated run mixes with how much each loop batches.
  fixedRate: 8000,
  fixedRatePath: requestPath,
  variants: [
    variant('bare', 'no limiter, always 200', 'none'),
    variant('floodgate-single', 'one RateLimiter.consume on RedisStore (ioredis): the per-second token bucket', 'single'),
    variant('floodgate-composite', 'consumeAll over the 3 policies on RedisStore (ioredis): one EVALSHA', 'composite'),
    variant('floodgate-parallel', 'the 3 consumes issued separately on RedisStore (ioredis), admitted if all admit', 'parallel'),
    variant('rlf-union', 'rate-limiter-flexible RateLimiterUnion of 3 RateLimiterRedis (ioredis)', 'rlf-union'),
  ],
});

/** The fixed-rate run's `i`-th path, drawn as the wrk script draws them (one in ten to the hot user), from a fixed sequence. */
function requestPath(i: number): string {
  // A multiplicative hash of i: the same paths in every run and variant, with no state between calls.
  const h = Math.imul(i + 1, 0x9e3779b1) >>> 0;
  if (h % 10 === 0) return '/?org=o0&user=u0';
  return `/?org=o${1 + ((h >>> 4) % 49)}&user=u${(h >>> 10) % 1000}`;
}
