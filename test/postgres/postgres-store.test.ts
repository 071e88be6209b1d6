// PostgresStore on a real PostgreSQL beyond the conformance suite: options, schema, one query per turn, clean-up that never waits on a lock, timeouts and close.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ErrorCode, isFloodgateError, ManualClock, RateLimiter, type ErrorCodeValue, type Policy } from '../../src/index.js';
import { PostgresStore, postgresSchemaSql, type PostgresClient, type PostgresQuery } from '../../src/stores/postgres/index.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';

let server: PostgresServer;
let pool: pg.Pool;
before(async () => {
  server = await startPostgres();
  pool = new pg.Pool({ connectionString: server.url, max: 4 });
  // An idle connection the server ends at teardown reports it here.
  pool.on('error', () => {});
});

/** Runs `fn` with a connection inside an open transaction (to hold row locks), rolled back and released after. */
async function inTransaction(fn: (holder: pg.PoolClient) => Promise<void>): Promise<void> {
  const holder = await pool.connect();
  try {
    await holder.query('BEGIN');
    await fn(holder);
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    holder.release();
  }
}
after(async () => {
  await pool.end();
  await server.stop();
});

const throwsCode = (fn: () => unknown, code: ErrorCodeValue) =>
  assert.throws(fn, (e: unknown) => {
    assert.ok(isFloodgateError(e, code), `expected ${code}, got ${String(e)}`);
    return true;
  });

const rejectsCode = (promise: Promise<unknown>, code: ErrorCodeValue) =>
  assert.rejects(promise, (e: unknown) => {
    assert.ok(isFloodgateError(e, code), `expected ${code}, got ${String(e)}`);
    return true;
  });

const policy = (p: Partial<Policy> = {}): Policy => ({ algorithm: 'fixed-window', limit: 3, windowMs: 1000, blockMs: 0, ...p });

/** The pool, counting the queries that pass through it. */
function counting(): PostgresClient & { queries: PostgresQuery[] } {
  const queries: PostgresQuery[] = [];
  return { queries, query: (config) => (queries.push(config), pool.query(config)) };
}

let tables = 0;
const freshTable = () => `t${++tables}_${process.pid}`;

test('options are checked strictly, with typed errors', () => {
  throwsCode(() => new PostgresStore(undefined as never), ErrorCode.INVALID_OPTIONS);
  throwsCode(() => new PostgresStore({} as never), ErrorCode.INVALID_CLIENT);
  throwsCode(() => new PostgresStore({ client: 'postgres://localhost' as never }), ErrorCode.INVALID_CLIENT);
  throwsCode(() => new PostgresStore({ client: pool, timeout: 5 } as never), ErrorCode.UNKNOWN_OPTION);
  throwsCode(() => new PostgresStore({ client: pool, timeoutMs: 0 }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new PostgresStore({ client: pool, timeoutMs: 1.5 }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new PostgresStore({ client: pool, cleanupIntervalMs: -1 }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new PostgresStore({ client: pool, clock: 5 as never }), ErrorCode.INVALID_OPTIONS);
  throwsCode(() => new PostgresStore({ client: pool, unlogged: 'yes' as never }), ErrorCode.INVALID_OPTIONS);
  throwsCode(() => new PostgresStore({ client: pool, createSchema: 1 as never }), ErrorCode.INVALID_OPTIONS);
  for (const table of ['', 'Counters', 'a-b', 'x; DROP TABLE users', 'a.b.c', '1abc', 'x'.repeat(41), '"q"']) {
    throwsCode(() => new PostgresStore({ client: pool, table }), ErrorCode.INVALID_OPTIONS);
  }
  const store = new PostgresStore({ client: pool, table: 'public.rate_limits', cleanupIntervalMs: 0 });
  assert.deepEqual([store.name, store.table, store.timeoutMs], ['postgres', 'public.rate_limits', 500]);
});

test('the operations of one turn, on many keys, go to PostgreSQL in one query', async () => {
  const client = counting();
  const clock = new ManualClock(1_800_000_000_000);
  const store = new PostgresStore({ client, clock: clock.now, table: freshTable(), cleanupIntervalMs: 0 });
  await store.apply({ kind: 'peek', key: 'warm', amount: 0, policy: policy() }); // makes the schema
  const before = client.queries.length;
  const outcomes = await Promise.all(
    Array.from({ length: 100 }, (_, i) => store.apply({ kind: 'consume', key: `k${i % 10}`, amount: 1, policy: policy({ limit: 5 }) })),
  );
  assert.equal(client.queries.length - before, 1, 'one query for 100 operations on 10 keys');
  assert.equal(outcomes.filter((o) => o.allowed).length, 50, 'five per key');
  // Per key, the operations were applied in arrival order.
  assert.deepEqual(
    outcomes.filter((_, i) => i % 10 === 3).map((o) => o.remaining),
    [4, 3, 2, 1, 0, 0, 0, 0, 0, 0],
  );
  await store.close();
});

test('unlogged: true creates the tables UNLOGGED, the default logged', async () => {
  const logged = freshTable();
  const unlogged = freshTable();
  for (const [table, flag] of [
    [logged, false],
    [unlogged, true],
  ] as const) {
    const store = new PostgresStore({ client: pool, table, unlogged: flag, cleanupIntervalMs: 0 });
    await store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() });
    await store.close();
  }
  const { rows } = await pool.query<{ relname: string; relpersistence: string }>(
    'SELECT relname, relpersistence FROM pg_class WHERE relname = ANY($1) ORDER BY relname',
    [[logged, `${logged}_slots`, unlogged, `${unlogged}_slots`]],
  );
  assert.deepEqual(
    rows.map((r) => `${r.relname}:${r.relpersistence}`),
    [`${logged}:p`, `${logged}_slots:p`, `${unlogged}:u`, `${unlogged}_slots:u`],
  );
});

test('createSchema: false makes nothing; postgresSchemaSql made once serves it, in another schema too', async () => {
  await pool.query('CREATE SCHEMA IF NOT EXISTS app');
  const table = `app.${freshTable()}`;
  const store = new PostgresStore({ client: pool, table, createSchema: false, cleanupIntervalMs: 0 });
  await rejectsCode(store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() }), ErrorCode.STORE_ERROR);
  await pool.query(postgresSchemaSql({ table }));
  assert.equal((await store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() })).remaining, 2);
  await store.close();
});

