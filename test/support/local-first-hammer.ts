// Child process of the local-first accuracy harness: hammers one key through LocalFirstStore, then through per-request RedisStore, and reports its own admissions (decided synchronously when the store can, as the HTTP middleware does).
import { Redis } from 'ioredis';
import { ErrorCode, FloodgateError, RateLimiter, type Decision, type Store } from '../../src/index.js';
import { LocalFirstStore, RedisStore } from '../../src/stores/redis/index.js';

/** What the parent sends once every child is ready. */
export interface HammerGo {
  type: 'go';
  /** Per phase: epoch ms to start and stop hammering. */
  phases: HammerPhase[];
}

/** One phase: a mode, a key, a time span, and either as fast as possible or a steady rate. */
export interface HammerPhase {
  mode: HammerMode;
  key: string;
  startAt: number;
  stopAt: number;
  /** Consumes per ms from this process at a steady pace; absent: as fast as possible. */
  perMs?: number;
}

/** The two ways of limiting compared. */
export type HammerMode = 'local-first' | 'redis';

/** What a child reports per phase: one entry per admitted consume. */
export interface HammerReport {
  type: 'report';
  results: {
    mode: HammerMode;
    paced: boolean;
    /** Per admission: the window it was admitted in, as (wall-clock ms of the decision + resetMs). */
    windowEnds: number[];
    /**
     * Per admission: Date.now() just before the consume was asked (one clock for every process on the
     * host, Redis's TIME included): the decision came no earlier, however the process was scheduled.
     */
    askedAt: number[];
    /**
     * Per admission (local-first only): the end, on Redis's clock, of the window whose lease the store
     * charged it to, read from the store as it answered (no API reports it): in the same call for a
     * consume the lease in hand answered, in the turn the lease call's reply admitted one that waited
     * (a key has one lease call in flight at a time, so no reply of a later window comes in between).
     */
    chargedEnds: number[];
    /** Local-first only: the ends (Redis's clock) of the windows some consume of this process was refused in, once each. */
    refusedIn: number[];
    /** Consumes that failed with STORE_TIMEOUT (Redis slower than the store's timeout on a loaded host): no answer, so no admission. */
    timeouts: number;
    attempts: number;
    /** LocalFirstStore.stats() at the end of the phase (local-first only). */
    stats?: Record<string, unknown>;
  }[];
}

/** Configuration, as JSON in argv[2]. */
export interface HammerConfig {
  url: string;
  limit: number;
  windowMs: number;
  channel: string;
  prefix: string;
  /** Concurrent consume loops in this process. */
  concurrency: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The Redis window end of the lease `store` holds for the full store key `key` (NaN for a store without leases). */
function leaseWindowEnd(store: Store, key: string): number {
  if (!(store instanceof LocalFirstStore)) return NaN;
  return (store as unknown as { entries: Map<string, { windowEnd: number }> }).entries.get(key)?.windowEnd ?? NaN;
}

async function phase(config: HammerConfig, store: Store, { key, startAt, stopAt, perMs }: HammerPhase) {
  const limiter = new RateLimiter({ store, limit: config.limit, window: config.windowMs, prefix: config.prefix });
  const storeKey = `${config.prefix}:${key}`;
  const windowEnds: number[] = [];
  const askedAt: number[] = [];
  const chargedEnds: number[] = [];
  const refusedIn = new Set<number>();
  let attempts = 0;
  let timeouts = 0;
  // A consume Redis did not answer in time was not admitted as far as its caller knows; Redis may still
  // have counted it, so it can only make a window look emptier. Any other failure fails the run.
  const answered = (pending: Promise<Decision>): Promise<Decision | undefined> =>
    pending.catch((error: unknown) => {
      if (!(error instanceof FloodgateError && error.code === ErrorCode.STORE_TIMEOUT)) throw error;
      timeouts++;
      return undefined;
    });
  await sleep(Math.max(0, startAt - Date.now()));
  // Every time here is read before the consume is asked, so a process descheduled around a decision
  // can only make it early, never late: the store decided (from the lease in hand, from a lease call's
  // grant, or Redis per request) no earlier than that. The window it charged is read as the answer comes.
  const record = (d: { allowed: boolean; resetMs: number } | undefined, asked: number) => {
    if (d === undefined) return;
    if (!d.allowed) {
      // Refused from the lease's exhausted mark or by Redis: that window had no unit left anywhere.
      const end = leaseWindowEnd(store, storeKey);
      if (end > 0) refusedIn.add(end);
      return;
    }
    windowEnds.push(Date.now() + d.resetMs);
    askedAt.push(asked);
    chargedEnds.push(leaseWindowEnd(store, storeKey));
  };
  if (perMs !== undefined) {
    // A steady pace below the limit's rate: leases are still held when windows end, which is
    // where spending past the deadline would show.
    const t0 = Date.now();
    const pending: Promise<unknown>[] = [];
    while (Date.now() < stopAt) {
      const due = Math.floor((Date.now() - t0) * perMs);
      for (; attempts < due; attempts++) {
        const asked = Date.now();
        const now = limiter.consumeNow(key);
        if (now !== undefined) record(now, asked);
        else pending.push(answered(limiter.consume(key)).then((d) => record(d, asked)));
      }
      await sleep(1);
    }
    await Promise.all(pending);
    return { windowEnds, askedAt, chargedEnds, refusedIn: [...refusedIn], attempts, timeouts };
  }
  const loop = async () => {
    while (Date.now() < stopAt) {
      attempts++;
      // The lease in hand answers synchronously (applyNow); without one, consume asks Redis.
      const asked = Date.now();
      const now = limiter.consumeNow(key);
      if (now !== undefined) record(now, asked);
      else record(await answered(limiter.consume(key)), asked);
      // Local answers resolve at once: yield now and then so timers and replies still run.
      if (attempts % 64 === 0) await new Promise((r) => setImmediate(r));
    }
  };
  await Promise.all(Array.from({ length: config.concurrency }, loop));
  return { windowEnds, askedAt, chargedEnds, refusedIn: [...refusedIn], attempts, timeouts };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2]!) as HammerConfig;
  const client = new Redis(config.url);
  const localFirst = new LocalFirstStore({ client, channel: config.channel });
  const perRequest = new RedisStore({ client });
  while (!localFirst.stats().live) await sleep(10);
  process.send!({ type: 'ready' });
  const go = await new Promise<HammerGo>((resolve) => process.once('message', (m) => resolve(m as HammerGo)));
  const results: HammerReport['results'] = [];
  for (const p of go.phases) {
    const store = p.mode === 'local-first' ? localFirst : perRequest;
    const r = await phase(config, store, p);
    results.push({
      mode: p.mode,
      paced: p.perMs !== undefined,
      ...r,
      ...(p.mode === 'local-first' ? { stats: { ...localFirst.stats() } } : {}),
    });
  }
  process.send!({ type: 'report', results } satisfies HammerReport);
  await localFirst.close();
  await perRequest.close();
  client.disconnect();
  process.disconnect();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
