/** The gateway's Prometheus metrics (prom-client, on a registry of its own). */
/**
 * Decisions by rule and outcome, store latency and synchronous store answers, upstream latency, reloads.
 */
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PromClient } from './optional-deps.js';

/** Outcomes counted in `floodgate_decisions_total`. */
export type DecisionOutcome =
  'allowed' | 'limited' | 'missing_key' | 'invalid_key' | 'store_error' | 'error' | 'shadow_allowed' | 'shadow_limited' | 'unmatched';

/** How an upstream exchange ended, for `floodgate_upstream_duration_seconds`. */
export type UpstreamOutcome = 'response' | 'error' | 'timeout';

/**
 * Counts of one counter series not yet added to the counter: the hot path
 * bumps `count` (a prom-client inc hashes and validates its labels each
 * time), and a scrape adds it (see {@link GatewayMetrics.decisionCell}).
 */
export interface CountCell<L extends Record<string, string>> {
  /** The series' labels. */
  readonly labels: L;
  /** Counted since the last scrape. */
  count: number;
}

/** The cell of one `floodgate_decisions_total` series. */
export type DecisionCell = CountCell<{ readonly rule: string; readonly outcome: DecisionOutcome }>;

/** The cell of one `floodgate_near_limit_total` series. */
export type NearLimitCell = CountCell<{ readonly rule: string; readonly policy: string }>;

/** One series of a latency histogram. */
export interface LatencyChild {
  /** Records one duration, in seconds. */
  observe(seconds: number): void;
}

/**
 * A second recorder of the latency histograms (OpenTelemetry, see
 * otel-metrics.ts): given a histogram's name and one series' labels, the
 * child that records into it too, or undefined for none.
 */
export type LatencyTap = (histogram: 'store' | 'upstream', labels: Readonly<Record<string, string>>) => LatencyChild | undefined;

/** Store latency buckets in seconds: store calls are sub-millisecond, upstreams are not. */
export const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Upstream latency buckets in seconds. */
export const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Every metric the gateway exports, with per-label-set children cached so the hot path does no label hashing. */
export class GatewayMetrics {
  /** The registry `/metrics` renders. */
  readonly registry: Registry;
  private readonly decisions: Counter<'rule' | 'outcome'>;
  private readonly storeLatency: Histogram<'store' | 'result'>;
  private readonly upstreamLatency: Histogram<'outcome'>;
  private readonly upstreamErrors: Counter<'kind'>;
  private readonly clientCuts: Counter<'reason'>;
  private readonly reloads: Counter<'result'>;
  private readonly lastReload: Gauge;
  private readonly decisionCells = new Map<string, DecisionCell>();
  private readonly syncAnswerCells = new Map<string, CountCell<{ readonly store: string }>>();
  private readonly costMissingCells = new Map<string, CountCell<{ readonly rule: string }>>();
  private readonly nearLimitCells = new Map<string, NearLimitCell>();
  private readonly storeChildren = new Map<string, LatencyChild>();
  private readonly upstreamChildren = new Map<string, LatencyChild>();

