/** The egress scenario's first part: each one-process variant in a fresh child pinned to the server's CPU, its CPU µs per call. */
import { fileURLToPath } from 'node:url';
import { log } from '../lib/log.js';
import { roundOrder } from '../lib/rounds.js';
import type { OwnRunContext } from '../types.js';
import { startChild } from './child.js';
import type { OneProcessResult } from './one-process.js';
import { ONE_PROCESS_VARIANTS, type OneProcessVariant } from './workload.js';

const ENTRY = fileURLToPath(new URL('./one-process.ts', import.meta.url));

/** One variant's figures in one round. */
export interface InProcessPoint {
  readonly variant: OneProcessVariant;
  /** Process CPU µs per call (user + system). */
  readonly cpuUsPerCall: number;
  readonly callsPerS: number;
}

/**
 * Runs every variant once per round, in an order rotated by one each round (as the harness's rounds do), each in a
 * fresh process on the server's CPU: `calls` calls after a warm-up of a quarter as many. Returns each round's points.
 */
export async function measureInProcess(context: OwnRunContext, calls: number): Promise<InProcessPoint[][]> {
  const rounds: InProcessPoint[][] = [];
  for (let round = 0; round < context.rounds; round++) {
    const points: InProcessPoint[] = [];
    for (const variant of roundOrder(ONE_PROCESS_VARIANTS, round)) {
      log(`[egress] one process, round ${round + 1}/${context.rounds}: ${variant}, ${calls} calls`);
      const child = startChild(ENTRY, {
        root: context.root,
        cpus: context.plan.server,
        env: { EGRESS_VARIANT: variant, EGRESS_CALLS: String(calls), FLOODGATE_BENCH_DIST: context.dist },
      });
      const result = (await child.result) as OneProcessResult;
      points.push({ variant, cpuUsPerCall: result.cpuUs / result.calls, callsPerS: (result.calls * 1000) / result.wallMs });
    }
    rounds.push(ONE_PROCESS_VARIANTS.map((v) => points.find((p) => p.variant === v)!));
  }
  return rounds;
}
