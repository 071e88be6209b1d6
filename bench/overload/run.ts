/** The overload scenario's own run: the selected phases in order, each run measured, then the report and the rows. */
import { cpus, loadavg, release } from 'node:os';
import { UsageError } from '../lib/errors.js';
import { log } from '../lib/log.js';
import type { OwnRunContext, OwnRunResult } from '../types.js';
import { measurePhase } from './measure.js';
import { PHASE_RUNS, type PhaseRun } from './phases.js';
import { formatReport, toRow } from './report.js';
import { summarize, type PhaseSummary } from './summary.js';

/** Warm-up seconds of each run when `--warmup` is not given: the adaptive limit finds its level before the measured period. */
const WARMUP_S = 3;

/** The runs of the phases `--phases` names (all when it is not given). */
function selectRuns(phases: readonly string[] | undefined): PhaseRun[] {
  if (phases === undefined) return [...PHASE_RUNS];
  const known = [...new Set(PHASE_RUNS.map((run) => run.phase))];
  const unknown = phases.filter((p) => !known.includes(p as PhaseRun['phase']));
  if (unknown.length > 0) throw new UsageError(`overload has no phase ${unknown.join(', ')}; it has ${known.join(', ')}`);
  return PHASE_RUNS.filter((run) => phases.includes(run.phase));
}

/**
 * Runs each selected phase run (a fresh upstream and gateway each), in
 * order, so phase a's unloaded p99 is known when the later ones' ratios are
 * taken. Each run measures `--duration` seconds (default: the run's own, 15
 * or 21) after `--warmup` (default 3).
 */
export async function runOverload(context: OwnRunContext): Promise<OwnRunResult> {
  const runs = selectRuns(context.phases);
  const loadBefore = loadavg()[0]!;
  if (loadBefore > 0.5) log(`[overload] warning: load average is ${loadBefore.toFixed(2)} before the run; numbers will be noisy`);
  const warmupS = context.warmupS ?? WARMUP_S;
  const summaries: PhaseSummary[] = [];
  let unloadedP99: number | null = null;
  for (const run of runs) {
    const durationS = context.durationS === undefined ? run.durationS : Math.round((context.durationS * run.durationS) / 15);
    const measured = await measurePhase(run, context, warmupS, durationS);
    const summary = summarize(measured, unloadedP99);
    if (run.phase === 'a') unloadedP99 = summary.p99Ms;
    summaries.push(summary);
  }
  const header = [
    `each run: a fresh upstream and gateway, ${warmupS} s warm-up, then the measured period; phases run in order (${runs.map((r) => r.variant).join(', ')})`,
    `${cpus()[0]?.model.trim() ?? 'unknown CPU'}; ${context.plan.note}; the upstream on the load generator's CPU`,
    `Node ${process.version}; Linux ${release()}`,
    `1-min load average ${loadBefore.toFixed(2)} before the run, ${loadavg()[0]!.toFixed(2)} after (the run itself raises it)`,
  ];
  return { rows: summaries.map(toRow), text: formatReport(summaries, header) };
}
