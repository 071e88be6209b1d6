/** One of the egress scenario's four processes on one Redis: 50 callers through bottleneck or OutboundLimiter, counted after SIGUSR1. */
import Bottleneck from 'bottleneck';
import { Redis } from 'ioredis';
import { importDist } from '../lib/serve.js';
import {
  CALLERS,
  CONCURRENCY,
  SHARED_BUDGETS,
  SHARED_LIBRARIES,
  UNREACHED_RATE,
  type SharedBudget,
  type SharedLibrary,
  type WorkerResult,
} from './workload.js';

type Run = (fn: () => Promise<number>) => Promise<number>;

/** The trivial async function every call runs, as in the one-process part. */
const work = async (): Promise<number> => 1;

/** A scheduler on the shared Redis and how to close it. */
interface Shared {
  readonly run: Run;
  readonly close: () => Promise<void>;
}

/**
 * bottleneck's Redis clustering: every process builds a limiter with the same `id` on `datastore: 'ioredis'`, so
 * `maxConcurrent` and the reservoir are counted in Redis for all of them, as its README's "Clustering" section sets it up.
 */
async function bottleneck(budget: SharedBudget, url: URL, id: string): Promise<Shared> {
  const limits: Bottleneck.ConstructorOptions =
    budget === 'concurrency'
      ? { maxConcurrent: CONCURRENCY }
      : { reservoir: UNREACHED_RATE, reservoirRefreshAmount: UNREACHED_RATE, reservoirRefreshInterval: 1000 };
  const limiter = new Bottleneck({
    id,
    datastore: 'ioredis',
    clearDatastore: false,
    clientOptions: { host: url.hostname, port: Number(url.port) },
    ...limits,
  });
  limiter.on('error', (error: unknown) => process.stderr.write(`bottleneck: ${String(error)}\n`));
  await limiter.ready();
  return { run: (fn) => limiter.schedule(fn), close: () => limiter.disconnect(false) };
}

/** OutboundLimiter on a RedisStore: the same budget, counted in Redis for every process. */
async function floodgate(budget: SharedBudget, url: URL, id: string): Promise<Shared> {
  const { OutboundLimiter } = await importDist<typeof import('../../dist/esm/egress/index.js')>('esm/egress/index.js', 'floodgate/egress');
  const { RedisStore } = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>(
    'esm/stores/redis/index.js',
    'RedisStore (src/stores/redis)',
  );
  const client = new Redis(url.href);
  const store = new RedisStore({ client });
  const limiter = new OutboundLimiter({
    store,
    prefix: id,
    ...(budget === 'concurrency' ? { concurrency: CONCURRENCY } : { rate: { limit: UNREACHED_RATE, window: '1s' } }),
  });
  return {
    run: (fn) => limiter.schedule('api.example.com', fn),
    close: async () => {
      await store.close();
      client.disconnect();
    },
  };
}

async function main(): Promise<void> {
  const library = process.env.EGRESS_LIBRARY as SharedLibrary;
  const budget = process.env.EGRESS_BUDGET as SharedBudget;
  if (!SHARED_LIBRARIES.includes(library) || !SHARED_BUDGETS.includes(budget))
    throw new Error(`EGRESS_LIBRARY must be one of ${SHARED_LIBRARIES.join(', ')}, EGRESS_BUDGET one of ${SHARED_BUDGETS.join(', ')}`);
  const url = new URL(process.env.FLOODGATE_BENCH_REDIS_URL ?? '');
  const id = process.env.EGRESS_ID ?? 'egress';
  const warmupMs = Number(process.env.EGRESS_WARMUP_MS);
  const durationMs = Number(process.env.EGRESS_DURATION_MS);
  const shared = library === 'bottleneck' ? await bottleneck(budget, url, id) : await floodgate(budget, url, id);

  let measuring = false;
  let stopping = false;
  let calls = 0;
  let errors = 0;
  let told = false;
  const caller = async (): Promise<void> => {
    while (!stopping) {
      try {
        await shared.run(work);
        if (measuring) calls++;
      } catch (error) {
        if (measuring) errors++;
        if (!told) process.stderr.write(`a call failed: ${error instanceof Error ? error.message : String(error)}\n`);
        told = true;
      }
    }
  };
  // The parent starts all four at once, once every one is connected: SIGUSR1.
  await new Promise<void>((resolve) => {
    process.once('SIGUSR1', resolve);
    process.stdout.write('ready\n');
  });
  const callers = Array.from({ length: CALLERS }, caller);
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  measuring = true;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  measuring = false;
  const used = process.cpuUsage(cpu);
  const result: WorkerResult = { calls, errors, cpuUs: used.user + used.system, wallMs: performance.now() - t0 };
  stopping = true;
  await Promise.race([Promise.all(callers), new Promise((resolve) => setTimeout(resolve, 5000))]);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await Promise.race([shared.close(), new Promise((resolve) => setTimeout(resolve, 2000))]);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