  /**
   * @param prom - the prom-client module
   * @param tap - records every latency a second time (OpenTelemetry), when given
   */
  constructor(
    prom: PromClient,
    private readonly tap?: LatencyTap,
  ) {
    this.registry = new prom.Registry();
    const registers = [this.registry];
    prom.collectDefaultMetrics({ register: this.registry });
    const decisionCells = this.decisionCells;
    this.decisions = new prom.Counter({
      name: 'floodgate_decisions_total',
      help: 'Rate-limit decisions by rule and outcome (shadow_* for rules in shadow mode; unmatched when no rule applied).',
      labelNames: ['rule', 'outcome'],
      registers,
      collect() {
        addCells(this, decisionCells);
      },
    });
    this.storeLatency = new prom.Histogram({
      name: 'floodgate_store_duration_seconds',
      help: 'Time the store took to answer one operation (in-memory block hits do not reach the store).',
      labelNames: ['store', 'result'],
      buckets: STORE_BUCKETS,
      registers,
    });
    const syncCells = this.syncAnswerCells;
    new prom.Counter({
      name: 'floodgate_store_sync_answers_total',
      help: 'Store operations answered synchronously in this process (Store.applyNow: local-first leases, refusals the cluster store remembers); not in floodgate_store_duration_seconds.',
      labelNames: ['store'],
      registers,
      collect() {
        addCells(this, syncCells);
      },
    });
    this.upstreamLatency = new prom.Histogram({
      name: 'floodgate_upstream_duration_seconds',
      help: "Time from forwarding a request to the upstream's response headers (or its failure).",
      labelNames: ['outcome'],
      buckets: UPSTREAM_BUCKETS,
      registers,
    });
    this.upstreamErrors = new prom.Counter({
      name: 'floodgate_upstream_errors_total',
      help: 'Upstream failures by kind: connect (refused, reset, DNS), timeout (connect or headers), body (failed mid-response, or a client body too slow), queue (no connection free in time).',
      labelNames: ['kind'],
      registers,
    });
    const missingCells = this.costMissingCells;
    new prom.Counter({
      name: 'floodgate_cost_missing_total',
      help: 'Responses of a rule with cost charged cost.missing: a 2xx that reported no usage, could not be read, or was cut short before its usage.',
      labelNames: ['rule'],
      registers,
      collect() {
        addCells(this, missingCells);
      },
    });
    const nearCells = this.nearLimitCells;
    new prom.Counter({
      name: 'floodgate_near_limit_total',
      help: "Admitted requests that left their key with at least the rule's nearLimit share (0.8 by default) of a policy's limit used, by rule and policy (no key label).",
      labelNames: ['rule', 'policy'],
      registers,
      collect() {
        addCells(this, nearCells);
      },
    });
    this.reloads = new prom.Counter({
      name: 'floodgate_config_reloads_total',
      help: 'Config reloads (SIGHUP or file change) by result; a failed reload keeps the last good config.',
      labelNames: ['result'],
      registers,
    });
    this.lastReload = new prom.Gauge({
      name: 'floodgate_config_last_reload_success',
      help: '1 when the last config reload succeeded (or none was tried), 0 when it failed.',
      registers,
      // Under --workers the primary aggregates: 0 when any worker's last reload failed, not a sum.
      aggregator: 'min',
    });
    this.lastReload.set(1);
    const inFlight = (): number => this.inFlight();
    new prom.Gauge({
      name: 'floodgate_requests_in_flight',
      help: 'Requests being decided or proxied now.',
      registers,
      // Read at scrape time, so the hot path only bumps a plain number.
      collect() {
        this.set(inFlight());
      },
    });
    const bufferBytes = (): number => this.requestBufferBytes();
    new prom.Gauge({
      name: 'floodgate_request_buffer_bytes',
      help: 'Bytes of request bodies held in memory now (at most proxy.requestBufferTotal; a body that does not fit streams).',
      registers,
      collect() {
        this.set(bufferBytes());
      },
    });
    this.clientCuts = new prom.Counter({
      name: 'floodgate_client_cuts_total',
      help: 'Responses cut because their client read them too slowly: slow_response (under proxy.minResponseRate), response_timeout (still waiting on the client after proxy.responseTimeout).',
      labelNames: ['reason'],
      registers,
    });
    const overflows = (): number => this.overflows();
    new prom.Gauge({
      name: 'floodgate_store_overflows',
      help: "Decisions made in an overflow sketch since start because a rule's key table was full (embedded memory store).",
      registers,
      collect() {
        this.set(overflows());
      },
    });
  }

  /** Source of `floodgate_requests_in_flight`; the server replaces it. */
  inFlight: () => number = () => 0;

  /** Source of `floodgate_store_overflows`; the server replaces it. */
  overflows: () => number = () => 0;

  /** Source of `floodgate_request_buffer_bytes`; the request-body budget replaces it. */
  requestBufferBytes: () => number = () => 0;

  /** Counts a response cut for a client reading too slowly. */
  clientCut(reason: 'slow_response' | 'response_timeout'): void {
    this.clientCuts.labels(reason).inc();
  }

  /** Counts one decision. */
  decision(rule: string, outcome: DecisionOutcome): void {
    this.decisionCell(rule, outcome).count += 1;
  }

