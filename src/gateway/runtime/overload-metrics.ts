/** The `floodgate_overload_*` metrics: the overload gate's limit, latencies, queue and decisions, read when scraped. */
import type { OverloadStats } from '../../index.js';
import type { GatewayMetrics } from './metrics.js';
import type { PromClient } from './optional-deps.js';

/** What the metrics read at each scrape: the gate's limiter in force (a reload may replace it), or undefined when there is none. */
export type OverloadSource = () => { stats(): OverloadStats } | undefined;

/**
 * Registers the overload gauges and counter on the gateway's registry. Nothing is counted on the request path: the limiter
 * keeps its own numbers and a scrape reads them, adding to the counter what each limiter counted since the last scrape
 * (a limiter a reload replaced starts from zero, so nothing is counted twice or lost).
 */
export function registerOverloadMetrics(prom: PromClient, metrics: GatewayMetrics, source: OverloadSource): void {
  const registers = [metrics.registry];
  let stats: OverloadStats | undefined;
  let scrapedOf: object | undefined;
  const added = new Map<string, number>();
  // Every gauge's collect reads the same snapshot; the first one of a scrape takes it.
  const read = (): OverloadStats | undefined => {
    const limiter = source();
    if (limiter === undefined) return (stats = undefined);
    if (limiter !== scrapedOf) {
      scrapedOf = limiter;
      added.clear();
    }
    return (stats = limiter.stats());
  };
  const gauge = (name: string, help: string, value: (s: OverloadStats) => number | undefined, first = false): void => {
    new prom.Gauge({
      name,
      help,
      registers,
      collect() {
        const s = first ? read() : stats;
        const v = s === undefined ? undefined : value(s);
        if (v === undefined) this.reset();
        else this.set(v);
      },
    });
  };
  gauge(
    'floodgate_overload_limit',
    'Requests the overload gate lets be in flight to the upstream now (per process; summed under --workers).',
    (s) => s.limit,
    true,
  );
  gauge('floodgate_overload_in_flight', 'Requests admitted by the overload gate and not yet done.', (s) => s.inFlight);
  gauge(
    'floodgate_overload_probing',
    '1 while the adaptive limit measures the no-load latency (the limit is at probeLimit), else 0.',
    (s) => (s.phase === 'probe' ? 1 : 0),
  );
  gauge('floodgate_overload_no_load_latency_seconds', "The upstream's latency at no load, as the last probe measured it.", (s) =>
    seconds(s.noLoadLatencyMs),
  );
  gauge('floodgate_overload_target_latency_seconds', 'The latency the adaptive limit aims at (no-load latency × tolerance).', (s) =>
    seconds(s.targetLatencyMs),
  );
  gauge('floodgate_overload_sample_latency_seconds', 'The mean latency of the last window that moved the adaptive limit.', (s) =>
    seconds(s.sampleLatencyMs),
  );
  new prom.Gauge({
    name: 'floodgate_overload_queued',
    help: 'Requests waiting at the overload gate, by priority class.',
    labelNames: ['priority'],
    registers,
    collect() {
      this.reset();
      if (stats !== undefined) for (const [priority, n] of Object.entries(stats.queued)) this.set({ priority }, n);
    },
  });
  new prom.Counter({
    name: 'floodgate_overload_decisions_total',
    help: 'Overload gate decisions by priority class and outcome: admitted (at once), waited (admitted after a wait), or refused for limit, full, timeout or shed.',
    labelNames: ['priority', 'outcome'],
    registers,
    collect() {
      if (stats === undefined) return;
      for (const [priority, outcomes] of Object.entries(stats.decisions)) {
        for (const [outcome, total] of Object.entries(outcomes)) {
          const id = `${priority}\0${outcome}`;
          const delta = total - (added.get(id) ?? 0);
          if (delta > 0) this.inc({ priority, outcome }, delta);
          else this.inc({ priority, outcome }, 0);
          added.set(id, total);
        }
      }
    },
  });
}

const seconds = (ms: number | undefined): number | undefined => (ms === undefined ? undefined : ms / 1000);
