/** The rate limit service's metrics on the gateway's registry. */
/**
 * Decisions per domain, descriptor and outcome (a bounded number of descriptors per domain), and requests per answer.
 */
import type { Counter, Registry } from 'prom-client';
import { boundKey } from '../../http/index.js';
import { MAX_KEY_BYTES } from '../rules/compile-rules.js';
import type { PromClient } from '../runtime/optional-deps.js';
import type { RlsOutcome, RlsStatus } from './rls-decide.js';

/** How a ShouldRateLimit call was answered. */
export type RlsAnswerKind = 'ok' | 'over_limit' | 'invalid_request' | 'store_error' | 'no_config' | 'error';

/**
 * Most `descriptor` labels per domain. A `detailed_metric` label is the
 * request's own values; past this many, further ones are counted under
 * {@link OTHER_DESCRIPTORS}, so a flood of values adds no series.
 */
const MAX_DESCRIPTOR_SERIES = 1_000;
/** The `descriptor` label of descriptors past {@link MAX_DESCRIPTOR_SERIES} in their domain. */
const OTHER_DESCRIPTORS = '(other)';

/** One series' count not yet handed to prom-client. */
interface Pending<L> {
  readonly labels: L;
  count: number;
}

/** Counters of the rate limit service. */
export class RlsMetrics {
  /** The labels in use per domain (domains are the config's, or ''). */
  private readonly labels = new Map<string, Set<string>>();
  /**
   * Each decision series' count since the last scrape, per domain, by outcome and label. prom-client hashes a label
   * object on every `inc`, which cost more per call than the decision it counts; the counts are handed to it when
   * the registry is read instead (its `collect`). As bounded as the labels (at most their number × the outcomes).
   */
  private readonly pendingDecisions = new Map<string, Map<string, Pending<{ domain: string; descriptor: string; outcome: string }>>>();
  /** The requests counter's counts since the last scrape, by code. */
  private readonly pendingRequests = new Map<RlsAnswerKind, Pending<{ code: string }>>();

  /**
   * @param prom - the prom-client module
   * @param registry - the gateway's registry (its /metrics)
   */
  constructor(prom: PromClient, registry: Registry) {
    const decisions = this.pendingDecisions;
    const requests = this.pendingRequests;
    new prom.Counter({
      name: 'floodgate_rls_decisions_total',
      help: 'Rate limit service descriptors by domain, descriptor (the limit\'s place in its domain, or with detailed_metric the full descriptor) and outcome; descriptors without a limit are counted with descriptor="".',
      labelNames: ['domain', 'descriptor', 'outcome'],
      registers: [registry],
      collect(this: Counter<'domain' | 'descriptor' | 'outcome'>) {
        for (const series of decisions.values()) flush(this, series.values());
      },
    });
    new prom.Counter({
      name: 'floodgate_rls_requests_total',
      help: 'ShouldRateLimit calls by answer: ok, over_limit, invalid_request, store_error (failure policy reject), no_config (no config loaded yet, badConfigAtStart: serve), error.',
      labelNames: ['code'],
      registers: [registry],
      collect(this: Counter<'code'>) {
        flush(this, requests.values());
      },
    });
  }

  /**
   * Counts one answered request.
   * @param knownDomain - the request's domain when the config has it, else '' (a client's made-up domains do not become series)
   */
  answered(knownDomain: string, statuses: readonly RlsStatus[], overall: 'OK' | 'OVER_LIMIT'): void {
    for (const s of statuses) this.decision(knownDomain, s.metricKey, s.outcome);
    this.request(overall === 'OK' ? 'ok' : 'over_limit');
  }

  /** Counts a request answered with an error status. */
  failed(kind: Exclude<RlsAnswerKind, 'ok' | 'over_limit'>): void {
    this.request(kind);
  }

  private request(code: RlsAnswerKind): void {
    let pending = this.pendingRequests.get(code);
    if (pending === undefined) this.pendingRequests.set(code, (pending = { labels: { code }, count: 0 }));
    pending.count++;
  }

  private decision(domain: string, descriptor: string, outcome: RlsOutcome): void {
    const label = this.label(domain, descriptor);
    let series = this.pendingDecisions.get(domain);
    if (series === undefined) this.pendingDecisions.set(domain, (series = new Map()));
    const key = `${outcome}\u0000${label}`;
    let pending = series.get(key);
    if (pending === undefined) series.set(key, (pending = { labels: { domain, descriptor: label, outcome }, count: 0 }));
    pending.count++;
  }

  /** `descriptor` as a label: at most MAX_KEY_BYTES (longer ones hashed, as counter keys are), and one of at most MAX_DESCRIPTOR_SERIES per domain. */
  private label(domain: string, descriptor: string): string {
    let seen = this.labels.get(domain);
    if (seen === undefined) this.labels.set(domain, (seen = new Set()));
    if (seen.has(descriptor)) return descriptor;
    const bounded = boundKey(descriptor, MAX_KEY_BYTES);
    if (seen.has(bounded)) return bounded;
    if (seen.size >= MAX_DESCRIPTOR_SERIES) return OTHER_DESCRIPTORS;
    seen.add(bounded);
    return bounded;
  }

  /** Forgets the labels of domains not in `domains` (after a reload), so a removed domain's count does not hold back a new one's. */
  retain(domains: ReadonlySet<string>): void {
    for (const domain of this.labels.keys()) if (domain !== '' && !domains.has(domain)) this.labels.delete(domain);
    // Their counts not yet scraped stay until the next scrape hands them over.
    for (const [domain, series] of this.pendingDecisions)
      if (domain !== '' && !domains.has(domain)) for (const [key, pending] of series) if (pending.count === 0) series.delete(key);
  }
}

/** Hands each series' count since the last scrape to `counter`. */
function flush<L extends Record<string, string>>(counter: Counter<Extract<keyof L, string>>, series: Iterable<Pending<L>>): void {
  for (const pending of series) {
    if (pending.count === 0) continue;
    counter.inc(pending.labels as never, pending.count);
    pending.count = 0;
  }
}
