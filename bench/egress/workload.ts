/** The egress scenario's workload and variants, shared by its parent (run.ts) and its child processes. */

/** Callers per process, each awaiting one call after another: the 50 concurrent callers per process. */
export const CALLERS = 50;
/** The concurrency budget: p-queue's `concurrency`, OutboundLimiter's `concurrency`, bottleneck's `maxConcurrent` (total, across processes). */
export const CONCURRENCY = 64;
/** Processes sharing one Redis in the second part. */
export const PROCESSES = 4;
/** A rate per second that no run reaches: the rate budgets are counted on every call but never bind. */
export const UNREACHED_RATE = 1_000_000_000;

/** The one-process part's variants, the baseline first. */
export const ONE_PROCESS_VARIANTS = ['bare', 'p-queue', 'floodgate-concurrency', 'floodgate-rate'] as const;
export type OneProcessVariant = (typeof ONE_PROCESS_VARIANTS)[number];

/** The four-process part's schedulers and budgets. */
export const SHARED_LIBRARIES = ['bottleneck', 'floodgate'] as const;
export type SharedLibrary = (typeof SHARED_LIBRARIES)[number];
export const SHARED_BUDGETS = ['concurrency', 'rate'] as const;
export type SharedBudget = (typeof SHARED_BUDGETS)[number];

/** What one of the four processes prints after its measured period. */
export interface WorkerResult {
  /** Calls completed in the measured period. */
  readonly calls: number;
  /** Calls that failed (rejected by the scheduler or its store), measured period. */
  readonly errors: number;
  /** User + system CPU µs of the process over the measured period. */
  readonly cpuUs: number;
  /** The measured period by this process's clock, ms. */
  readonly wallMs: number;
}
