/** The egress scenario's own run: scheduling cost in one process against p-queue, then four processes on one Redis against bottleneck. */
import { cpus, loadavg, release } from 'node:os';
import { UsageError } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { BenchRedis } from '../lib/redis.js';
import type { OwnRunContext, OwnRunResult } from '../types.js';
import { measureInProcess } from './in-process.js';
import { inProcessRows, inProcessTable, sharedRows, sharedTable, type EgressRow } from './report.js';
import { measureShared } from './shared-redis.js';
import { PROCESSES } from './workload.js';

/** The parts `--phases` can name. */
export const EGRESS_PARTS = ['one', 'four'] as const;

/** Calls per variant and round in the one-process part (after a warm-up of a quarter as many). */
const CALLS = 200_000;
/** The four-process part's default measured and warm-up seconds. */
const DURATION_S = 10;
const WARMUP_S = 2;

/**
 * Runs the selected parts (`--phases one,four`; both by default), `--rounds` times each, the variants' order rotated
 * per round. The one-process part pins each variant's process to the server's CPU; the four-process part spreads its
 * processes and redis-server over every CPU the plan uses.
 */
export async function runEgress(context: OwnRunContext): Promise<OwnRunResult> {
  const unknown = (context.phases ?? []).filter((p) => !(EGRESS_PARTS as readonly string[]).includes(p));
  if (unknown.length > 0) throw new UsageError(`egress has no part ${unknown.join(', ')}; it has ${EGRESS_PARTS.join(', ')}`);
  const wants = (part: (typeof EGRESS_PARTS)[number]): boolean => context.phases === undefined || context.phases.includes(part);
  const loadBefore = loadavg()[0]!;
  if (loadBefore > 0.5) log(`[egress] warning: load average is ${loadBefore.toFixed(2)} before the run; numbers will be noisy`);
  const rows: EgressRow[] = [];
  const sections: string[][] = [];
  const header = [
    `${cpus()[0]?.model.trim() ?? 'unknown CPU'}; Node ${process.version}; Linux ${release()}; ${context.rounds} round(s), variants' order rotated per round`,
  ];
  if (wants('one')) {
    const rounds = await measureInProcess(context, CALLS);
    rows.push(...inProcessRows(rounds, CALLS));
    sections.push([
      ...inProcessTable(rounds, CALLS),
      `  pinning: each variant's process on CPU ${context.plan.server ?? '(not pinned)'}, the harness on ${context.plan.load ?? '(not pinned)'}`,
    ]);
  }
  if (wants('four')) {
    const timing = { warmupS: context.warmupS ?? WARMUP_S, durationS: context.durationS ?? DURATION_S };
    const everywhere =
      context.plan.load !== undefined && context.plan.server !== undefined ? `${context.plan.load},${context.plan.server}` : undefined;
    const redis = await BenchRedis.start(everywhere);
    try {
      const rounds = await measureShared(context, redis, everywhere, timing);
      rows.push(...sharedRows(rounds, timing.durationS));
      sections.push([
        ...sharedTable(rounds, timing),
        `  pinning: the ${PROCESSES} processes and redis-server ${redis.version} on CPUs ${everywhere ?? '(not pinned)'}`,
      ]);
    } finally {
      await redis.stop();
    }
  }
  header.push(`1-min load average ${loadBefore.toFixed(2)} before the run, ${loadavg()[0]!.toFixed(2)} after (the run itself raises it)`);
  const text = [
    'egress: scheduling cost of outbound calls, OutboundLimiter against p-queue and bottleneck',
    ...header.map((l) => `  ${l}`),
  ];
  for (const section of sections) text.push('', ...section);
  return { rows, text: `${text.join('\n')}\n` };
}
