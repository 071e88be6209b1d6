/** Public surface of `floodgate/redis`: the Redis store. */
/**
 * Loads no Redis client; pass in your own ioredis or node-redis client.
 */

export { RedisStore } from './redis-store.js';
export type { RedisStoreOptions } from './redis-store.js';
export type { RedisClient, ClientKind } from './client-adapter.js';
export { redisKeys } from './key-names.js';
export type { RedisKeys } from './key-names.js';
export { LocalFirstStore } from './local-first/index.js';
export type { LocalFirstStoreOptions, LocalFirstStats } from './local-first/index.js';
