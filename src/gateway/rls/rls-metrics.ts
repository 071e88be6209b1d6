/** The rate limit service's metrics on the gateway's registry: decisions per domain, descriptor and outcome, and requests per answer. */
import type { Counter, Registry } from 'prom-client';
import type { PromClient } from '../serve/optional-deps.js';
import type { RlsOutcome, RlsStatus } from './rls-decide.js';

/** How a ShouldRateLimit call was answered. */
export type RlsAnswerKind = 'ok' | 'over_limit' | 'invalid_request' | 'store_error' | 'error';

/** Counters of the rate limit service. */
export class RlsMetrics {
  private readonly decisions: Counter<'domain' | 'descriptor' | 'outcome'>;
  private readonly requests: Counter<'code'>;

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
      help: 'ShouldRateLimit calls by answer: ok, over_limit, invalid_request, store_error (failure policy reject), error.',
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
    this.requests.inc({ code: overall === 'OK' ? 'ok' : 'over_limit' });
  }

  /** Counts a request answered with an error status. */
  failed(kind: Exclude<RlsAnswerKind, 'ok' | 'over_limit'>): void {
    this.requests.inc({ code: kind });
  }

  private decision(domain: string, descriptor: string, outcome: RlsOutcome): void {
    this.decisions.inc({ domain, descriptor, outcome });
  }
}
