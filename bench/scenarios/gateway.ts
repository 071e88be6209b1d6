/** Scenario gateway: the rate-limiting reverse proxy — 20 API keys, 3 requests per 5 s, many connections; floodgate's gateway on memory, Redis and Redis local-first vs a MULTI/SET NX EX/INCR proxy, plus a high-limit pair against the bare proxy. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';
import { API_KEYS_WRK_LUA } from '../lib/api-keys.js';

const server = fileURLToPath(new URL('../servers/gateway.ts', import.meta.url));
const plain = fileURLToPath(new URL('../servers/gateway-upstream.ts', import.meta.url));

/** One variant of bench/servers/gateway.ts, selected by GATEWAY_MODE. */
function variant(name: string, description: string, mode: string, redis = false, redisCluster = false): Variant {
  return { name, description, server, env: { GATEWAY_MODE: mode }, redis, redisCluster };
}

/**
 * A rate-limiting proxy in front of an app service: every request carries
 * one of 20 API keys in X-API-KEY, 3 requests per key per 5 s window, so at
 * saturation ~all answers are 429. The reference, multi-incr-proxy, is the
 * MULTI+INCR proxy the project's founding gateway benchmark (write-up 004 in
 * docs/benchmarks.md) measured: each 429 still costs it one Redis
 * transaction (`MULTI; SET key 0 NX EX 5; INCR key; EXEC`).
 *
 * Every variant forwards with the same proxy code (floodgate's
 * UpstreamProxy, an undici pool) to the same upstream (a child process
 * answering 200 `{}`); only the limiting differs. The first row, the bare
 * proxy, is the baseline of the ratio column. Targets: gateway-redis ≥ 3 ×
 * multi-incr-proxy (in-memory block: known-exhausted keys are refused without
 * Redis), and gateway-high ≥ 0.85 × bare-proxy (a limit no key reaches, so
 * every request is forwarded and the limiter's cost shows).
 *
 * The last row, a plain node:http server that answers by itself, is the
 * latency reference: nearly every request here is refused from memory, so a
 * gateway's answer costs about what a plain server's does, and at one rate
 * (`--open-loop R`, R = 80 % of gateway-memory's requests/s) the gateways'
 * p99 should stay within 2 × this server's.
 */
export default defineScenario({
  name: 'gateway',
  description:
    'gateway (reverse proxy), 20 API keys in X-API-KEY, 3 per 5 s, saturated: floodgate gateway on memory / Redis / Redis local-first vs a MULTI+INCR proxy',
  connections: 256,
  // One API key on every request (oha sends fixed fields): latency at 50 % and 80 % of each variant's own saturation.
  openLoop: { shares: [0.5, 0.8], headers: { 'X-API-KEY': 'api-key-1' } },
  wrkLua: API_KEYS_WRK_LUA,
  variants: [
    variant('bare-proxy', 'the gateway with no rules: proxy only, every request forwarded', 'bare'),
    variant('gateway-memory', 'floodgate serve: 3/5s per X-API-KEY on the embedded memory store', 'memory'),
    variant('gateway-redis', 'floodgate serve --redis: RedisStore (ioredis) + in-memory block', 'redis', true),
    variant(
      'gateway-redis-cluster',
      'floodgate serve --redis-cluster: RedisStore on a 3-master Redis Cluster (ioredis Cluster) + in-memory block; target ≤ 1.2 × gateway-redis server µs/req',
      'redis-cluster',
      false,
      true,
    ),
    variant('gateway-redis-local-first', 'floodgate serve --redis --local-first: LocalFirstStore (ioredis)', 'local-first', true),
    variant(
      'multi-incr-proxy',
      'the reference: same proxy, one MULTI SET NX EX 5 + INCR round trip per request, no in-memory block',
      'multi-incr',
      true,
    ),
    variant(
      'gateway-workers-2',
      'floodgate serve --workers 2, memory rule (the cluster store in the primary): compare its server µs/req with gateway-memory',
      'memory-workers',
    ),
    variant(
      'gateway-high',
      'floodgate serve, memory store, limit 1e9/5s: every request forwarded (compare with bare-proxy)',
      'memory-high',
    ),
    variant(
      'gateway-redis-cluster-high',
      'floodgate serve --redis-cluster, limit 1e9/5s: every request forwarded, one Redis Cluster call each (compare with gateway-redis-high)',
      'redis-cluster-high',
      false,
      true,
    ),
    variant(
      'gateway-redis-high',
      'floodgate serve --redis, limit 1e9/5s: every request forwarded, one Redis call each',
      'redis-high',
      true,
    ),
    {
      name: 'node-http',
      description:
        'a plain node:http server answering 200 {} itself: the latency reference (with --open-loop R, every variant at the same rate R)',
      server: plain,
    },
  ],
});
