/** Public surface of `floodgate/postgres`: the PostgreSQL store. */
/**
 * Loads no PostgreSQL client; pass in your own node-postgres Pool or Client.
 */

export { PostgresStore } from './postgres-store.js';
export { postgresSchemaSql } from './schema-sql.js';
export type { PostgresStoreOptions } from './postgres-options.js';
export type { PostgresClient, PostgresQuery } from './postgres-client.js';