  /**
   * The cell that counts `outcome` for `rule`, for callers that bind it once
   * (per compiled rule) and bump `count` per request. Cells live as long as
   * the metrics, so a reload that keeps a rule keeps counting into its series.
   */
  decisionCell(rule: string, outcome: DecisionOutcome): DecisionCell {
    const id = `${rule}\0${outcome}`;
    let cell = this.decisionCells.get(id);
    if (cell === undefined) {
      cell = { labels: { rule, outcome }, count: 0 };
      this.decisionCells.set(id, cell);
    }
    return cell;
  }

  /** Counts one response of `rule` charged `cost.missing` (`floodgate_cost_missing_total`). */
  costMissing(rule: string): void {
    let cell = this.costMissingCells.get(rule);
    if (cell === undefined) {
      cell = { labels: { rule }, count: 0 };
      this.costMissingCells.set(rule, cell);
    }
    cell.count += 1;
  }

  /**
   * The cell that counts the requests of `rule` near the limit of `policy`
   * (`floodgate_near_limit_total`), for callers that bind it once and bump
   * `count` per request.
   */
  nearLimitCell(rule: string, policy: string): NearLimitCell {
    const id = `${rule}\0${policy}`;
    let cell = this.nearLimitCells.get(id);
    if (cell === undefined) {
      cell = { labels: { rule, policy }, count: 0 };
      this.nearLimitCells.set(id, cell);
    }
    return cell;
  }

  /** Records one store call. */
  storeCall(store: string, ok: boolean, seconds: number): void {
    this.storeLatencyChild(store, ok).observe(seconds);
  }

  /** The `floodgate_store_duration_seconds` series of `store` and a result, for callers that bind it once. */
  storeLatencyChild(store: string, ok: boolean): LatencyChild {
    const id = `${store}\0${ok}`;
    let child = this.storeChildren.get(id);
    if (child === undefined) {
      const result = ok ? 'ok' : 'error';
      child = tapped(this.storeLatency.labels(store, result), this.tap?.('store', { store, result }));
      this.storeChildren.set(id, child);
    }
    return child;
  }

  /** The `floodgate_store_sync_answers_total` cell of `store`, for callers that bind it once and bump `count` per answer. */
  storeSyncCell(store: string): CountCell<{ readonly store: string }> {
    let cell = this.syncAnswerCells.get(store);
    if (cell === undefined) {
      cell = { labels: { store }, count: 0 };
      this.syncAnswerCells.set(store, cell);
    }
    return cell;
  }

  /** Records one upstream exchange (to headers or failure). */
  upstream(outcome: UpstreamOutcome, seconds: number): void {
    this.upstreamLatencyChild(outcome).observe(seconds);
  }

  /** The `floodgate_upstream_duration_seconds` series of `outcome`, for callers that bind it once. */
  upstreamLatencyChild(outcome: UpstreamOutcome): LatencyChild {
    let child = this.upstreamChildren.get(outcome);
    if (child === undefined) {
      child = tapped(this.upstreamLatency.labels(outcome), this.tap?.('upstream', { outcome }));
      this.upstreamChildren.set(outcome, child);
    }
    return child;
  }

  /** Counts an upstream failure. */
  upstreamError(kind: 'connect' | 'timeout' | 'body' | 'queue'): void {
    this.upstreamErrors.labels(kind).inc();
  }

  /** Records a reload attempt. */
  reload(ok: boolean): void {
    this.reloads.labels(ok ? 'success' : 'failure').inc();
    this.lastReload.set(ok ? 1 : 0);
  }
}

/** Adds what the hot path counted in `cells` to `counter` (at scrape time), and starts the cells over. */
function addCells(counter: Counter<string>, cells: Map<string, CountCell<Record<string, string>>>): void {
  for (const cell of cells.values()) {
    if (cell.count === 0) continue;
    counter.inc(cell.labels, cell.count);
    cell.count = 0;
  }
}

/** `child`, observing into `also` as well when there is one. */
function tapped(child: LatencyChild, also: LatencyChild | undefined): LatencyChild {
  if (also === undefined) return child;
  return {
    observe(seconds) {
      child.observe(seconds);
      also.observe(seconds);
    },
  };
}
