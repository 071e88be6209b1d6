/** Builds the gateway's store from its settings, timed for metrics, with a readiness probe. */
/**
 * The store is memory, cluster under --workers, Redis, or Redis local-first. On Redis also the client and change feed
 * of allow lists kept in Redis sets.
 */
import type { AdminPubSub, ChangeSubscriber } from './change-channels.js';
import { performance } from 'node:perf_hooks';
import {
  systemClock,
  type Operation,
  type Outcome,
  MemoryStore,
  type MemorySnapshot,
  type Store,
  type SlotAcquisition,
  InstrumentedStore,
  type OtelTracer,
} from '../../index.js';
import { loadIoredis, loadPg } from '../runtime/optional-deps.js';
import type { GatewayMetrics, LatencyChild } from '../runtime/metrics.js';
import type { StoreSettings } from '../config/settings.js';
import type { KnownKeysClient } from './known-keys.js';
import { KnownKeyChanges } from './known-key-changes.js';
import { OverrideSync, type RefusedEntry } from './override-sync.js';
import { openRedisClient, refreshingOnFailure } from './redis-client.js';

/** The store in use and what the gateway needs around it. */
export interface GatewayStore {
  /** The store the limiters use (already timed); for the embedded memory store, see {@link storeFor}. */
  readonly store: Store;
  /**
   * The store one rule's limiters count in. The embedded memory store gives
   * each rule a table of its own (`store.maxKeys` keys), so a flood of new
   * keys on one rule cannot crowd another's; the other stores are shared.
   */
  storeFor(rule: string): Store;
  /** Short description for the start-up log, e.g. `"redis redis://127.0.0.1:6379"`. */
  readonly description: string;
  /** True when the store can be used now (Redis connected); `/readyz` reports it. */
  ready(): boolean;
  /**
   * True until the first connection attempt has ended, either way (or
   * {@link FIRST_CONNECT_GRACE_MS} has passed): readiness waits for it, so a
   * starting gateway does not send to its fallback what its store is about
   * to decide. Absent for stores that need no connection.
   */
  connecting?(): boolean;
  /** Closes the store and any client it opened. */
  close(): Promise<void>;
  /** The embedded memory store's tables as they are now, for its snapshot file; absent for the other stores. */
  snapshot?(): MemoryTablesSnapshot;
  /** Drops the per-rule tables of rules not in `rules` (after a reload); absent when tables are not per rule. */
  retain?(rules: readonly string[]): void;
  /**
   * The store the rate limit service's limits of one `domain` count in. The
   * embedded memory store gives each domain its own table, apart from the
   * rules' and from each other's, as {@link storeFor} does for rules: a flood
   * of made-up values in one domain fills only that domain's table. The other
   * stores are shared.
   */
  rlsStoreFor(domain: string): Store;
  /** Drops the rate limit service's tables of domains not in `domains` (after its config reloads); absent when not per domain. */
  retainRls?(domains: ReadonlySet<string>): void;
  /** The Redis client of a Redis store (allow lists in Redis ask it); undefined for the memory and cluster stores. */
  readonly redis?: KnownKeysClient;
  /** Changes to allow-list sets heard on pub/sub (its connection opens on first use); undefined without Redis. */
  readonly knownKeyChanges?: KnownKeyChanges;
  /** Rules' overrides kept in step with their Redis hashes (its connection opens on first use); undefined without Redis. */
  readonly overrideSync?: OverrideSync;
  /** Publish and subscribe on the Redis store's server (the admin API's change announcements); undefined without Redis. */
  readonly pubsub?: AdminPubSub;
  /** Operations decided in overflow sketches so far (embedded memory store only). */
  overflows?(): number;
}

/** Longest that readiness waits for a first connection attempt to end (as long as ioredis's own connect timeout). */
const FIRST_CONNECT_GRACE_MS = 10_000;

/**
 * How often a gateway on a Redis Cluster reads its override hashes whole: a change published while the Cluster's
 * subscriber connection moves to another node is not heard (nothing tells of the move), and waits at most this long.
 */
const CLUSTER_OVERRIDE_REREAD_MS = 30_000;

/** Called with each failed store call; the gateway logs them, at most one line per 10 s. */
export type StoreFailureReporter = (error: unknown) => void;

/**
 * Wraps a store so every operation's latency lands in
 * `floodgate_store_duration_seconds`, and every failure reaches the log:
 * with insurance, fail-open or fail-closed the limiter decides without the
 * store and the HTTP layer never sees the error.
 *
 * `applyNow` exists exactly when the inner store has one, so a limiter on a
 * store that can answer synchronously (cluster, local-first) still decides
 * without a promise. Its answers are counted in
 * `floodgate_store_sync_answers_total`, not timed: a histogram observation
 * costs more than such an answer.
 */
