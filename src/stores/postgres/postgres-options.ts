/** PostgresStore's options, and the check of its table name. */
import type { Clock } from '../../core/clock.js';
import { ErrorCode } from '../../core/errors.js';
import { invalid } from '../../core/validate.js';
import type { PostgresClient } from './postgres-client.js';

/** Options of `PostgresStore` (postgres-store.ts). */
export interface PostgresStoreOptions {
  /**
   * A node-postgres (8 or later) `Pool` (recommended: calls of one turn run on several connections) or connected
   * `Client`. The store only calls `query`; it never connects or ends it.
   */
  client: PostgresClient;
  /**
   * The table the counters live in, `name` or `schema.name` (lower-case letters, digits and `_`, at most 40 characters
   * each). Default `floodgate_counters`. The store also uses `<table>_slots` and functions named `<table>_*_v1`.
   */
  table?: string;
  /**
   * Create the table `UNLOGGED`: writes skip the write-ahead log, so each decision costs less, but a crash or an
   * unclean shutdown of PostgreSQL empties the table (every count, block and slot is forgotten, so keys get a fresh
   * quota) and replicas never see it. Default false. Only applies when the store creates the table.
   */
  unlogged?: boolean;
  /**
   * How long a turn's calls wait for PostgreSQL before they reject with STORE_TIMEOUT, in ms. Default 500. A late
   * answer is ignored, but PostgreSQL may still have applied it.
   */
  timeoutMs?: number;
  /**
   * Time source. By default the functions read PostgreSQL's clock, so hosts with skewed clocks still agree. With a
   * clock, each operation carries the clock's time instead (tests drive the store with a ManualClock); expired rows
   * are then cleaned up a minute late, so a host whose clock lags never loses state it still counts.
   */
  clock?: Clock;
  /**
   * Create the tables and functions at first use (`CREATE TABLE IF NOT EXISTS`, `CREATE OR REPLACE FUNCTION`).
   * Default true. False when the database user may not create them: run `postgresSchemaSql`'s SQL once instead.
   */
  createSchema?: boolean;
  /** How often expired rows are deleted, in ms; 0 for never (clean up yourself with `<table>_clean_v1`). Default 60 000. */
  cleanupIntervalMs?: number;
}

/** Every option's name, for the unknown-option check. */
export const OPTION_NAMES = ['client', 'table', 'unlogged', 'timeoutMs', 'clock', 'createSchema', 'cleanupIntervalMs'] as const;
const TABLE_NAME = /^([a-z_][a-z0-9_]{0,39}\.)?[a-z_][a-z0-9_]{0,39}$/;

/** `value` when it is a valid table name (`name` or `schema.name`), the default when undefined; INVALID_OPTIONS otherwise. */
export function tableName(value: unknown, owner: string): string {
  if (value === undefined) return 'floodgate_counters';
  if (typeof value !== 'string' || !TABLE_NAME.test(value)) {
    invalid(ErrorCode.INVALID_OPTIONS, `${owner} table`, 'a table name like "floodgate_counters" or "app.rate_limits"', value);
  }
  return value;
}