test('without a clock the functions decide on PostgreSQL time', async () => {
  const store = new PostgresStore({ client: pool, table: freshTable(), cleanupIntervalMs: 0 });
  const first = await store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy({ windowMs: 60_000 }) });
  assert.equal(first.remaining, 2);
  assert.ok(first.resetMs > 59_000 && first.resetMs <= 60_000, String(first.resetMs));
  const [{ expires_at: expiresAt, now }] = (
    await pool.query<{ expires_at: string; now: string }>(
      `SELECT expires_at, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now FROM ${store.table}`,
    )
  ).rows as [{ expires_at: string; now: string }];
  const left = Number(expiresAt) - Number(now);
  assert.ok(left > 59_000 && left <= 60_000, `the row expires a window after PostgreSQL's now (${left} ms)`);
  await store.close();
});

describe('clean-up', () => {
  test('deletes expired rows and slots, skips a row another transaction holds instead of waiting for it, and keeps live rows', async () => {
    const clock = new ManualClock(1_800_000_000_000);
    const store = new PostgresStore({ client: pool, clock: clock.now, table: freshTable(), cleanupIntervalMs: 0 });
    for (let i = 0; i < 20; i++) await store.apply({ kind: 'consume', key: `old${i}`, amount: 1, policy: policy() });
    await store.acquireSlot('s', 2, 'owner', 1000);
    clock.advance(1000);
    await store.apply({ kind: 'consume', key: 'live', amount: 1, policy: policy({ windowMs: 600_000 }) });
    // With a client clock, rows go a minute after they expire.
    assert.equal(await store.clean(), 0);
    clock.advance(60_000);
    await inTransaction(async (holder) => {
      await holder.query(`SELECT * FROM ${store.table} WHERE key = 'old7' FOR UPDATE`);
      const started = performance.now();
      assert.equal(await store.clean(), 19 + 1, 'nineteen expired counters and the expired slot');
      assert.ok(performance.now() - started < 1000, 'did not wait for the held row');
    });
    const { rows } = await pool.query<{ key: string }>(`SELECT key FROM ${store.table} ORDER BY key`);
    assert.deepEqual(
      rows.map((r) => r.key),
      ['live', 'old7'],
    );
    assert.equal(await store.clean(), 1);
    await store.close();
  });

  test('runs on its timer', async () => {
    const store = new PostgresStore({ client: pool, table: freshTable(), cleanupIntervalMs: 50 });
    await store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy({ windowMs: 50 }) });
    const deadline = Date.now() + 5000;
    for (;;) {
      const { rows } = await pool.query(`SELECT 1 FROM ${store.table}`);
      if (rows.length === 0) break;
      assert.ok(Date.now() < deadline, 'the expired row was not cleaned up within 5 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    await store.close();
  });
});

