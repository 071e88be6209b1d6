/** The gateway's OpenTelemetry side (telemetry.otel). */
/**
 * Its Prometheus numbers recorded again through @opentelemetry/api's global providers, and the tracer of its
 * store-call spans.
 */
import {
  ATTR,
  METRIC,
  type OtelAttributes,
  type OtelMeter,
  type OtelObservable,
  type OtelObservableResult,
  type OtelTracer,
} from '../../index.js';
import { STORE_BUCKETS, UPSTREAM_BUCKETS, type GatewayMetrics, type LatencyTap } from './metrics.js';
import type { OtelApi } from './optional-deps.js';

/** How an observable instrument reports: a monotonic sum, a gauge, or a sum that goes up and down. */
type MirrorKind = 'counter' | 'gauge' | 'updown';

/** One Prometheus metric and the OpenTelemetry instrument that reports the same numbers. */
export interface MirroredMetric {
  /** The Prometheus name (`/metrics`). */
  readonly prom: string;
  /** The OpenTelemetry name. */
  readonly otel: string;
  /** The instrument kind. */
  readonly kind: MirrorKind;
  /** UCUM unit. */
  readonly unit: string;
  /** Prometheus label → OpenTelemetry attribute. */
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * The gateway metrics read from the Prometheus registry at each OpenTelemetry
 * collection, so both report the very same numbers. The two latency
 * histograms are not here: OpenTelemetry has no observable histogram, so
 * they are recorded as they happen (see {@link GatewayOtel.tap}).
 */
export const MIRRORED: readonly MirroredMetric[] = [
  {
    prom: 'floodgate_decisions_total',
    otel: METRIC.decisions,
    kind: 'counter',
    unit: '{decision}',
    labels: { rule: 'floodgate.rule', outcome: ATTR.outcome },
  },
  {
    prom: 'floodgate_store_sync_answers_total',
    otel: METRIC.storeSyncAnswers,
    kind: 'counter',
    unit: '{operation}',
    labels: { store: ATTR.store },
  },
  {
    prom: 'floodgate_upstream_errors_total',
    otel: 'floodgate.upstream.errors',
    kind: 'counter',
    unit: '{error}',
    labels: { kind: ATTR.errorType },
  },
  {
    prom: 'floodgate_cost_missing_total',
    otel: 'floodgate.cost.missing',
    kind: 'counter',
    unit: '{response}',
    labels: { rule: 'floodgate.rule' },
  },
  {
    prom: 'floodgate_near_limit_total',
    otel: 'floodgate.near_limit',
    kind: 'counter',
    unit: '{request}',
    labels: { rule: 'floodgate.rule', policy: 'floodgate.policy' },
  },
  {
    prom: 'floodgate_config_reloads_total',
    otel: 'floodgate.config.reloads',
    kind: 'counter',
    unit: '{reload}',
    labels: { result: ATTR.result },
  },
  { prom: 'floodgate_config_last_reload_success', otel: 'floodgate.config.last_reload_success', kind: 'gauge', unit: '1', labels: {} },
  { prom: 'floodgate_requests_in_flight', otel: 'floodgate.requests.in_flight', kind: 'updown', unit: '{request}', labels: {} },
  { prom: 'floodgate_request_buffer_bytes', otel: 'floodgate.request.buffer', kind: 'updown', unit: 'By', labels: {} },
  {
    prom: 'floodgate_client_cuts_total',
    otel: 'floodgate.client.cuts',
    kind: 'counter',
    unit: '{response}',
    labels: { reason: 'floodgate.reason' },
  },
  { prom: 'floodgate_store_overflows', otel: 'floodgate.store.overflows', kind: 'counter', unit: '{decision}', labels: {} },
];

/** OpenTelemetry names of the two latency histograms. */
export const LATENCY_HISTOGRAMS = {
  store: { prom: 'floodgate_store_duration_seconds', otel: METRIC.storeDuration, labels: { store: ATTR.store, result: ATTR.result } },
  upstream: { prom: 'floodgate_upstream_duration_seconds', otel: 'floodgate.upstream.duration', labels: { outcome: ATTR.outcome } },
} as const;

/** What a gateway with telemetry.otel records through. */
export interface GatewayOtel {
  /** Records the latency histograms again (give it to {@link GatewayMetrics}' constructor). */
  readonly tap: LatencyTap;
  /** The global tracer, for spans around store calls. */
  readonly tracer: OtelTracer;
  /** Reports `metrics`' counters and gauges through observable instruments until the returned function is called. */
  observe(metrics: GatewayMetrics): () => void;
}

/**
 * The gateway's instruments on the global MeterProvider and TracerProvider.
 * The operator registers an SDK before the gateway starts (`node --import`):
 * the metrics API of @opentelemetry/api 1.x hands out no-op meters until a
 * provider is registered, and keeps them.
 *
 * @param version - floodgate's version, the instrumentation scope's
 */
export function gatewayOtel(api: OtelApi, version?: string): GatewayOtel {
  const meter: OtelMeter = api.metrics.getMeter('floodgate', version);
  const tracer: OtelTracer = api.trace.getTracer('floodgate', version);
  const storeDuration = meter.createHistogram(LATENCY_HISTOGRAMS.store.otel, {
    description: 'Time the store took to answer one operation (in-memory block hits do not reach the store).',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_BUCKETS] },
  });
  const upstreamDuration = meter.createHistogram(LATENCY_HISTOGRAMS.upstream.otel, {
    description: "Time from forwarding a request to the upstream's response headers (or its failure).",
    unit: 's',
    advice: { explicitBucketBoundaries: [...UPSTREAM_BUCKETS] },
  });
  const tap: LatencyTap = (histogram, labels) => {
    const { labels: names } = LATENCY_HISTOGRAMS[histogram];
    const attributes = attributesOf(labels, names);
    const target = histogram === 'store' ? storeDuration : upstreamDuration;
    return { observe: (seconds) => target.record(seconds, attributes) };
  };
  return {
    tap,
    tracer,
    observe(metrics) {
      const registered: Array<() => void> = [];
      for (const mirrored of MIRRORED) {
        const source = metrics.registry.getSingleMetric(mirrored.prom);
        if (source === undefined) continue;
        const options = { description: (source as unknown as { help?: string }).help ?? '', unit: mirrored.unit };
        const instrument: OtelObservable =
          mirrored.kind === 'counter'
            ? meter.createObservableCounter(mirrored.otel, options)
            : mirrored.kind === 'gauge'
              ? meter.createObservableGauge(mirrored.otel, options)
              : meter.createObservableUpDownCounter(mirrored.otel, options);
        // get() runs the metric's collect, as a scrape does: the counts the hot path keeps aside are added first.
        const callback = async (result: OtelObservableResult): Promise<void> => {
          const { values } = await source.get();
          for (const v of values) result.observe(v.value, attributesOf(v.labels as Record<string, string | number>, mirrored.labels));
        };
        instrument.addCallback(callback);
        registered.push(() => instrument.removeCallback(callback));
      }
      return () => {
        for (const remove of registered.splice(0)) remove();
      };
    },
  };
}

/** Prometheus labels renamed to their OpenTelemetry attributes. */
function attributesOf(
  labels: Readonly<Record<string, string | number | undefined>>,
  names: Readonly<Record<string, string>>,
): OtelAttributes {
  const out: OtelAttributes = {};
  for (const [label, attribute] of Object.entries(names)) {
    const value = labels[label];
    if (value !== undefined) out[attribute] = value;
  }
  return out;
}
