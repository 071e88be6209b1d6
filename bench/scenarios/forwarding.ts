/** Scenario forwarding: what an admitted (forwarded) request costs, against a minimal Node.js proxy and nginx, in one run. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';
import { API_KEYS_WRK_LUA } from '../lib/api-keys.js';

const gateway = fileURLToPath(new URL('../servers/gateway.ts', import.meta.url));
const nodeProxy = fileURLToPath(new URL('../servers/node-proxy.ts', import.meta.url));
const nginx = fileURLToPath(new URL('../servers/nginx.ts', import.meta.url));
const plain = fileURLToPath(new URL('../servers/gateway-upstream.ts', import.meta.url));

/** One variant of bench/servers/gateway.ts, selected by GATEWAY_MODE. */
function gatewayVariant(name: string, description: string, mode: string, redis = false): Variant {
  return { name, description, server: gateway, env: { GATEWAY_MODE: mode }, redis };
}

/**
 * Every request is forwarded (no limit is ever reached), so the rows show
 * what a forwarded request costs: the reference rows first (the simplest
 * correct Node.js proxy, the baseline of the ratio column; nginx with and
 * without limit_req), then floodgate's gateway with no rules, a memory rule
 * and a Redis rule. The figure of record is server µs/req.
 *
 * All variants forward to ONE upstream the harness starts on the load
 * generator's core (`upstream: true`), so its CPU is not counted as the
 * server's and it does not compete for the server's core. Targets (issue 31):
 * floodgate-bare ≤ 1.0 × node-proxy, floodgate-memory ≤ 1.10 × floodgate-bare,
 * floodgate-redis ≤ 1.25 × floodgate-bare, in server µs/req.
 *
 * The last row, a plain node:http server that answers by itself, is the
 * reference of the tail targets: run with `--connections 200` (the harness
 * lets each server go idle for a second after its warm-up, so 200
 * connections open together into a warm process) and again with
 * `--warmup 0` (into a freshly started one), a gateway's p99 should stay
 * within 5 × its p50 and 3 × this server's p99.
 *
 * Each variant is also loaded open-loop at 80 % of its own requests/s (oha,
 * one API key). The plain server saturates far higher than a gateway, so its
 * 80 % is another rate; for the open-loop target (floodgate-memory and
 * floodgate-redis p99 ≤ 2 × the plain server's at the same rate) load all
 * three at one rate R = 0.8 × the gateway's saturating requests/s (the
 * requests/s column of a run on the same machine):
 * `npm run bench -- forwarding --variants floodgate-memory,floodgate-redis,node-http --open-loop R`.
 * The Redis rule saturates lower than the memory one: give both 80 % rates
 * (`--open-loop R1,R2`) and read each gateway's own column.
 */
export default defineScenario({
  name: 'forwarding',
  description:
    'forwarded requests, 20 API keys in X-API-KEY, a limit never reached, 64 connections: floodgate gateway vs a minimal Node.js proxy and nginx',
  connections: 64,
  upstream: true,
  openLoop: { shares: [0.8], headers: { 'X-API-KEY': 'api-key-1' } },
  wrkLua: API_KEYS_WRK_LUA,
  variants: [
    {
      name: 'node-proxy',
      description: 'the reference: node:http + undici Pool.request, keep-alive, headers passed through (minus hop-by-hop), bodies piped',
      server: nodeProxy,
    },
    { name: 'nginx', description: 'nginx, 1 worker, proxy_pass to a keep-alive upstream {} (keepalive 64), access_log off', server: nginx },
    {
      name: 'nginx-limit-req',
      description: 'the same plus limit_req by $http_x_api_key at 10^8 r/s, burst 1000 nodelay (never reached)',
      server: nginx,
      env: { NGINX_LIMIT_REQ: '1' },
    },
    gatewayVariant('floodgate-bare', 'floodgate serve, rules: []: proxy only', 'bare'),
    gatewayVariant('floodgate-memory', 'floodgate serve, one rule 1e9/5s by header:x-api-key, memory store', 'memory-high'),
    gatewayVariant('floodgate-redis', 'floodgate serve --redis, the same rule on Redis (one Redis call per request)', 'redis-high', true),
    {
      name: 'node-http',
      description: 'a plain node:http server answering 200 {} itself, forwarding nothing: the latency reference of the tail targets',
      server: plain,
    },
  ],
});
