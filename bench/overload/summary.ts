/** The overload scenario's figures of each run against issue 35's targets: goodput, tails, classes, tenants, the limit's settling. */
import {
  count,
  goodPerSecond,
  isOk,
  isRefused,
  jain,
  maxMinFair,
  median,
  perSecond,
  percentile,
  settleTime,
  type Counts,
} from './analysis.js';
import type { PhaseMeasured } from './measure.js';
import { CAPACITY, DEADLINE_MS, UPSTREAM, type PhaseRun } from './phases.js';

/** Per class (phase d). */
export interface ClassFigures extends Counts {
  readonly admittedRps: number;
  /** Its admitted requests' p99 latency, ms. */
  readonly p99Ms: number | null;
}

/** Per tenant (phase e). */
export interface TenantFigures {
  readonly offeredRps: number;
  readonly admittedRps: number;
  /** Its max-min fair share of the admitted total, requests/s. */
  readonly fairShareRps: number;
  /** admitted ÷ fair share. */
  readonly shareRatio: number;
  /** Its admitted requests' p99 latency, ms. */
  readonly p99Ms: number | null;
}

/** The capacity change (phase f). */
export interface SettleFigures {
  /** Seconds after the drop until the limit stayed within ±30 % of where it settled (null: it never did). */
  readonly downS: number | null;
  readonly downSettled: number | null;
  /** The same after capacity came back. */
  readonly upS: number | null;
  readonly upSettled: number | null;
  /** Goodput per second of the measured period (by when the answers ended). */
  readonly goodputPerSecond: readonly number[];
  /** The limit per second (median of that second's samples). */
  readonly limitPerSecond: readonly (number | null)[];
  /** The lowest goodput of a whole second from drop + downS to the return, and the floor it must stay above (80 % of the reduced capacity). */
  readonly minGoodputAfterSettle: number | null;
  readonly floorRps: number;
  readonly dropAtS: number;
  readonly returnAtS: number;
}

/** Everything one run's row and tables show. */
export interface PhaseSummary {
  readonly phase: PhaseRun['phase'];
  readonly variant: string;
  readonly description: string;
  readonly offeredRps: number;
  readonly durationS: number;
  readonly counts: Counts;
  /** 200 responses within the deadline that ended in the measured period, per second, and that ÷ the upstream's capacity. */
  readonly goodputRps: number;
  readonly goodputShare: number;
  /** Admitted (200) responses' latency from when each request was due, ms. */
  readonly p50Ms: number | null;
  readonly p90Ms: number | null;
  readonly p99Ms: number | null;
  readonly maxMs: number | null;
  /** p99 ÷ the unloaded run's p99 (phase a of the same invocation), null without it. */
  readonly p99Ratio: number | null;
  /** The median of the sampled floodgate_overload_limit, null without a limiter. */
  readonly limitMedian: number | null;
  readonly upstream: PhaseMeasured['upstream'];
  readonly gatewayCpuUsPerReq: number | null;
  readonly decisions: Readonly<Record<string, number>>;
  readonly classes?: Readonly<Record<string, ClassFigures>>;
  /** Critical refusals in the seconds where some sheddable request was admitted, and how many such seconds there were. */
  readonly criticalRefusedWhileSheddableAdmitted?: number;
  readonly secondsSheddableAdmitted?: number;
  readonly tenants?: Readonly<Record<string, TenantFigures>>;
  /** Jain's index over the quiet tenants' share ratios (equal starvation scores 1 too), and over every tenant's. */
  readonly jainQuiet?: number | null;
  readonly jainAll?: number | null;
  readonly settle?: SettleFigures;
}

const by = <T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> => {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group === undefined) groups.set(k, [item]);
    else group.push(item);
  }
  return groups;
};

/** The figures of one measured run; `unloadedP99` is phase a's admitted p99 when it ran. */
export function summarize(m: PhaseMeasured, unloadedP99: number | null): PhaseSummary {
  const { run, durationS } = m;
  // The requests due in the measured period; goodput alone counts answers that ended in it (see goodPerSecond).
  const outcomes = m.outcomes.filter((o) => o.at >= 0);
  const counts = count(outcomes, DEADLINE_MS);
  const good = goodPerSecond(m.outcomes, durationS, DEADLINE_MS).reduce((a, b) => a + b, 0);
  const admitted = outcomes.filter(isOk).map((o) => o.latencyMs);
  const p99Ms = percentile(admitted, 0.99);
  const offered = counts.offered;
  const summary: PhaseSummary = {
    phase: run.phase,
    variant: run.variant,
    description: run.description,
    offeredRps: offered / durationS,
    durationS,
    counts,
    goodputRps: good / durationS,
    goodputShare: good / durationS / CAPACITY,
    p50Ms: percentile(admitted, 0.5),
    p90Ms: percentile(admitted, 0.9),
    p99Ms,
    maxMs: percentile(admitted, 1),
    p99Ratio: p99Ms === null || unloadedP99 === null ? null : p99Ms / unloadedP99,
    limitMedian: median(m.samples.filter((s) => s.limit !== null).map((s) => s.limit!)),
    upstream: m.upstream,
    gatewayCpuUsPerReq: m.gatewayCpuMs === null || offered === 0 ? null : (m.gatewayCpuMs * 1000) / offered,
    decisions: m.decisions,
  };
  const measured = { ...m, outcomes };
  if (run.phase === 'd') return { ...summary, ...classFigures(measured) };
  if (run.phase === 'e') return { ...summary, ...tenantFigures(measured) };
  if (run.phase === 'f') return { ...summary, settle: settleFigures(m) };
  return summary;
}