test('a call that waits on a row lock past timeoutMs rejects with STORE_TIMEOUT; the store goes on afterwards', async () => {
  const clock = new ManualClock(1_800_000_000_000);
  const store = new PostgresStore({ client: pool, clock: clock.now, table: freshTable(), timeoutMs: 200, cleanupIntervalMs: 0 });
  await store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() });
  await inTransaction(async (holder) => {
    await holder.query(`SELECT * FROM ${store.table} WHERE key = 'k' FOR UPDATE`);
    await rejectsCode(store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() }), ErrorCode.STORE_TIMEOUT);
  });
  // The late call still ran once the lock went: the count shows both.
  await new Promise((r) => setTimeout(r, 100));
  assert.equal((await store.apply({ kind: 'peek', key: 'k', amount: 0, policy: policy() })).remaining, 1);
  await store.close();
});

test('close rejects later calls with CLOSED and leaves the client open', async () => {
  const store = new PostgresStore({ client: pool, table: freshTable() });
  const limiter = new RateLimiter({ store, limit: 2, window: '1s' });
  assert.equal((await limiter.consume('k')).allowed, true);
  await store.close();
  await store.close();
  await rejectsCode(store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() }), ErrorCode.CLOSED);
  await rejectsCode(store.acquireSlot('k', 1, 'o', 1000), ErrorCode.CLOSED);
  assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
});

test('a schema dropped under a running store is made again on the next call', async () => {
  const store = new PostgresStore({ client: pool, table: freshTable(), cleanupIntervalMs: 0 });
  await store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() });
  await pool.query(`DROP FUNCTION ${store.table}_apply_v1`);
  await rejectsCode(store.apply({ kind: 'consume', key: 'k', amount: 1, policy: policy() }), ErrorCode.STORE_ERROR);
  assert.equal((await store.apply({ kind: 'peek', key: 'k', amount: 0, policy: policy() })).allowed, true);
  await store.close();
});

test('keys with NUL and backslashes, which PostgreSQL text cannot hold as they are, stay apart', async () => {
  const clock = new ManualClock(1_800_000_000_000);
  const store = new PostgresStore({ client: pool, clock: clock.now, table: freshTable(), cleanupIntervalMs: 0 });
  const keys = ['a\0b', 'a\\0b', 'a\\\\0b', 'a\\\0b', '\0', '\\', 'a'];
  const outcomes = await Promise.all(keys.map((key) => store.apply({ kind: 'consume', key, amount: 1, policy: policy({ limit: 1 }) })));
  assert.deepEqual(
    outcomes.map((o) => o.allowed),
    keys.map(() => true),
    'each key is its own',
  );
  for (const key of keys)
    assert.equal((await store.apply({ kind: 'consume', key, amount: 1, policy: policy({ limit: 1 }) })).allowed, false);
  assert.equal((await store.acquireSlot('s\0', 1, 'o', 1000)).admitted, true);
  assert.equal(await store.releaseSlot('s\0', 'o'), true);
  await store.close();
});

test('a single pg.Client serves the store as a Pool does', async () => {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  const clock = new ManualClock(1_800_000_000_000);
  const store = new PostgresStore({ client, clock: clock.now, table: freshTable(), cleanupIntervalMs: 0 });
  const limiter = new RateLimiter({ store, clock: clock.now, limit: 5, window: '1s' });
  const decisions = await Promise.all(Array.from({ length: 8 }, () => limiter.consume('k')));
  assert.equal(decisions.filter((d) => d.allowed).length, 5);
  assert.equal((await store.acquireSlot('k', 1, 'o', 1000)).admitted, true);
  await store.close();
  await client.end();
});

test('calls that take the same keys in opposite orders, from two processes, never deadlock', async () => {
  const table = freshTable();
  const pools = [new pg.Pool({ connectionString: server.url, max: 4 }), new pg.Pool({ connectionString: server.url, max: 4 })];
  const clock = new ManualClock(1_800_000_000_000);
  const [a, b] = pools.map((client) => new PostgresStore({ client, clock: clock.now, table, cleanupIntervalMs: 0 })) as [
    PostgresStore,
    PostgresStore,
  ];
  const keys = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, '0')}`);
  const p = policy({ limit: 1_000_000, windowMs: 60_000 });
  const consume = (key: string) => ({ kind: 'consume' as const, key, amount: 1, policy: p });
  let decided = 0;
  for (let round = 0; round < 30; round++) {
    const calls = [
      ...keys.map((k) => a.apply(consume(k))),
      ...[...keys].reverse().map((k) => b.apply(consume(k))),
      a.consumeAll(keys.slice(0, 5).map(consume)),
      b.consumeAll(keys.slice(0, 5).reverse().map(consume)),
    ];
    decided += (await Promise.all(calls)).length;
  }
  assert.equal(decided, 30 * 42);
  const { rows } = await pool.query<{ x: string }>(`SELECT x FROM ${table} WHERE key = 'k00'`);
  assert.equal(rows[0]!.x, String(30 * 4), 'each round spent four units of k00');
  await Promise.all([a.close(), b.close()]);
  await Promise.all(pools.map((p) => p.end()));
});
