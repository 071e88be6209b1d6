/** Child process of bench/lease-accuracy.ts: consumes one fixed-window key at a steady pace through a leasing store (LocalFirstStore or ClusterStore with leases), deciding synchronously first as the HTTP middleware does, and reports every answer. */
import { Redis } from 'ioredis';
import { RateLimiter, type Store } from '../../src/index.js';
import { ClusterStore } from '../../src/stores/cluster/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';

/** The run, as JSON in argv[2]. */
export interface HammerRun {
  readonly mode: 'local-first' | 'cluster';
  /** Redis URL (local-first only). */
  readonly url?: string;
  readonly limit: number;
  readonly windowMs: number;
  readonly key: string;
  /** Consumes per ms from this process. */
  readonly perMs: number;
}

/** The parent's signal, once every child is ready: epoch ms to start and stop. */
export interface HammerGo {
  readonly type: 'go';
  readonly startAt: number;
  readonly stopAt: number;
}

/** What the child reports: attempts, and per admission its time and the window end it was told. */
export interface HammerResult {
  readonly type: 'result';
  readonly attempts: number;
  readonly admitted: number;
  readonly times: number[];
  readonly windowEnds: number[];
  /** Per refusal: ms until the window's end, as the refusal said (where in the window quota ran short). */
  readonly refusedResetMs: number[];
  /** The store's counters (LocalFirstStore.stats()), when it has them. */
  readonly stats?: Record<string, unknown>;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const run = JSON.parse(process.argv[2]!) as HammerRun;
  let store: Store & { close(): Promise<void> };
  let client: Redis | undefined;
  if (run.mode === 'local-first') {
    client = new Redis(run.url!);
    const localFirst = new LocalFirstStore({ client });
    store = localFirst;
    // Leases hold a surplus only once the pub/sub subscription is confirmed.
    for (let waited = 0; !localFirst.stats().live && waited < 5000; waited += 20) await sleep(20);
  } else {
    store = new ClusterStore({ transport: 'process', leaseMs: 100 });
  }
  const limiter = new RateLimiter({ store, limit: run.limit, window: run.windowMs, prefix: 'lease-accuracy' });
  // A first call opens the subscription or the handshake before the clock starts.
  await limiter.peek(`${run.key}-warm`);
  process.send!({ type: 'ready' });
  const go = await new Promise<HammerGo>((resolve) => process.once('message', (m) => resolve(m as HammerGo)));
  await sleep(Math.max(0, go.startAt - Date.now()));

  let attempts = 0;
  const times: number[] = [];
  const windowEnds: number[] = [];
  const pending: Promise<void>[] = [];
  const refusedResetMs: number[] = [];
  const record = (d: { allowed: boolean; resetMs: number }): void => {
    if (!d.allowed) {
      refusedResetMs.push(d.resetMs);
      return;
    }
    const at = Date.now();
    times.push(at);
    windowEnds.push(at + d.resetMs);
  };
  const t0 = go.startAt;
  while (Date.now() < go.stopAt) {
    const due = Math.floor((Date.now() - t0) * run.perMs);
    while (attempts < due) {
      attempts++;
      const now = limiter.consumeNow(run.key);
      if (now !== undefined) record(now);
      else pending.push(limiter.consume(run.key).then(record));
    }
    await sleep(1);
  }
  await Promise.allSettled(pending);
  const stats = 'stats' in store && typeof store.stats === 'function' ? (store.stats() as Record<string, unknown>) : undefined;
  process.send!({
    type: 'result',
    attempts,
    admitted: times.length,
    times,
    windowEnds,
    refusedResetMs,
    ...(stats ? { stats } : {}),
  } satisfies HammerResult);
  await store.close();
  client?.disconnect();
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
