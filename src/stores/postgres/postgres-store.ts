/** PostgresStore: the four algorithms, composites and concurrency slots as PL/pgSQL functions on one PostgreSQL table. */
/**
 * One round trip per event-loop turn: the turn's operations go to one function call that locks each key's row.
 */
import { windowArgument } from '../../core/calendar-window.js';
import type { Clock } from '../../core/clock.js';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError, toStoreError } from '../../core/errors.js';
import { ALGORITHMS, capacityOf, OP_CODE, samePolicy, type Operation, type Outcome, type Policy } from '../../core/policy.js';
import { slotCallError, type SlotAcquisition } from '../../core/slots.js';
import { assertKnownOptions, invalid, MAX_TIMER_MS, optionalBoolean, optionalFunction, wholeNumber } from '../../core/validate.js';
import { PolicyBindings } from '../policy-bindings.js';
import type { Store } from '../store.js';
import type { PostgresClient } from './postgres-client.js';
import { OPTION_NAMES, tableName, type PostgresStoreOptions } from './postgres-options.js';
import { schemaSql } from './schema-sql.js';
import { decodeOutcomes, TurnQueries, type ApplyBatch } from './turn-queries.js';

/** Algorithm codes of the functions (step-sql.ts). */
const ALGORITHM_CODE: Readonly<Record<Policy['algorithm'], number>> = {
  'fixed-window': 0,
  'sliding-window': 1,
  'sliding-log': 2,
  'token-bucket': 3,
};
/** Operations per batch: a key's batch is one loop in the function, so a flood on one key still answers in parts. */
const MAX_OPS_PER_BATCH = 500;
/** Rows one clean-up deletes per table; the rest wait for the next interval. */
const CLEANUP_BATCH = 1000;
/** How late expired rows are deleted when the store has a client clock (as RedisStore's TTLs with one). */
const CLIENT_TIME_SLACK_MS = 60_000;

/**
 * A {@link Store} on PostgreSQL through node-postgres, for apps that run PostgreSQL and no Redis.
 *
 * State lives in one table: a row per key with its algorithm's numbers (or the sliding log's timestamps), its block
 * and its expiry. Each operation is `applyOperation` as a PL/pgSQL function, step for step in the same integer
 * arithmetic, so PostgreSQL decides as the memory store and the Redis scripts do; a key's row is locked while it is
 * decided (`SELECT … FOR UPDATE`), so concurrent processes never over-admit.
 *
 * Calls are queued and sent once per event-loop turn: the turn's operations, grouped per key, go to one call of the
 * apply function (one round trip, one transaction; rows locked in key order, so calls never deadlock). Composites and
 * slot calls are one function call each. A timer deletes expired rows in small batches, skipping locked rows, so the
 * clean-up never blocks a decision.
 *
 * Failures reject with a {@link FloodgateError}: STORE_TIMEOUT after `timeoutMs`, STORE_ERROR for a database or
 * connection error, CLOSED after {@link close}. Being limited is an Outcome, not an error. As RedisStore, the store
 * remembers which policy last used each key and rejects another limiter's policy on it with CONFLICTING_OPTIONS.
 */
export class PostgresStore implements Store {
  /** @inheritDoc */
  readonly name = 'postgres';
  /** The table the counters live in. */
  readonly table: string;
  /** The turn's timeout in ms. */
  readonly timeoutMs: number;
  private readonly client: PostgresClient;
  private readonly clock: Clock | undefined;
  private readonly createSchema: boolean;
  private readonly unlogged: boolean;
  private readonly queries: TurnQueries;
  private readonly bindings = new PolicyBindings();
  /** The batch still open for more operations, per key: this turn's, replaced when the turn's calls are taken. */
  private openBatches = new Map<string, ApplyBatch & { readonly policyObject: Policy }>();
  private schema: Promise<void> | undefined;
  /** Set when a call found the schema gone: the next {@link ready} makes it without asking first. */
  private schemaLost = false;
  private readonly cleanup: NodeJS.Timeout | undefined;
  private closed = false;

