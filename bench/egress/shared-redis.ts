/** The egress scenario's second part: four processes on one Redis, bottleneck's clustering against OutboundLimiter on RedisStore. */
import { fileURLToPath } from 'node:url';
import { log } from '../lib/log.js';
import type { BenchRedis } from '../lib/redis.js';
import { roundOrder } from '../lib/rounds.js';
import type { OwnRunContext } from '../types.js';
import { startChild, stopChildren, type Child } from './child.js';
import { PROCESSES, SHARED_BUDGETS, SHARED_LIBRARIES, type SharedBudget, type SharedLibrary, type WorkerResult } from './workload.js';

const ENTRY = fileURLToPath(new URL('./worker.ts', import.meta.url));

/** One library and budget. */
export interface SharedVariant {
  readonly library: SharedLibrary;
  readonly budget: SharedBudget;
}

/** The four parts, by budget, bottleneck first. */
export const SHARED_VARIANTS: readonly SharedVariant[] = SHARED_BUDGETS.flatMap((budget) =>
  SHARED_LIBRARIES.map((library) => ({ library, budget })),
);

/** A variant's name in tables and rows, e.g. `floodgate-concurrency`. */
export const sharedName = (v: SharedVariant): string => `${v.library}-${v.budget}`;

/** One variant's figures in one round, the four processes together. */
export interface SharedPoint extends SharedVariant {
  /** Calls completed per second, the four processes' rates summed. */
  readonly callsPerS: number;
  /** CPU µs of the four processes per call. */
  readonly cpuUsPerCall: number;
  /** redis-server's CPU µs per call (INFO cpu before and after the measured period). */
  readonly redisUsPerCall: number;
  /** Redis commands per call (INFO commandstats; a script's own commands count). */
  readonly redisCmdsPerCall: number;
  readonly calls: number;
  readonly errors: number;
}

/**
 * Each round runs every variant once, in an order rotated by one each round: FLUSHALL, four fresh processes (each limiter
 * with this run's own id, so none inherits another's state), all started at once by SIGUSR1 once all are connected,
 * `warmupS` unmeasured, then `durationS` measured, Redis read at both ends of it. The processes and redis-server run on
 * `cpus` (the whole machine: four processes and their store, as a deployment would place them).
 */
export async function measureShared(
  context: OwnRunContext,
  redis: BenchRedis,
  cpus: string | undefined,
  timing: { warmupS: number; durationS: number },
): Promise<SharedPoint[][]> {
  const rounds: SharedPoint[][] = [];
  for (let round = 0; round < context.rounds; round++) {
    const points: SharedPoint[] = [];
    for (const variant of roundOrder(SHARED_VARIANTS, round)) {
      log(`[egress] ${PROCESSES} processes, round ${round + 1}/${context.rounds}: ${sharedName(variant)}`);
      points.push(await measureOne(context, redis, cpus, variant, timing, `egress-${round}-${sharedName(variant)}`));
    }
    rounds.push(SHARED_VARIANTS.map((v) => points.find((p) => p.library === v.library && p.budget === v.budget)!));
  }
  return rounds;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function measureOne(
  context: OwnRunContext,
  redis: BenchRedis,
  cpus: string | undefined,
  variant: SharedVariant,
  timing: { warmupS: number; durationS: number },
  id: string,
): Promise<SharedPoint> {
  await redis.reset();
  const children: Child[] = [];
  try {
    for (let i = 0; i < PROCESSES; i++)
      children.push(
        startChild(ENTRY, {
          root: context.root,
          cpus,
          env: {
            EGRESS_LIBRARY: variant.library,
            EGRESS_BUDGET: variant.budget,
            EGRESS_ID: id,
            EGRESS_WARMUP_MS: String(timing.warmupS * 1000),
            EGRESS_DURATION_MS: String(timing.durationS * 1000),
            FLOODGATE_BENCH_REDIS_URL: redis.url,
            FLOODGATE_BENCH_DIST: context.dist,
          },
        }),
      );
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.process.kill('SIGUSR1');
    await sleep(timing.warmupS * 1000);
    await redis.resetStats();
    const redisBefore = await redis.cpuMs();
    await sleep(timing.durationS * 1000);
    const redisAfter = await redis.cpuMs();
    const commands = Object.values(await redis.commandCounts()).reduce((a, b) => a + b, 0);
    const results = (await Promise.all(children.map((c) => c.result))) as WorkerResult[];
    const calls = results.reduce((sum, r) => sum + r.calls, 0);
    return {
      ...variant,
      callsPerS: results.reduce((sum, r) => sum + (r.calls * 1000) / r.wallMs, 0),
      cpuUsPerCall: results.reduce((sum, r) => sum + r.cpuUs, 0) / calls,
      redisUsPerCall: ((redisAfter - redisBefore) * 1000) / calls,
      redisCmdsPerCall: commands / calls,
      calls,
      errors: results.reduce((sum, r) => sum + r.errors, 0),
    };
  } finally {
    await stopChildren(children);
  }
}