class TimedStore implements Store {
  readonly name: string;
  // Declared, not a field: an own property holding undefined would still be a property, and absent is what says "no applyNow".
  declare applyNow?: (operation: Operation) => Outcome | undefined;
  declare failureScope?: (key: string) => string | undefined;
  declare consumeAll?: (operations: readonly Operation[]) => Promise<Outcome[]>;
  declare consumeAllNow?: (operations: readonly Operation[]) => Outcome[] | undefined;
  declare settleNow?: (operation: Operation) => Outcome | undefined;
  declare acquireSlot?: (key: string, limit: number, owner: string, ttlMs: number) => Promise<SlotAcquisition>;
  declare releaseSlot?: (key: string, owner: string) => Promise<boolean>;
  declare renewSlot?: (key: string, owner: string, ttlMs: number) => Promise<boolean>;
  private readonly ok: LatencyChild;
  private readonly failed: LatencyChild;

  constructor(
    private readonly inner: Store,
    metrics: GatewayMetrics,
    private readonly report: StoreFailureReporter,
  ) {
    this.name = inner.name;
    this.ok = metrics.storeLatencyChild(this.name, true);
    this.failed = metrics.storeLatencyChild(this.name, false);
    // Only a store that can answer synchronously gets the series: a Redis store shows none.
    const sync = inner.applyNow !== undefined || inner.consumeAllNow !== undefined ? metrics.storeSyncCell(this.name) : undefined;
    if (inner.applyNow !== undefined) {
      // A throw passes through untouched and unreported: applyNow throws only for a misconfiguration,
      // which the limiter rethrows as consume would reject; if a store broke that promise, the limiter
      // goes on to apply, which is timed and reported here. undefined means nothing was applied: not counted.
      this.applyNow = (operation) => {
        const outcome = inner.applyNow!(operation);
        if (outcome !== undefined) sync!.count += 1;
        return outcome;
      };
    }
    // A rule with `cost` settles its reservations in the lease the process holds, when it holds one: no store call to time.
    if (inner.settleNow !== undefined) this.settleNow = (operation) => inner.settleNow!(operation);
    if (inner.failureScope !== undefined) this.failureScope = (key) => inner.failureScope!(key);
    // A rule's several policies are one composite: timed and reported as one store call.
    if (inner.consumeAll !== undefined) this.consumeAll = (operations) => this.timed(() => inner.consumeAll!(operations));
    // A rule's in-flight slots (concurrency) are store calls like any other: timed, and their failures reported.
    if (inner.acquireSlot !== undefined && inner.releaseSlot !== undefined && inner.renewSlot !== undefined) {
      this.acquireSlot = (key, limit, owner, ttlMs) => this.timed(() => inner.acquireSlot!(key, limit, owner, ttlMs));
      this.releaseSlot = (key, owner) => this.timed(() => inner.releaseSlot!(key, owner));
      this.renewSlot = (key, owner, ttlMs) => this.timed(() => inner.renewSlot!(key, owner, ttlMs));
    }
    if (inner.consumeAllNow !== undefined) {
      this.consumeAllNow = (operations) => {
        const outcomes = inner.consumeAllNow!(operations);
        if (outcomes !== undefined) sync!.count += 1;
        return outcomes;
      };
    }
  }

  apply(operation: Operation): Promise<Outcome> {
    // The call on every request that goes to the store: timed without a closure around it.
    const started = performance.now();
    return this.observed(this.inner.apply(operation), started);
  }

  /** `call`'s latency into the histogram, its failure to the log. */
  private timed<T>(call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    return this.observed(call(), started);
  }

  /** The latency of a call begun at `started` (performance.now) into the histogram once `promise` ends, its failure to the log. */
  private observed<T>(promise: Promise<T>, started: number): Promise<T> {
    return promise.then(
      (result) => {
        this.ok.observe((performance.now() - started) / 1000);
        return result;
      },
      (error: unknown) => {
        this.failed.observe((performance.now() - started) / 1000);
        this.report(error);
        throw error;
      },
    );
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }
}

/**
 * Opens the store `settings` describe.
 *
 * @param clustered - true in a `--workers` worker: the memory store is then the cluster store, shared through the primary
 * @param report - told of every failed store call (see {@link StoreFailureReporter})
 * @param refusedOverride - told of each entry of a rules' override hash that a rule refuses
 * @param tracer - with telemetry.otel: spans around each call to the cluster or Redis store (the embedded memory store answers in the process)
 * @throws FloodgateError MISSING_DEPENDENCY without ioredis for Redis; STORE_UNREACHABLE when a Redis Cluster or Sentinel set-up does not answer
 */
