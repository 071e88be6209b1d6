/** Scenario rls: Envoy's rate limit service API (gRPC ShouldRateLimit) under ghz — envoyproxy/ratelimit vs floodgate's RLS server on Redis, with the in-memory block and local-first. */
import { fileURLToPath } from 'node:url';
import { PROTO_DIR, RLS_PROTO } from '../rls/paths.js';
import { defineScenario, type Variant } from '../types.js';

const reference = fileURLToPath(new URL('../servers/rls-reference.ts', import.meta.url));
const floodgate = fileURLToPath(new URL('../servers/rls-floodgate.ts', import.meta.url));
const floor = fileURLToPath(new URL('../servers/rls-grpc-floor.ts', import.meta.url));
const h2Floor = fileURLToPath(new URL('../servers/rls-h2-floor.ts', import.meta.url));

/** Gateway settings with the in-memory block off (`floodgate serve` turns it on unless a config file says otherwise). */
const NO_BLOCK = fileURLToPath(new URL('../rls/floodgate-no-block.yaml', import.meta.url));

/**
 * The `floodgate serve` flags of each floodgate variant, next to `--grpc`,
 * `--rls-config` and `--redis` (bench/servers/rls-floodgate.ts adds those).
 * Logging at warn, like the reference's LOG_LEVEL. If the server's flags
 * change, this is the one place to follow them.
 */
const FLOODGATE_FLAGS = {
  redis: ['--config', NO_BLOCK, '--log-level', 'warn'],
  memoryBlock: ['--log-level', 'warn'],
  localFirst: ['--local-first', '--log-level', 'warn'],
} as const;

function floodgateVariant(name: string, description: string, flags: readonly string[]): Variant {
  return { name, description, server: floodgate, env: { RLS_FLAGS: JSON.stringify(flags) }, redis: true };
}

/**
 * 100 requests, sent round-robin: each carries a per-org descriptor (10
 * orgs, 10⁸ per hour: never reached) and a per-user one. 90 of them name one of
 * 30 users allowed 50 per hour, over their limit within the warm-up; 10
 * name the one user with a limit never reached. So at steady state 90 % of
 * the answers are OVER_LIMIT and 10 % OK, on every variant
 * (bench/rls/bench-config/bench.yaml has the limits).
 */
function messages(): unknown[] {
  return Array.from({ length: 100 }, (_, i) => ({
    domain: 'bench',
    descriptors: [
      { entries: [{ key: 'org', value: `org-${i % 10}` }] },
      { entries: [{ key: 'user', value: i % 10 === 9 ? 'service-account' : `user-${i % 30}` }] },
    ],
  }));
}

/**
 * One Envoy-style client load against each RLS on the same Redis: ghz on
 * CPU 0 with 64 calls in flight over 4 HTTP/2 connections, the server and
 * Redis on CPU 1. The baseline is envoyproxy/ratelimit with its defaults
 * (every descriptor an INCRBY + EXPIRE pipeline on Redis); targets:
 * floodgate-rls-memory-block and -local-first ≥ 1.5 × its requests/s at a
 * p99 no worse, floodgate-rls ≥ 1.0 ×. The reference's
 * own over-limit cache is shown as well, as the counterpart of floodgate's
 * in-memory block.
 */
export default defineScenario({
  name: 'rls',
  description:
    'Envoy RLS v3 (gRPC ShouldRateLimit), per-org + per-user descriptors, 90 % over the limit, ghz 64 in flight: envoyproxy/ratelimit vs floodgate serve --grpc on Redis',
  connections: 64,
  grpc: {
    proto: RLS_PROTO,
    importPaths: [PROTO_DIR],
    call: 'envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit',
    messages: messages(),
    channels: 4,
  },
  variants: [
    { name: 'envoy-ratelimit', description: 'envoyproxy/ratelimit (Go), Redis, default settings', server: reference, redis: true },
    {
      name: 'envoy-ratelimit-local-cache',
      description: 'envoyproxy/ratelimit with its over-limit local cache (LOCAL_CACHE_SIZE_IN_BYTES=16 MiB)',
      server: reference,
      env: { RLS_REFERENCE_ENV: JSON.stringify({ LOCAL_CACHE_SIZE_IN_BYTES: String(16 * 1024 * 1024) }) },
      redis: true,
    },
    floodgateVariant(
      'floodgate-rls',
      'floodgate serve --grpc --rls-config --redis, in-memory block off (every descriptor decided on Redis)',
      FLOODGATE_FLAGS.redis,
    ),
    floodgateVariant(
      'floodgate-rls-memory-block',
      'the same with the in-memory block on (the default of serve)',
      FLOODGATE_FLAGS.memoryBlock,
    ),
    floodgateVariant(
      'floodgate-rls-local-first',
      'floodgate serve --grpc … --redis --local-first (leases; in-memory block on)',
      FLOODGATE_FLAGS.localFirst,
    ),
    {
      name: 'grpc-js-floor',
      description: '@grpc/grpc-js answering one constant, pre-encoded message, no decision and no Redis: what the gRPC layer alone costs',
      server: floor,
      redis: false,
    },
    {
      name: 'h2-floor',
      description:
        'node:http2 answering the same constant message with gRPC framing and trailers, no gRPC library: what a lean unary path could cost',
      server: h2Floor,
      redis: false,
    },
  ],
});
