// Child process of the local-first accuracy harness: hammers one key through LocalFirstStore, then through per-request RedisStore, and reports its own admissions (decided synchronously when the store can, as the HTTP middleware does).
import { Redis } from 'ioredis';
import { RateLimiter, type Store } from '../../src/index.js';
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
    /** Per admission: when it was admitted, Date.now() (one clock for every process on the host, and floor keeps order); for an answer that came later, when it was asked. */
    times: number[];
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

async function phase(config: HammerConfig, store: Store, { key, startAt, stopAt, perMs }: HammerPhase) {
  const limiter = new RateLimiter({ store, limit: config.limit, window: config.windowMs, prefix: config.prefix });
  const windowEnds: number[] = [];
  const times: number[] = [];
  let attempts = 0;
  await sleep(Math.max(0, startAt - Date.now()));
  // `issuedAt` for a consume answered later: the store decided it somewhere between asking and the
  // answer (a lease call's waiters were counted by Redis inside their window), so its time is bounded
  // from below by when it was asked; the answer can come a loaded round trip later, as a per-request
  // one does. Synchronous answers, spent from the lease in hand, are timestamped exactly.
  const record = (d: { allowed: boolean; resetMs: number }, issuedAt?: number) => {
    if (!d.allowed) return;
    const at = Date.now();
    windowEnds.push(at + d.resetMs);
    times.push(issuedAt ?? at);
  };
  if (perMs !== undefined) {
    // A steady pace below the limit's rate: leases are still held when windows end, which is
    // where spending past the deadline would show.
    const t0 = Date.now();
    const pending: Promise<unknown>[] = [];
    while (Date.now() < stopAt) {
      const due = Math.floor((Date.now() - t0) * perMs);
      for (; attempts < due; attempts++) {
        const now = limiter.consumeNow(key);
        if (now !== undefined) record(now);
        else {
          const issuedAt = Date.now();
          pending.push(limiter.consume(key).then((d) => record(d, issuedAt)));
        }
      }
      await sleep(1);
    }
    await Promise.all(pending);
    return { windowEnds, times, attempts };
  }
  const loop = async () => {
    while (Date.now() < stopAt) {
      attempts++;
      // The lease in hand answers synchronously (applyNow); without one, consume asks Redis.
      const now = limiter.consumeNow(key);
      if (now !== undefined) record(now);
      else {
        const issuedAt = Date.now();
        record(await limiter.consume(key), issuedAt);
      }
      // Local answers resolve at once: yield now and then so timers and replies still run.
      if (attempts % 64 === 0) await new Promise((r) => setImmediate(r));
    }
  };
  await Promise.all(Array.from({ length: config.concurrency }, loop));
  return { windowEnds, times, attempts };
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
