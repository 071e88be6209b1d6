/** Under `--workers`: the workers' admin answers put together into the one a single process would give. */
/**
 * Counters are in the shared store, so every worker reads a key's count alike; what differs is each worker's own:
 * its in-memory blocks, the refusals it saw, its decisions and store latency. Those are combined here.
 */
import type { DashboardStats } from '../admin/dashboard-stats.js';

/** One row of `/admin/limited` or of the dashboard's most-limited list. */
interface LimitedRow {
  readonly policy: string;
  readonly key: string;
  readonly refusals: number;
}

/** The per-rule lists of `/admin/limited` and of the dashboard's stats. */
type LimitedRules = ReadonlyArray<{ readonly rule: string; readonly keys: readonly LimitedRow[] }>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The union of the workers' most-limited lists: a key refused in several
 * workers is listed once with their refusals summed, the `top` most refused
 * per rule (rules in the first list's order; ties by policy and key, as in
 * one process).
 */
function unionLimited(lists: readonly LimitedRules[], top: (rule: string) => number): LimitedRules {
  const rules = new Map<string, Map<string, LimitedRow>>();
  for (const list of lists) {
    for (const { rule, keys } of list) {
      let rows = rules.get(rule);
      if (rows === undefined) rules.set(rule, (rows = new Map()));
      for (const row of keys) {
        const id = `${row.policy}\u0000${row.key}`;
        rows.set(id, { policy: row.policy, key: row.key, refusals: (rows.get(id)?.refusals ?? 0) + row.refusals });
      }
    }
  }
  return [...rules].map(([rule, rows]) => ({
    rule,
    keys: [...rows]
      .sort((a, b) => b[1].refusals - a[1].refusals || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, top(rule))
      .map(([, row]) => row),
  }));
}

/** `GET /admin/limited` over every worker's answer (each asked for its longest list): the union, cut to `top`. */
export function mergeLimited(bodies: readonly unknown[], top: number): unknown {
  const lists = bodies.filter(isObject);
  const first = lists[0]!;
  return {
    ...first,
    // Entries held over every worker: each worker's table is bounded, so this is too.
    tracked: lists.reduce((sum, b) => sum + (typeof b.tracked === 'number' ? b.tracked : 0), 0),
    rules: unionLimited(
      lists.map((b) => (Array.isArray(b.rules) ? (b.rules as LimitedRules) : [])),
      () => top,
    ),
  };
}

/**
 * A key's state (inspect, or the answer to reset, block, unblock): the
 * counts as `base` (the lead worker) read them from the shared store, and
 * each policy's in-memory block as the longest any worker holds, since a
 * worker holding one refuses the key without asking the store.
 */
export function mergeKeyState(base: unknown, others: readonly unknown[]): unknown {
  if (!isObject(base) || !Array.isArray(base.policies)) return base;
  const policies = (base.policies as unknown[]).map((p, i) => {
    if (!isObject(p) || typeof p.memoryBlockMs !== 'number') return p;
    let longest = p.memoryBlockMs;
    for (const other of others) {
      const q = isObject(other) && Array.isArray(other.policies) ? (other.policies as unknown[])[i] : undefined;
      if (isObject(q) && q.policy === p.policy && typeof q.memoryBlockMs === 'number') longest = Math.max(longest, q.memoryBlockMs);
    }
    return { ...p, memoryBlockMs: longest };
  });
  return { ...base, policies };
}

type Health = DashboardStats['rules'][number]['policies'][number];
const BREAKER_RANK: Record<Health['breaker'], number> = { off: 0, closed: 1, probing: 2, open: 3 };

/**
 * The dashboard's numbers of every worker as one gateway's, as the
 * primary's /metrics aggregates them: decisions and store latency summed,
 * the store connected when every worker's is, each policy's breaker the
 * worst any worker has (its fallback in use when it is in any), and the
 * most-limited keys as their union. `at` is the primary's, taken before it
 * asked the workers.
 */
export function mergeStats(all: readonly DashboardStats[], at: number): DashboardStats {
  const first = all[0]!;
  const decisions = new Map<string, DashboardStats['decisions'][number]>();
  const latency = new Map<string, DashboardStats['store']['latency'][number]>();
  for (const stats of all) {
    for (const d of stats.decisions) {
      const id = `${d.rule}\u0000${d.outcome}`;
      decisions.set(id, { ...d, count: (decisions.get(id)?.count ?? 0) + d.count });
    }
    for (const s of stats.store.latency) {
      const id = `${s.store}\u0000${s.result}`;
      const seen = latency.get(id);
      latency.set(id, seen === undefined ? s : sumLatency(seen, s));
    }
  }
  return {
    at,
    decisions: [...decisions.values()],
    store: { description: first.store.description, connected: all.every((s) => s.store.connected), latency: [...latency.values()] },
    rules: first.rules.map((rule) => ({
      ...rule,
      policies: rule.policies.map((p) =>
        worstHealth(
          p,
          all.map((s) => s.rules.find((r) => r.rule === rule.rule)?.policies.find((q) => q.policy === p.policy)),
        ),
      ),
    })),
    limited: {
      minutes: first.limited.minutes,
      // Each worker sends its top list; the union keeps as many per rule as the longest of them.
      rules: unionLimited(
        all.map((s) => s.limited.rules),
        (rule) => Math.max(0, ...all.map((s) => s.limited.rules.find((r) => r.rule === rule)?.keys.length ?? 0)),
      ),
    },
  };
}

function sumLatency(
  a: DashboardStats['store']['latency'][number],
  b: DashboardStats['store']['latency'][number],
): DashboardStats['store']['latency'][number] {
  const buckets = new Map<number, number>();
  for (const x of [...a.buckets, ...b.buckets]) buckets.set(x.le, (buckets.get(x.le) ?? 0) + x.count);
  return {
    store: a.store,
    result: a.result,
    count: a.count + b.count,
    sumSeconds: a.sumSeconds + b.sumSeconds,
    buckets: [...buckets].sort((x, y) => x[0] - y[0]).map(([le, count]) => ({ le, count })),
  };
}

function worstHealth(p: Health, all: ReadonlyArray<Health | undefined>): Health {
  let worst = p;
  let retryInMs = p.retryInMs;
  let fallbackInUse = p.fallbackInUse;
  for (const q of all) {
    if (q === undefined) continue;
    if (BREAKER_RANK[q.breaker] > BREAKER_RANK[worst.breaker]) worst = q;
    retryInMs = Math.max(retryInMs, q.retryInMs);
    fallbackInUse ||= q.fallbackInUse;
  }
  return { ...worst, retryInMs, fallbackInUse };
}