function classFigures(
  m: PhaseMeasured,
): Pick<PhaseSummary, 'classes' | 'criticalRefusedWhileSheddableAdmitted' | 'secondsSheddableAdmitted'> {
  const classes: Record<string, ClassFigures> = {};
  for (const [name, group] of by(m.outcomes, (o) => o.cls)) {
    const counts = count(group, DEADLINE_MS);
    classes[name] = {
      ...counts,
      admittedRps: counts.admitted / m.durationS,
      p99Ms: percentile(
        group.filter(isOk).map((o) => o.latencyMs),
        0.99,
      ),
    };
  }
  const sheddableAdmitted = perSecond(m.outcomes, m.durationS, (s) => s.filter((o) => o.cls === 'sheddable' && isOk(o)).length);
  const criticalRefused = perSecond(m.outcomes, m.durationS, (s) => s.filter((o) => o.cls === 'critical' && isRefused(o)).length);
  let both = 0;
  let seconds = 0;
  sheddableAdmitted.forEach((n, i) => {
    if (n === 0) return;
    seconds += 1;
    both += criticalRefused[i]!;
  });
  return { classes, criticalRefusedWhileSheddableAdmitted: both, secondsSheddableAdmitted: seconds };
}

function tenantFigures(m: PhaseMeasured): Pick<PhaseSummary, 'tenants' | 'jainQuiet' | 'jainAll'> {
  const groups = by(m.outcomes, (o) => o.tenant);
  const offered: Record<string, number> = {};
  const admitted: Record<string, number> = {};
  for (const [name, group] of groups) {
    offered[name] = group.length / m.durationS;
    admitted[name] = group.filter(isOk).length / m.durationS;
  }
  const total = Object.values(admitted).reduce((a, b) => a + b, 0);
  const fair = maxMinFair(offered, total);
  const tenants: Record<string, TenantFigures> = {};
  for (const name of [...groups.keys()].sort()) {
    tenants[name] = {
      offeredRps: offered[name]!,
      admittedRps: admitted[name]!,
      fairShareRps: fair[name]!,
      shareRatio: admitted[name]! / fair[name]!,
      p99Ms: percentile(
        groups
          .get(name)!
          .filter(isOk)
          .map((o) => o.latencyMs),
        0.99,
      ),
    };
  }
  // The noisy tenant is the one sending most; the others are the quiet ones the target is about.
  const noisy = Object.keys(offered).sort((a, b) => offered[b]! - offered[a]!)[0];
  const quiet = Object.keys(tenants).filter((name) => name !== noisy);
  return {
    tenants,
    jainQuiet: jain(quiet.map((name) => tenants[name]!.shareRatio)),
    jainAll: jain(Object.values(tenants).map((t) => t.shareRatio)),
  };
}

function settleFigures(m: PhaseMeasured): SettleFigures {
  const events = m.run.events ?? [];
  const durationMs = m.durationS * 1000;
  const dropMs = (events[0]?.atShare ?? 1 / 3) * durationMs;
  const returnMs = (events[1]?.atShare ?? 1) * durationMs;
  // Where the limit settled: its median over the last 3 s of each segment (less if the segment is short).
  const window = Math.min(3000, (returnMs - dropMs) / 2);
  const down = settleTime(m.samples, dropMs, returnMs, 0.3, window);
  const up = settleTime(m.samples, returnMs, durationMs, 0.3, Math.min(3000, (durationMs - returnMs) / 2));
  const goodputPerSecond = goodPerSecond(m.outcomes, m.durationS, DEADLINE_MS);
  const limitPerSecond = Array.from({ length: m.durationS }, (_, i) =>
    median(m.samples.filter((s) => s.at >= i * 1000 && s.at < (i + 1) * 1000 && s.limit !== null).map((s) => s.limit!)),
  );
  const from = down.seconds === null ? null : Math.ceil(dropMs / 1000 + down.seconds - 1e-9);
  const after = from === null ? [] : goodputPerSecond.slice(from, Math.floor(returnMs / 1000));
  return {
    downS: down.seconds,
    downSettled: down.settled,
    upS: up.seconds,
    upSettled: up.settled,
    goodputPerSecond,
    limitPerSecond,
    minGoodputAfterSettle: after.length === 0 ? null : Math.min(...after),
    floorRps: 0.8 * CAPACITY * ((events[0]?.workers ?? UPSTREAM.workers) / UPSTREAM.workers),
    dropAtS: dropMs / 1000,
    returnAtS: returnMs / 1000,
  };
}
