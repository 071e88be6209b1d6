/** Scenario local-first: local-first mode — node:http, 20 hot keys, a per-key limit that admits nearly everything; memory vs per-request Redis vs local-first, with local Redis and with Redis 20 ms away. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/local-first.ts', import.meta.url));

/** One variant of bench/servers/local-first.ts, configured through its LOCAL_FIRST_* environment. */
function variant(name: string, description: string, store: string, remote: boolean): Variant {
  return {
    name,
    description,
    server,
    env: { LOCAL_FIRST_STORE: store, LOCAL_FIRST_REMOTE: remote ? '1' : '0' },
    redis: store === 'redis' || store === 'local-first',
  };
}

/**
 * A local-cache-and-sync limiter against one Redis round trip per request,
 * with Redis local and far away: the same endpoint is limited by
 * floodgate's memory store (the in-process ceiling), by the per-request
 * RedisStore and by LocalFirstStore, each on a local Redis and
 * on the same Redis behind a TCP proxy adding 20 ms each way (the server
 * starts the proxy, test/support/delay-proxy.ts, as its own child), all in one
 * run so the ratios compare like with like. Every variant's server decides
 * with `consumeNow` first, as the HTTP middleware does: the memory store and
 * local-first with a lease in hand answer without a promise.
 *
 * The limit is chosen so nearly every request is ADMITTED: 20 keys picked at
 * random, 100 000 per key per 10 s (10 000/s per key, 200 000/s in all, far
 * above what one server process serves). A refused request is cheap for every
 * Redis-backed mode once the key is known to be spent (the in-memory block and
 * local-first's exhausted mark both answer it from memory), so a saturated
 * limit would hide exactly the cost this scenario measures: deciding admitted
 * requests. 20 hot keys at ~1 000/s each is also the regime local-first is for
 * (leases of ~100 units); with thousands of cold keys it degrades to about one
 * lease call per request, like per-request Redis.
 *
 * Targets (issue 5): local-first-remote ≥ 10 × redis-remote requests/s;
 * local-first ≥ 0.9 × memory requests/s; Redis cmds/req in the table.
 */
export default defineScenario({
  name: 'local-first',
  description:
    'node:http, 20 random keys, 100k per 10 s per key (nearly all admitted): memory vs per-request Redis vs local-first, local and +20 ms Redis',
  variants: [
    variant('bare', 'no limiter, always 200', 'none', false),
    variant('floodgate-memory', 'RateLimiter on MemoryStore', 'memory', false),
    variant('floodgate-redis', 'RateLimiter on RedisStore (ioredis), one script call per request', 'redis', false),
    variant('floodgate-local-first', 'RateLimiter on LocalFirstStore (ioredis)', 'local-first', false),
    variant('floodgate-redis-remote', 'RedisStore, Redis behind a proxy adding 20 ms each way', 'redis', true),
    variant('floodgate-local-first-remote', 'LocalFirstStore, Redis behind a proxy adding 20 ms each way', 'local-first', true),
  ],
});
