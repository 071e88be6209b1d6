// Preloaded with --import, as an operator's OpenTelemetry setup file is: registers a MeterProvider whose exporter writes each cumulative snapshot to FLOODGATE_OTEL_OUT.<pid>.json for a test to read.
import { renameSync, writeFileSync } from 'node:fs';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';

const file = `${process.env.FLOODGATE_OTEL_OUT}.${process.pid}.json`;

const exporter = {
  export(resourceMetrics, done) {
    const series = [];
    for (const scope of resourceMetrics.scopeMetrics)
      for (const metric of scope.metrics)
        for (const point of metric.dataPoints)
          series.push({ name: metric.descriptor.name, attributes: point.attributes, value: point.value });
    // Written whole, then renamed: a reader never sees half a snapshot.
    writeFileSync(`${file}.tmp`, JSON.stringify(series));
    renameSync(`${file}.tmp`, file);
    done({ code: 0 });
  },
  selectAggregationTemporality: () => AggregationTemporality.CUMULATIVE,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

metrics.setGlobalMeterProvider(
  new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 100, exportTimeoutMillis: 90 })] }),
);
