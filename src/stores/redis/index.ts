/** Public surface of `floodgate/redis`: the Redis store. Loads no Redis client; pass in your own ioredis or node-redis client. */
export { RedisStore } from './store.js';
export type { RedisStoreOptions } from './store.js';
export type { RedisClient, ClientKind } from './clients.js';
export { redisKeys } from './keys.js';
export type { RedisKeys } from './keys.js';
export { LocalFirstStore } from './local-first/index.js';
export type { LocalFirstStoreOptions, LocalFirstStats } from './local-first/index.js';
