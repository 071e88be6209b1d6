/** Public surface of `floodgate/postgres`: the PostgreSQL store. */
/**
 * Loads no PostgreSQL client; pass in your own node-postgres Pool or Client.
 */

export { PostgresStore, postgresSchemaSql } from './postgres-store.js';
export type { PostgresStoreOptions } from './postgres-store.js';
export type { PostgresClient, PostgresQuery } from './postgres-client.js';
