/** The slice of node-postgres (`pg.Pool`, `pg.Client`) PostgresStore uses, typed structurally so pg is never imported. */

/** One query as node-postgres takes it: a `name` makes it a prepared statement, reused on each connection. */
export interface PostgresQuery {
  /** Prepared statement name; absent for a one-off query (sent with the simple protocol when it has no values). */
  readonly name?: string;
  /** The SQL. */
  readonly text: string;
  /** Parameters `$1`…; JavaScript arrays become PostgreSQL arrays. */
  readonly values?: unknown[];
}

/**
 * A node-postgres (8 or later) `Pool` or `Client`, connected, or anything with the same `query`: PostgresStore sends
 * every call through `query(config)` and never connects, ends or releases it.
 */
export interface PostgresClient {
  /** Runs one query; resolves with its rows, rejects with the server's or the connection's error. */
  query(config: PostgresQuery): Promise<{ rows: unknown[] }>;
}
