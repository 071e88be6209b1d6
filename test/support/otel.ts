// The real OpenTelemetry SDK with in-memory readers for tests: a meter and a tracer whose metrics and finished spans a test reads back.
import { MeterProvider, MetricReader, type DataPoint, type Histogram, type MetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Meter, Tracer } from '@opentelemetry/api';

/** A reader that exports nowhere: tests call collect() when they want the numbers. */
class PullReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** One series of a metric: its attributes and value (a number, or a histogram's count, sum and buckets). */
export interface Series {
  readonly attributes: Record<string, unknown>;
  readonly value: number | Histogram;
}

/** An SDK set up for one test file. */
export interface OtelSdk {
  readonly meterProvider: MeterProvider;
  readonly tracerProvider: BasicTracerProvider;
  readonly meter: Meter;
  readonly tracer: Tracer;
  /** Spans ended so far. */
  spans(): ReadableSpan[];
  /** Forgets the spans ended so far. */
  resetSpans(): void;
  /** Collects every metric now (cumulative), by name. */
  metrics(): Promise<Map<string, MetricData>>;
  shutdown(): Promise<void>;
}

/** Starts an SDK with an in-memory span exporter and a pull metric reader. */
export function otelSdk(): OtelSdk {
  const reader = new PullReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return {
    meterProvider,
    tracerProvider,
    meter: meterProvider.getMeter('floodgate-test'),
    tracer: tracerProvider.getTracer('floodgate-test'),
    spans: () => exporter.getFinishedSpans(),
    resetSpans: () => exporter.reset(),
    async metrics() {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new AggregateError(errors, 'metric collection failed');
      const out = new Map<string, MetricData>();
      for (const scope of resourceMetrics.scopeMetrics) for (const metric of scope.metrics) out.set(metric.descriptor.name, metric);
      return out;
    },
    async shutdown() {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}

/** The series of `metric` as plain objects, for assertions. */
export function seriesOf(metric: MetricData | undefined): Series[] {
  if (metric === undefined) return [];
  return (metric.dataPoints as DataPoint<number | Histogram>[]).map((p) => ({ attributes: { ...p.attributes }, value: p.value }));
}

/** The value of the one series of `metric` whose attributes include `match`, or undefined. */
export function valueWhere(metric: MetricData | undefined, match: Record<string, unknown>): number | Histogram | undefined {
  const found = seriesOf(metric).filter((s) => Object.entries(match).every(([k, v]) => s.attributes[k] === v));
  if (found.length > 1) throw new Error(`${found.length} series match ${JSON.stringify(match)}`);
  return found[0]?.value;
}