export async function openStore(
  settings: StoreSettings,
  metrics: GatewayMetrics,
  clustered: boolean,
  report: StoreFailureReporter,
  refusedOverride: RefusedEntry = () => {},
  tracer?: OtelTracer,
  restored?: MemoryTablesSnapshot,
): Promise<GatewayStore> {
  const traced = (store: Store): Store => (tracer === undefined ? store : new InstrumentedStore(store, { tracer }));
  if (settings.kind === 'memory') {
    if (clustered) {
      const { ClusterStore } = await import('../../stores/cluster/index.js');
      const store = new ClusterStore({ timeoutMs: settings.timeoutMs, leaseMs: settings.leaseMs });
      const leases = settings.leaseMs > 0 ? `, leases of ${settings.leaseMs} ms` : '';
      const timed = new TimedStore(traced(store), metrics, report);
      return {
        store: timed,
        storeFor: () => timed,
        rlsStoreFor: () => timed,
        description: `cluster (memory in the primary${leases})`,
        ready: () => true,
        close: () => store.close(),
      };
    }
    return memoryTables(settings, restored);
  }
  if (settings.kind === 'postgres') return postgresTables(settings, metrics, report, traced);

  // A Cluster or Sentinel set-up is checked here, before the gateway listens: this throws STORE_UNREACHABLE when it does not answer.
  const { client, description: reached } = await openRedisClient(await loadIoredis(), settings);
  // Connection errors are retried by ioredis and show as store failures; an unhandled 'error' event would crash the process.
  client.on('error', () => {});
  let connecting = client.status !== 'ready';
  const attemptEnded = (): void => {
    connecting = false;
    clearTimeout(grace);
  };
  // A server that accepts but never answers (stopped, or a black hole past a proxy) ends no attempt by itself.
  const grace = setTimeout(attemptEnded, FIRST_CONNECT_GRACE_MS).unref();
  for (const event of ['ready', 'error', 'close'] as const) client.once(event, attemptEnded);
  const { RedisStore, LocalFirstStore } = await import('../../stores/redis/index.js');
  let store: Store;
  let description = reached;
  // On a Cluster a rule's policies that count by different keys (api key, ip, global) sit in different slots: each slot's
  // parts are decided atomically and a refusal gives back what the others spent (docs/scaling.md). Ignored on one server.
  const crossSlot = 'split';
  if (settings.localFirst) {
    store = new LocalFirstStore({ client, timeoutMs: settings.timeoutMs, crossSlot });
    description += ' (local-first)';
  } else {
    store = new RedisStore({ client, timeoutMs: settings.timeoutMs, crossSlot });
  }
  const timed = new TimedStore(traced(store), metrics, refreshingOnFailure(client, report));
  const knownKeyChanges = new KnownKeyChanges(() => client.duplicate() as unknown as ChangeSubscriber);
  const overrideSync = new OverrideSync(
    client,
    () => client.duplicate() as unknown as ChangeSubscriber,
    refusedOverride,
    settings.connection?.topology === 'cluster' ? CLUSTER_OVERRIDE_REREAD_MS : 0,
  );
  return {
    store: timed,
    storeFor: () => timed,
    rlsStoreFor: () => timed,
    redis: client,
    knownKeyChanges,
    overrideSync,
    pubsub: {
      publish: (channel, message) => client.publish(channel, message),
      incr: (key) => client.incr(key),
      get: (key) => client.get(key),
      subscriber: () => client.duplicate() as unknown as ChangeSubscriber,
    },
    description,
    ready: () => client.status === 'ready',
    connecting: () => connecting,
    close: async () => {
      knownKeyChanges.close();
      overrideSync.close();
      await store.close?.();
      client.disconnect();
    },
  };
}

/** The slice of node-postgres the gateway uses: a pool of connections it opens and ends. */
interface PgModule {
  Pool: new (options: { connectionString: string; max: number }) => {
    query(...args: unknown[]): Promise<unknown>;
    on(event: 'error', listener: (error: Error) => void): unknown;
    end(): Promise<void>;
  };
}

/** Connections of the gateway's pool to PostgreSQL: pg.Pool's default, enough for one turn's call and the clean-up. */
const POSTGRES_POOL_SIZE = 10;

/**
 * The PostgreSQL store (floodgate/postgres's PostgresStore) on a pool the gateway opens: every rule and rate limit
 * domain counts in it, as on Redis. A connection that fails is replaced by the pool; the store's calls fail meanwhile,
 * and the failure policy decides.
 */
