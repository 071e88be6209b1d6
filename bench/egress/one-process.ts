/** The egress scenario's one-process part: N trivial async calls through one scheduler, timed by process CPU; one JSON line out. */
import PQueue from 'p-queue';
import { importDist } from '../lib/serve.js';
import { CALLERS, CONCURRENCY, ONE_PROCESS_VARIANTS, UNREACHED_RATE, type OneProcessVariant } from './workload.js';

/** What the child prints: its CPU and wall time over the measured calls. */
export interface OneProcessResult {
  readonly variant: OneProcessVariant;
  readonly calls: number;
  /** User + system CPU µs of this process over the measured calls (process.cpuUsage). */
  readonly cpuUs: number;
  readonly wallMs: number;
}

type Run = (fn: () => Promise<number>) => Promise<number>;

/** The trivial async function every call runs: the work is nothing, so what is measured is the scheduling. */
const work = async (): Promise<number> => 1;

/** How each variant runs one call; every scheduler admits everything (no budget binds), so each measures its own overhead. */
async function scheduler(variant: OneProcessVariant): Promise<Run> {
  if (variant === 'bare') return (fn) => fn();
  if (variant === 'p-queue') {
    // intervalCap per interval far above what one process reaches: p-queue counts it on every call, as a rate limiter must.
    const queue = new PQueue({ concurrency: CONCURRENCY, intervalCap: UNREACHED_RATE, interval: 1000 });
    return (fn) => queue.add(fn);
  }
  const { OutboundLimiter } = await importDist<typeof import('../../dist/esm/egress/index.js')>('esm/egress/index.js', 'floodgate/egress');
  const rate = { limit: UNREACHED_RATE, window: '1s' } as const;
  const limiter = variant === 'floodgate-rate' ? new OutboundLimiter({ rate }) : new OutboundLimiter({ concurrency: CONCURRENCY, rate });
  return (fn) => limiter.schedule('api.example.com', fn);
}

/** `callers` loops, each awaiting one call after another, until `calls` have completed between them. */
async function drive(run: Run, calls: number): Promise<void> {
  let started = 0;
  const caller = async (): Promise<void> => {
    while (started < calls) {
      started++;
      await run(work);
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
}

async function main(): Promise<void> {
  const variant = process.env.EGRESS_VARIANT as OneProcessVariant;
  if (!ONE_PROCESS_VARIANTS.includes(variant)) throw new Error(`EGRESS_VARIANT must be one of ${ONE_PROCESS_VARIANTS.join(', ')}`);
  const calls = Number(process.env.EGRESS_CALLS);
  if (!Number.isInteger(calls) || calls < 1) throw new Error('EGRESS_CALLS must be a positive whole number');
  const run = await scheduler(variant);
  // Warm-up: the JIT compiles the hot path before it is timed.
  await drive(run, Math.ceil(calls / 4));
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await drive(run, calls);
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  const result: OneProcessResult = { variant, calls, cpuUs: used.user + used.system, wallMs };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
