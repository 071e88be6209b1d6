// Child process of the reservation exactness test: reserves random estimates on a leasing store (local-first over Redis, or the cluster store), settles each at a random actual (or cancels, lets the ttl pass, or never settles), and reports what it was charged.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RateLimiter, type Operation, type Outcome, type Reservation, type Store } from '../../src/index.js';
import { ClusterStore } from '../../src/stores/cluster/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';

/** Configuration, as JSON in argv[2]. */
export interface ReservationHammerConfig {
  mode: 'local-first' | 'cluster';
  /** Redis URL (local-first). */
  url?: string;
  /** Pub/sub channel every child shares (local-first). */
  channel?: string;
  limit: number;
  windowMs: number;
  prefix: string;
  keys: string[];
  /** Reservations this child makes. */
  reservations: number;
  /** Reservations in flight at once. */
  concurrency: number;
}

/** What a child reports once its store is closed (local-first leases given back by then). */
export interface ReservationReport {
  type: 'report';
  /** Units charged per key: each settlement's `charged`, the estimate of one admitted and never settled. */
  charged: Record<string, number>;
  admitted: number;
  refused: number;
  expired: number;
  unsettled: number;
  /** Reservations settled above their estimate (a penalty) and below it (a give-back). */
  over: number;
  under: number;
  /** Units admitted synchronously from a lease in hand, per key (their lease counted them when granted). */
  fromLease: Record<string, number>;
  /** Decision sources seen; only 'store' is expected. */
  sources: string[];
  /** Units leased and given back at close, per LocalFirstStore.stats() (local-first only). */
  leases?: { unitsLeased: number; unitsReturned: number };
}

/** Counts the units a store admits from the lease in hand (the answers it gives without asking). */
class LeaseCounting implements Store {
  readonly name: string;
  readonly fromLease: Record<string, number> = {};
  constructor(private readonly inner: Store) {
    this.name = inner.name;
  }
  private count(operation: Operation, outcome: Outcome | undefined): Outcome | undefined {
    if (outcome?.allowed && operation.kind === 'consume') {
      this.fromLease[operation.key] = (this.fromLease[operation.key] ?? 0) + operation.amount;
    }
    return outcome;
  }
  applyNow(operation: Operation): Outcome | undefined {
    return this.count(operation, this.inner.applyNow?.(operation));
  }
  apply(operation: Operation): Promise<Outcome> {
    // Whatever the store would answer from its lease goes through the count first.
    const now = this.applyNow(operation);
    return now === undefined ? this.inner.apply(operation) : Promise.resolve(now);
  }
  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }
}

const config = JSON.parse(process.argv[2]!) as ReservationHammerConfig;
const client = config.mode === 'local-first' ? new Redis(config.url!) : undefined;
const inner: Store = client
  ? new LocalFirstStore({ client, channel: config.channel!, leaseMs: 100 })
  : new ClusterStore({ transport: 'process', leaseMs: 100 });
const store = new LeaseCounting(inner);
const limiter = new RateLimiter({ store, limit: config.limit, window: config.windowMs, prefix: config.prefix });

const report: ReservationReport = {
  type: 'report',
  charged: {},
  admitted: 0,
  refused: 0,
  expired: 0,
  unsettled: 0,
  over: 0,
  under: 0,
  fromLease: store.fromLease,
  sources: [],
};
const pick = (n: number): number => Math.floor(Math.random() * n);

async function settle(r: Reservation): Promise<number> {
  const roll = Math.random();
  if (roll < 0.1) return (report.unsettled++, r.allowed ? r.estimate : 0);
  if (Math.random() < 0.5) await sleep(pick(4));
  let actual: number;
  if (roll < 0.45) actual = pick(2 * r.estimate + 1);
  else if (roll < 0.6) actual = 0;
  else if (roll < 0.7) actual = r.estimate;
  else actual = r.estimate + 1 + pick(40);
  const s = actual === 0 && roll < 0.6 ? await r.cancel() : await r.commit(actual);
  if (s.status === 'expired') report.expired++;
  else if (s.status === 'settled' && actual > r.estimate) report.over++;
  else if (s.status === 'settled' && actual < r.estimate) report.under++;
  return s.charged;
}

async function one(): Promise<void> {
  const key = config.keys[pick(config.keys.length)]!;
  const short = Math.random() < 0.1;
  const r = await limiter.reserve(key, 1 + pick(20), short ? { ttl: 20 } : undefined);
  if (!report.sources.includes(r.decision.source)) report.sources.push(r.decision.source);
  if (r.allowed) report.admitted++;
  else report.refused++;
  // A short ttl passes before the commit: it must change nothing.
  if (short) await sleep(30);
  const charged = await settle(r);
  report.charged[key] = (report.charged[key] ?? 0) + charged;
}

async function run(): Promise<void> {
  let started = 0;
  const lane = async (): Promise<void> => {
    while (started < config.reservations) {
      started++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: config.concurrency }, lane));
  await store.close();
  if (inner instanceof LocalFirstStore) {
    const { unitsLeased, unitsReturned } = inner.stats();
    report.leases = { unitsLeased, unitsReturned };
  }
  await client?.quit();
}

process.on('message', (message: { type?: string } | undefined) => {
  // The cluster store's own replies come over the same channel; they are not for this handler.
  if (message?.type !== 'go') return;
  run().then(
    () => process.send!(report, () => process.exit(0)),
    (error: unknown) => process.send!({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});

if (inner instanceof LocalFirstStore) {
  const started = Date.now();
  const live = setInterval(() => {
    if (inner.stats().live || Date.now() - started > 10_000) {
      clearInterval(live);
      process.send!({ type: 'ready' });
    }
  }, 10);
} else {
  process.send!({ type: 'ready' });
}