async function postgresTables(
  settings: StoreSettings,
  metrics: GatewayMetrics,
  report: StoreFailureReporter,
  traced: (store: Store) => Store,
): Promise<GatewayStore> {
  const mod = (await loadPg()) as PgModule & { default?: PgModule };
  const pg = mod.default ?? mod;
  const pool = new pg.Pool({ connectionString: settings.url!, max: POSTGRES_POOL_SIZE });
  // An idle connection that dies emits 'error' on the pool: unhandled, it would end the process.
  pool.on('error', () => {});
  const { PostgresStore } = await import('../../stores/postgres/index.js');
  const store = new PostgresStore({
    client: pool as never,
    timeoutMs: settings.timeoutMs,
    unlogged: settings.postgres?.unlogged === true,
    ...(settings.postgres?.table === undefined ? {} : { table: settings.postgres.table }),
  });
  const timed = new TimedStore(traced(store), metrics, report);
  const { host, pathname } = new URL(settings.url!);
  return {
    store: timed,
    storeFor: () => timed,
    rlsStoreFor: () => timed,
    description: `postgres ${host}${pathname}${settings.postgres?.unlogged === true ? ' (unlogged)' : ''}`,
    ready: () => true,
    close: async () => {
      await store.close();
      await pool.end();
    },
  };
}

/** Every table of the embedded memory store: the shared one, each rule's and each rate limit domain's, by name. */
export interface MemoryTablesSnapshot {
  readonly shared: MemorySnapshot;
  readonly rules: Readonly<Record<string, MemorySnapshot>>;
  readonly rls: Readonly<Record<string, MemorySnapshot>>;
}

/**
 * The embedded memory store: one MemoryStore per rule (and per domain of the
 * rate limit service), each of `settings.maxKeys` keys in overflow mode (a
 * full table forgets no live key).
 * Kept across reloads by rule name, so a rule that stays keeps its counts; a
 * table whose rule is gone is dropped at the next reload.
 *
 * Not wrapped in TimedStore: its operations take about a microsecond, which a
 * histogram per call would double, and every one goes through applyNow anyway.
 */
function memoryTables(settings: StoreSettings, restored?: MemoryTablesSnapshot): GatewayStore {
  const options = { clock: systemClock, maxKeys: settings.maxKeys, onFull: 'overflow', overflowCells: settings.overflowCells } as const;
  const make = (saved?: MemorySnapshot): MemoryStore =>
    saved === undefined ? new MemoryStore(options) : MemoryStore.restore(saved, options);
  const shared = make(restored?.shared);
  // The rules' tables and the rate limit service's are named apart: a gateway reload keeps the service's, and its reload the rules'.
  // A restored table whose rule or domain is gone is dropped at the first retain, as after a reload.
  const tables = new Map<string, MemoryStore>(Object.entries(restored?.rules ?? {}).map(([name, saved]) => [name, make(saved)]));
  const rlsTables = new Map<string, MemoryStore>(Object.entries(restored?.rls ?? {}).map(([name, saved]) => [name, make(saved)]));
  const snapshotOf = (map: Map<string, MemoryStore>): Record<string, MemorySnapshot> =>
    Object.fromEntries([...map].map(([name, table]) => [name, table.snapshot()]));
  const tableIn = (map: Map<string, MemoryStore>, name: string): MemoryStore => {
    let table = map.get(name);
    if (table === undefined) {
      table = make();
      map.set(name, table);
    }
    return table;
  };
  const dropFrom = (map: Map<string, MemoryStore>, keep: (name: string) => boolean): void => {
    for (const [name, table] of map) {
      if (!keep(name)) {
        map.delete(name);
        void table.close();
      }
    }
  };
  const all = (): MemoryStore[] => [shared, ...tables.values(), ...rlsTables.values()];
  return {
    store: shared,
    storeFor: (rule) => tableIn(tables, rule),
    retain: (rules) => dropFrom(tables, (name) => rules.includes(name)),
    rlsStoreFor: (domain) => tableIn(rlsTables, domain),
    retainRls: (domains) => dropFrom(rlsTables, (name) => domains.has(name)),
    overflows: () => all().reduce((sum, t) => sum + t.overflows, 0),
    snapshot: () => ({ shared: shared.snapshot(), rules: snapshotOf(tables), rls: snapshotOf(rlsTables) }),
    description: `memory (${settings.maxKeys} keys per rule)`,
    ready: () => true,
    close: async () => {
      await Promise.all(all().map((t) => t.close()));
    },
  };
}
