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

/** Counters of the rate limit service. */
export class RlsMetrics {
  private readonly decisions: Counter<'domain' | 'descriptor' | 'outcome'>;
  private readonly requests: Counter<'code'>;
  /** The labels in use per domain (domains are the config's, or ''). */
  private readonly labels = new Map<string, Set<string>>();
  /**
   * Each series' counter per domain, by outcome and label: prom-client hashes a label object on every `inc`, which
   * cost more per call than the decision it counts. As bounded as the labels (at most their number × the outcomes).
   */
  private readonly children = new Map<string, Map<string, Counter.Internal>>();
  /** The requests counter's series, by code. */
  private readonly requestChildren = new Map<RlsAnswerKind, Counter.Internal>();

  /**
   * @param prom - the prom-client module
   * @param registry - the gateway's registry (its /metrics)
   */
  constructor(prom: PromClient, registry: Registry) {
    this.decisions = new prom.Counter({
      name: 'floodgate_rls_decisions_total',
      help: 'Rate limit service descriptors by domain, descriptor (the limit\'s place in its domain, or with detailed_metric the full descriptor) and outcome; descriptors without a limit are counted with descriptor="".',
      labelNames: ['domain', 'descriptor', 'outcome'],
      registers: [registry],
    });
    this.requests = new prom.Counter({
      name: 'floodgate_rls_requests_total',
      help: 'ShouldRateLimit calls by answer: ok, over_limit, invalid_request, store_error (failure policy reject), no_config (no config loaded yet, badConfigAtStart: serve), error.',
      labelNames: ['code'],
      registers: [registry],
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
    let child = this.requestChildren.get(code);
    if (child === undefined) this.requestChildren.set(code, (child = this.requests.labels({ code })));
    child.inc();
  }

  private decision(domain: string, descriptor: string, outcome: RlsOutcome): void {
    const label = this.label(domain, descriptor);
    let series = this.children.get(domain);
    if (series === undefined) this.children.set(domain, (series = new Map()));
    const key = `${outcome}\u0000${label}`;
    let child = series.get(key);
    if (child === undefined) series.set(key, (child = this.decisions.labels({ domain, descriptor: label, outcome })));
    child.inc();
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
    for (const domain of this.children.keys()) if (domain !== '' && !domains.has(domain)) this.children.delete(domain);
  }
}
