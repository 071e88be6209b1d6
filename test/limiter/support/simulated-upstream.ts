/** A simulated upstream and load for the adaptive limiter: c workers, queueing beyond them, run in ManualClock time. */
import { mulberry32 } from '../../accuracy/traffic.js';
import { AdaptiveConcurrencyLimiter, ManualClock, type AdaptiveConcurrencyLimiterOptions, type AdaptiveSlot } from '../../../src/index.js';

/** One phase of a run: `workers` from `fromMs` on (the upstream's capacity is workers / baseMs calls per ms). */
export interface CapacityPhase {
  readonly fromMs: number;
  readonly workers: number;
}

/** How a call ends besides succeeding: the upstream fails it (`error`) or the caller gives up on it (`drop`). */
export type Failure = 'error' | 'drop';

/** A run's settings. */
export interface RunSettings {
  /** The upstream's no-load latency in ms. */
  readonly baseMs: number;
  /** Capacity over time, first phase at 0. */
  readonly phases: readonly CapacityPhase[];
  /** Offered load as a multiple of the first phase's capacity (arrivals evenly spaced). */
  readonly loadFactor: number;
  /** How long to run, in ms. */
  readonly durationMs: number;
  /** The limiter's options (its clock is the run's). */
  readonly limiter?: AdaptiveConcurrencyLimiterOptions;
  /** Latency multiplied by a uniform factor in [1 − jitter, 1 + jitter] (seeded). Default 0.1. */
  readonly jitter?: number;
  /** Decides, for a call admitted at `nowMs`, whether it fails instead of succeeding (default: never). */
  readonly failure?: (nowMs: number, random: () => number) => Failure | undefined;
  /** PRNG seed. Default 42. */
  readonly seed?: number;
}

/** One admitted call, as the upstream saw it. */
export interface Call {
  readonly admittedAt: number;
  readonly latencyMs: number;
  readonly failed: boolean;
}

/** What a run recorded: every admitted call, refusals, and the limiter's numbers every 100 ms. */
export interface RunResult {
  readonly calls: Call[];
  readonly refused: number;
  /** Every 100 ms: the time, the limit, the phase and in flight. */
  readonly trace: { at: number; limit: number; phase: string; inFlight: number }[];
  readonly limiter: AdaptiveConcurrencyLimiter;
}

/**
 * Runs the load against the upstream through an AdaptiveConcurrencyLimiter, one simulated millisecond at a time: first the
 * calls due to end, then the arrivals. An admitted call's latency is fixed when it starts: base × max(1, inFlight / workers),
 * its own place included.
 */
export function run(settings: RunSettings): RunResult {
  const clock = new ManualClock(0);
  // mulberry32, seeded: a run is the same every time.
  const random = mulberry32(settings.seed ?? 42);
  const jitter = settings.jitter ?? 0.1;
  // The probes' jitter draws from a generator of its own, so the latencies' sequence is the same with or without it.
  const limiter = new AdaptiveConcurrencyLimiter({ ...settings.limiter, clock: clock.now, random: mulberry32((settings.seed ?? 42) + 1) });
  const ending = new Map<number, { slot: AdaptiveSlot; failure: Failure | undefined }[]>();
  const calls: Call[] = [];
  const trace: RunResult['trace'] = [];
  const perMs = (settings.loadFactor * settings.phases[0]!.workers) / settings.baseMs;
  let upstreamInFlight = 0;
  let refused = 0;
  let owed = 0;
  for (let now = 0; now < settings.durationMs; now++) {
    clock.set(now);
    for (const { slot, failure } of ending.get(now) ?? []) {
      upstreamInFlight--;
      if (failure === 'drop') slot.drop();
      else slot.release({ error: failure === 'error' });
    }
    ending.delete(now);
    const workers = [...settings.phases].reverse().find((p) => p.fromMs <= now)!.workers;
    owed += perMs;
    for (; owed >= 1; owed--) {
      const slot = limiter.acquire();
      if (!slot.allowed) {
        refused++;
        continue;
      }
      upstreamInFlight++;
      const factor = 1 + jitter * (2 * random() - 1);
      const latencyMs = Math.max(1, Math.round(settings.baseMs * Math.max(1, upstreamInFlight / workers) * factor));
      const failure = settings.failure?.(now, random);
      calls.push({ admittedAt: now, latencyMs, failed: failure !== undefined });
      const at = now + latencyMs;
      const list = ending.get(at);
      if (list === undefined) ending.set(at, [{ slot, failure }]);
      else list.push({ slot, failure });
    }
    if (now % 100 === 0) {
      const stats = limiter.stats();
      trace.push({ at: now, limit: stats.limit, phase: stats.phase, inFlight: stats.inFlight });
    }
  }
  return { calls, refused, trace, limiter };
}

/** The p-th percentile (0–100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
