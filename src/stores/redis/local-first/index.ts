/** The local-first mode of the Redis store: leases, block broadcast, and its public names. */
export { LocalFirstStore } from './store.js';
export type { LocalFirstStoreOptions, LocalFirstStats } from './store.js';
