/** The live dashboard's data (`GET /admin/stats`). */
/**
 * Decisions per rule and outcome and store latency read from the same prom-client registry `/metrics` renders, the
 * most-limited keys, and each policy's breaker and fallback.
 */
import type { Registry } from 'prom-client';
import type { RateLimiter } from '../../index.js';
import type { FailurePolicy } from '../config/settings.js';
import type { AdminApiSource } from './admin-api.js';
import { policyName } from './admin-rules.js';
import type { LimitedKey } from './limited-keys.js';

/** Minutes of refusals the dashboard's most-limited list covers. */
const DASHBOARD_LIMITED_MINUTES = 5;
/** Keys per rule in the dashboard's most-limited list. */
const DASHBOARD_LIMITED_TOP = 10;

/** What the stats read from the running gateway. */
export interface DashboardSource {
  /** The registry `/metrics` renders: the decision counts and store latency come from it, so both agree. */
  readonly registry: Registry;
  /** The rules in force and the most-limited keys, as the admin API sees them. */
  readonly admin: AdminApiSource;
  /** The store as the gateway describes it, and whether it is connected now. */
  store(): { readonly description: string; readonly connected: boolean };
}

/** One `floodgate_decisions_total` series. */
interface DecisionCount {
  /** The rule (`(none)` for requests no rule matched). */
  readonly rule: string;
  /** The outcome label. */
  readonly outcome: string;
  /** Decisions since the gateway started. */
  readonly count: number;
}

/** One `floodgate_store_duration_seconds` series, cumulative since start; the page turns two of them into an interval's latency. */
interface LatencySeries {
  /** The store label. */
  readonly store: string;
  /** `ok` or `error`. */
  readonly result: string;
  /** Calls timed. */
  readonly count: number;
  /** Their total time, in seconds. */
  readonly sumSeconds: number;
  /** Cumulative counts per upper bound in seconds, ascending; the +Inf bucket is `count`. */
  readonly buckets: ReadonlyArray<{ readonly le: number; readonly count: number }>;
}

/** Where one policy's limiter stands with its store. */
interface PolicyHealth {
  /** The policy's name, as the admin API reports it. */
  readonly policy: string;
  /** `off` (no breaker), `closed`, `open` (calls kept from the store), or `probing` (one call let through to test it). */
  readonly breaker: 'off' | 'closed' | 'open' | 'probing';
  /** ms until an open breaker lets a probe through; 0 otherwise. */
  readonly retryInMs: number;
  /** What answers while the store fails: `reject` means nothing does (the request is answered as a store error). */
  readonly fallback: FailurePolicy;
  /** True while the fallback answers instead of the store: the breaker keeps calls away, or the store is not connected. */
  readonly fallbackInUse: boolean;
}

/** The body of `GET /admin/stats`. */
export interface DashboardStats {
  /** Taken just before the numbers were read, in ms since the epoch: the page divides count differences by time differences. */
  readonly at: number;
  /** Every decision series. */
  readonly decisions: readonly DecisionCount[];
  /** The store, its connection and its call latency. */
  readonly store: { readonly description: string; readonly connected: boolean; readonly latency: readonly LatencySeries[] };
  /** Per rule, each policy's breaker and fallback. */
  readonly rules: ReadonlyArray<{ readonly rule: string; readonly shadow: boolean; readonly policies: readonly PolicyHealth[] }>;
  /** The most-refused keys per rule over the last {@link DASHBOARD_LIMITED_MINUTES} minutes. */
  readonly limited: {
    readonly minutes: number;
    readonly rules: ReadonlyArray<{ readonly rule: string; readonly keys: readonly LimitedKey[] }>;
  };
}

/** Reads the numbers the dashboard shows, now. */
export async function dashboardStats(source: DashboardSource): Promise<DashboardStats> {
  // Before the reads: a client that saw /metrics before this instant knows every count here is at least what it saw.
  const at = Date.now();
  // Reading a metric runs its collect hook, exactly as a scrape does, so the counts equal what /metrics says next.
  const [decisions, latency] = await Promise.all([
    source.registry.getSingleMetric('floodgate_decisions_total')?.get(),
    source.registry.getSingleMetric('floodgate_store_duration_seconds')?.get(),
  ]);
  const store = source.store();
  const rules = source.admin.rules();
  return {
    at,
    decisions: (decisions?.values ?? []).map((v) => ({
      rule: String(v.labels.rule),
      outcome: String(v.labels.outcome),
      count: v.value,
    })),
    store: { ...store, latency: latencySeries(latency?.values ?? []) },
    rules: rules.map((r) => ({
      rule: r.settings.name,
      shadow: r.settings.shadow,
      policies: r.limiters.map((limiter, i) => policyHealth(policyName(r.settings.policies[i]!), limiter, store.connected)),
    })),
    limited: {
      minutes: DASHBOARD_LIMITED_MINUTES,
      rules: rules.map((r) => ({
        rule: r.settings.name,
        keys: source.admin.limited.top(r.settings.name, DASHBOARD_LIMITED_MINUTES, DASHBOARD_LIMITED_TOP),
      })),
    },
  };
}

interface MetricValue {
  readonly value: number;
  readonly labels: Partial<Record<string, string | number>>;
  readonly metricName?: string | undefined;
}

/** Regroups a histogram's flat values (`_bucket` per bound, `_sum`, `_count`) into one series per store and result. */
function latencySeries(values: readonly MetricValue[]): LatencySeries[] {
  const series = new Map<
    string,
    { store: string; result: string; count: number; sumSeconds: number; buckets: Array<{ le: number; count: number }> }
  >();
  for (const v of values) {
    const store = String(v.labels.store);
    const result = String(v.labels.result);
    const id = `${store}\0${result}`;
    let s = series.get(id);
    if (s === undefined) series.set(id, (s = { store, result, count: 0, sumSeconds: 0, buckets: [] }));
    const name = v.metricName ?? '';
    if (name.endsWith('_sum')) s.sumSeconds = v.value;
    else if (name.endsWith('_count')) s.count = v.value;
    else if (name.endsWith('_bucket') && v.labels.le !== '+Inf') s.buckets.push({ le: Number(v.labels.le), count: v.value });
  }
  for (const s of series.values()) s.buckets.sort((a, b) => a.le - b.le);
  return [...series.values()];
}

function policyHealth(policy: string, limiter: RateLimiter, connected: boolean): PolicyHealth {
  const { breaker, retryInMs, fallback } = limiter.health();
  return {
    policy,
    breaker,
    retryInMs,
    fallback,
    fallbackInUse: fallback !== 'reject' && (breaker === 'open' || breaker === 'probing' || !connected),
  };
}