  /** @param options - see {@link PostgresStoreOptions}; invalid ones throw a FloodgateError. */
  constructor(options: PostgresStoreOptions) {
    assertKnownOptions(options, OPTION_NAMES, 'PostgresStore');
    const client = options.client as unknown;
    if (typeof client !== 'object' || client === null || typeof (client as PostgresClient).query !== 'function') {
      invalid(
        ErrorCode.INVALID_CLIENT,
        'PostgresStore client',
        'a node-postgres Pool or Client (new pg.Pool({ connectionString }))',
        client,
      );
    }
    this.client = options.client;
    this.table = tableName(options.table, 'PostgresStore');
    this.unlogged = optionalBoolean(options.unlogged, 'PostgresStore unlogged') ?? false;
    this.createSchema = optionalBoolean(options.createSchema, 'PostgresStore createSchema') ?? true;
    this.clock = optionalFunction(options.clock, 'PostgresStore clock');
    const durations = { min: 1, max: MAX_TIMER_MS, code: ErrorCode.INVALID_DURATION };
    this.timeoutMs = wholeNumber(options.timeoutMs ?? 500, 'PostgresStore timeoutMs', durations);
    const cleanupMs = wholeNumber(options.cleanupIntervalMs ?? 60_000, 'PostgresStore cleanupIntervalMs', { ...durations, min: 0 });
    const t = this.table;
    this.queries = new TurnQueries({
      client: this.client,
      timeoutMs: this.timeoutMs,
      apply: {
        name: `floodgate:${t}:apply_v1`,
        text:
          `SELECT ${t}_apply_v1($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], ` +
          '$8::bigint[], $9::bigint[], $10::int[], $11::int[], $12::bigint[], $13::bigint[]) AS r',
      },
      ready: () => this.ready(),
      onError: (error) => {
        // 42883 undefined_function, 42P01 undefined_table: the schema went away (a restored database); make it again.
        const code = (error as { code?: unknown } | null)?.code;
        if (code === '42883' || code === '42P01') {
          this.schema = undefined;
          this.schemaLost = true;
        }
      },
    });
    this.queries.onTake = () => {
      if (this.openBatches.size > 0) this.openBatches = new Map();
    };
    if (cleanupMs > 0) {
      this.cleanup = setInterval(() => void this.clean().catch(() => {}), cleanupMs);
      this.cleanup.unref();
    }
  }

