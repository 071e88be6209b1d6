/** Public surface of `floodgate/cluster`: the cluster store's worker side, its primary, and their options. */
export { ClusterStore } from './worker.js';
export type { ClusterStoreOptions, ClusterTransport } from './worker.js';
export { ClusterStorePrimary } from './primary.js';
export type { ClusterStorePrimaryOptions, ClusterPrimaryStats, Pm2Api, Pm2Bus, Pm2Packet } from './primary-types.js';
export { MAX_LEASE_MS, PROTOCOL_VERSION } from './protocol.js';
