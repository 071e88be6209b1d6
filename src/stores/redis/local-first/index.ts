/** The local-first mode of the Redis store: leases, block broadcast, and its public names. */
export { LocalFirstStore } from './local-first-store.js';
export type { LocalFirstStoreOptions, LocalFirstStats } from './local-first-options.js';