  /** @inheritDoc */
  apply(operation: Operation): Promise<Outcome> {
    if (this.closed) return Promise.reject(closedError());
    const code = OP_CODE[operation.kind];
    const policy = operation.policy;
    if (!Object.hasOwn(OP_CODE, operation.kind) || typeof code !== 'number') {
      return Promise.reject(
        new FloodgateError(
          ErrorCode.INVALID_OPTIONS,
          `PostgresStore cannot apply operation ${describeValue(operation.kind)}; known: ${Object.keys(OP_CODE).join(', ')}.`,
        ),
      );
    }
    const algorithmError = unknownAlgorithm(policy);
    if (algorithmError !== undefined) return Promise.reject(algorithmError);
    let t: number;
    try {
      t = this.clock ? this.clock() : performance.now();
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    const conflict = this.bindings.check(operation.key, policy, t);
    if (conflict !== undefined) return Promise.reject(conflict);
    return new Promise<Outcome>((answered, reject) => {
      const resolve = (outcome: Outcome): void => {
        this.bindings.bind(operation.key, policy, t, outcome.resetMs);
        answered(outcome);
      };
      let batch = this.openBatches.get(operation.key);
      if (batch === undefined || !samePolicy(batch.policyObject, policy) || batch.waiters.length >= MAX_OPS_PER_BATCH) {
        // A new batch also takes over the key, so a later operation never joins one ahead of this one.
        const row = rowKey(operation.key);
        batch = { key: row, policy: this.columns(policy, t), policyObject: policy, kinds: [], amounts: [], nows: [], waiters: [] };
        this.openBatches.set(operation.key, batch);
        this.queries.pushBatch(batch);
      }
      batch.kinds.push(code);
      batch.amounts.push(operation.amount);
      batch.nows.push(this.clock ? t : null);
      batch.waiters.push({ resolve, reject });
      this.queries.countOp();
    });
  }

  /**
   * Consumes every operation's amount or none (`applyComposite`), in one function call that locks the keys' rows in
   * key order: parts may differ in algorithm, limit, window and block. Fails as {@link apply} does.
   */
  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    if (this.closed) return Promise.reject(closedError());
    const bad = compositeError(operations);
    if (bad !== undefined) return Promise.reject(bad);
    let t: number;
    try {
      t = this.clock ? this.clock() : performance.now();
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    for (const o of operations) {
      const conflict = this.bindings.check(o.key, o.policy, t);
      if (conflict !== undefined) return Promise.reject(conflict);
    }
    const columns: unknown[][] = Array.from({ length: 10 }, () => []);
    for (const o of operations) {
      columns[0]!.push(rowKey(o.key));
      this.columns(o.policy, t).forEach((value, i) => columns[i + 1]!.push(value));
      columns[9]!.push(o.amount);
    }
    const table = this.table;
    return new Promise<Outcome[]>((resolve, reject) => {
      this.queries.pushQuery({
        query: {
          name: `floodgate:${table}:consume_all_v1`,
          text:
            `SELECT ${table}_consume_all_v1($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], ` +
            '$7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint) AS r',
          values: [...columns, this.clock ? t : null],
        },
        answer: (error, row) => {
          const outcomes = error ?? decodeOutcomes(row?.r, operations.length);
          if (outcomes instanceof FloodgateError) return reject(outcomes);
          operations.forEach((o, i) => this.bindings.bind(o.key, o.policy, t, outcomes[i]!.resetMs));
          resolve(outcomes);
        },
      });
      // A later operation on one of these keys must not join a batch queued before the composite.
      for (const o of operations) this.openBatches.delete(o.key);
    });
  }

  /**
   * Takes a concurrency slot (see SlotStore.acquireSlot): the key's expired slots (rows of `<table>_slots`) are
   * dropped and the owner's is added while fewer than `limit` remain, under a per-key advisory lock.
   */
  acquireSlot(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition> {
    const bad = slotCallError('PostgresStore', key, owner, ttlMs, limit);
    if (bad) return Promise.reject(bad);
    return this.slot(
      'acquire_slot_v1',
      [rowKey(key), limit, owner, ttlMs],
      '$1::text, $2::bigint, $3::text, $4::bigint, $5::bigint',
      (r) => {
        const v = Array.isArray(r) && r.length === 3 ? r.map(Number) : [];
        return v.length === 3 ? { admitted: v[0] === 1, inUse: v[1]!, retryAfterMs: v[2]! } : undefined;
      },
    );
  }

  /** Frees `owner`'s unexpired slot of `key` (see SlotStore.releaseSlot), in one function call. */
  releaseSlot(key: string, owner: string): Promise<boolean> {
    const bad = slotCallError('PostgresStore', key, owner);
    return bad ? Promise.reject(bad) : this.slot('release_slot_v1', [rowKey(key), owner], '$1::text, $2::text, $3::bigint', flag);
  }

  /** Extends `owner`'s unexpired slot of `key` (see SlotStore.renewSlot), in one function call. */
  renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const bad = slotCallError('PostgresStore', key, owner, ttlMs);
    return bad
      ? Promise.reject(bad)
      : this.slot('renew_slot_v1', [rowKey(key), owner, ttlMs], '$1::text, $2::text, $3::bigint, $4::bigint', flag);
  }

  /**
   * Deletes up to 1000 expired rows of each table now (the timer's work), skipping rows a call holds; resolves with
   * how many went. Rows expire by the store's clock, a minute late with a client clock, else by PostgreSQL's.
   */
  async clean(): Promise<number> {
    if (this.closed) throw closedError();
    await this.ready();
    const now = this.clock ? this.clock() - CLIENT_TIME_SLACK_MS : null;
    try {
      const result = await this.client.query({
        name: `floodgate:${this.table}:clean_v1`,
        text: `SELECT ${this.table}_clean_v1($1::bigint, 0, $2::int) AS n`,
        values: [now, CLEANUP_BATCH],
      });
      return Number((result.rows[0] as { n?: unknown } | undefined)?.n ?? 0);
    } catch (error) {
      throw toStoreError(error, this.name);
    }
  }

  /**
   * Stops the clean-up timer and rejects every queued and in-flight call with CLOSED, and every later one. Does not end
   * the client, which belongs to the caller. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.cleanup);
    this.queries.abort(closedError());
  }

  /**
   * Resolves once the schema exists: made once per store (unless `createSchema: false`), again after a failure or
   * when a call found it gone. A schema whose last function exists is left alone: the DDL would lock the table (its
   * `CREATE INDEX IF NOT EXISTS` takes a SHARE lock before it finds the index), stalling writes at every start.
   */
  private ready(): Promise<void> {
    if (!this.createSchema) return Promise.resolve();
    this.schema ??= (async () => {
      if (!this.schemaLost) {
        const probe = await this.client.query({
          text: `SELECT to_regprocedure('${this.table}_clean_v1(bigint,bigint,integer)') IS NOT NULL AS made`,
        });
        if ((probe.rows[0] as { made?: unknown } | undefined)?.made === true) return;
      }
      await this.client.query({ text: schemaSql(this.table, this.unlogged) });
      this.schemaLost = false;
    })().catch((error: unknown) => {
      this.schema = undefined;
      throw toStoreError(error, this.name);
    });
    return this.schema;
  }

  /** One slot function call for this turn; `decode` reads its value `r` (undefined for a reply of the wrong shape). */
  private slot<T>(fn: string, args: unknown[], params: string, decode: (r: unknown) => T | undefined): Promise<T> {
    if (this.closed) return Promise.reject(closedError());
    let now: number | null;
    try {
      now = this.clock ? this.clock() : null;
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    return new Promise<T>((resolve, reject) => {
      this.queries.pushQuery({
        query: { name: `floodgate:${this.table}:${fn}`, text: `SELECT ${this.table}_${fn}(${params}) AS r`, values: [...args, now] },
        answer: (error, row) => {
          if (error) return reject(error);
          const value = decode(row?.r);
          if (value !== undefined) return resolve(value);
          reject(new FloodgateError(ErrorCode.STORE_ERROR, `postgres store failed: ${fn} answered ${describeValue(row?.r)}.`));
        },
      });
    });
  }

  /**
   * A policy as the functions' columns: algorithm code, limit, bucket size, initial tokens, window, period ends, block.
   * `t` is the store clock's time of the call (the time base of the host's performance.now() without one).
   */
  private columns(policy: Policy, t: number): ApplyBatch['policy'] {
    const cap = capacityOf(policy);
    // A calendar window's period ends come from this host's clock (or the store's); the function picks by its now.
    const at = this.clock ? t : Date.now();
    const [, e1 = '0', e2 = '0'] = windowArgument(policy.windowMs, policy.calendar, at).split(':');
    return [
      ALGORITHM_CODE[policy.algorithm],
      policy.limit,
      cap,
      policy.initialTokens ?? cap,
      policy.windowMs,
      Number(e1),
      Number(e2),
      policy.blockMs,
    ];
  }
}

/**
 * A store key as the table's key: PostgreSQL text cannot hold NUL, so NUL becomes `\0` and, so that no two keys meet,
 * a backslash becomes two. Other keys, nearly all, are kept as they are.
 */
function rowKey(key: string): string {
  return key.includes('\0') || key.includes('\\') ? key.replaceAll('\\', '\\\\').replaceAll('\0', '\\0') : key;
}

function flag(r: unknown): boolean | undefined {
  const x = Number(r);
  return x === 0 || x === 1 ? x === 1 : undefined;
}

function unknownAlgorithm(policy: Policy): FloodgateError | undefined {
  if (ALGORITHMS.includes(policy.algorithm)) return undefined;
  return new FloodgateError(
    ErrorCode.INVALID_ALGORITHM,
    `PostgresStore has no function for algorithm ${describeValue(policy.algorithm)}; known: ${ALGORITHMS.join(', ')}.`,
  );
}

/** The error for a composite no store decides: a key twice, an operation other than consume, an unknown algorithm. */
function compositeError(operations: readonly Operation[]): FloodgateError | undefined {
  const keys = new Set<string>();
  for (const o of operations) {
    if (keys.has(o.key)) {
      return new FloodgateError(
        ErrorCode.INVALID_COMPOSITE,
        `PostgresStore consumeAll takes each key once, but ${JSON.stringify(o.key)} appears twice; add the costs into one part.`,
      );
    }
    keys.add(o.key);
    if (o.kind !== 'consume') {
      return new FloodgateError(
        ErrorCode.INVALID_COMPOSITE,
        `PostgresStore consumeAll takes consume operations only, not ${describeValue(o.kind)}.`,
      );
    }
    const bad = unknownAlgorithm(o.policy);
    if (bad !== undefined) return bad;
  }
  return undefined;
}

function closedError(): FloodgateError {
  return new FloodgateError(ErrorCode.CLOSED, 'PostgresStore was closed; create a new store to keep limiting.');
}
