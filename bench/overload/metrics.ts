/** Samples the gateway's overload gauges from its /metrics while a phase runs, and reads its decision counters at the end. */
import type { GaugeSample } from './analysis.js';

/** Every sample of `name` in a Prometheus text page, labels and value, e.g. `{ labels: 'priority="critical",outcome="admitted"', value: 3 }`. */
export function metricValues(page: string, name: string): { labels: string; value: number }[] {
  const found: { labels: string; value: number }[] = [];
  for (const line of page.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    const match = /^(?:\{([^}]*)\})?\s+(\S+)/.exec(rest);
    if (match === null) continue;
    found.push({ labels: match[1] ?? '', value: Number(match[2]) });
  }
  return found;
}

/** The sum of `name` over its label sets, or null when the page has none. */
function gauge(page: string, name: string): number | null {
  const values = metricValues(page, name);
  return values.length === 0 ? null : values.reduce((sum, v) => sum + v.value, 0);
}

/** Fetches the page, or undefined when the gateway did not answer (a sample is skipped, not the run). */
export async function scrape(metricsUrl: string): Promise<string | undefined> {
  try {
    const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(1000) });
    return res.ok ? await res.text() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Scrapes `metricsUrl` every `everyMs` from `start()` until `stop()`:
 * floodgate_overload_limit, _in_flight and _queued, each stamped with its
 * time after `origin` (performance.now() of the measured period's start).
 */
export class GaugeSampler {
  readonly samples: GaugeSample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private origin = 0;

  constructor(
    private readonly metricsUrl: string,
    private readonly everyMs: number,
  ) {}

  start(origin: number): void {
    this.origin = origin;
    const tick = (): void => {
      const at = performance.now() - this.origin;
      void scrape(this.metricsUrl).then((page) => {
        if (page === undefined) return;
        this.samples.push({
          at,
          limit: gauge(page, 'floodgate_overload_limit'),
          inFlight: gauge(page, 'floodgate_overload_in_flight'),
          queued: gauge(page, 'floodgate_overload_queued'),
        });
      });
    };
    tick();
    this.timer = setInterval(tick, this.everyMs);
  }

  stop(): GaugeSample[] {
    clearInterval(this.timer);
    return this.samples.sort((a, b) => a.at - b.at);
  }
}

/** floodgate_overload_decisions_total by `priority/outcome`, from one page. */
export function decisions(page: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  if (page === undefined) return out;
  for (const { labels, value } of metricValues(page, 'floodgate_overload_decisions_total')) {
    const priority = /priority="([^"]*)"/.exec(labels)?.[1] ?? '';
    const outcome = /outcome="([^"]*)"/.exec(labels)?.[1] ?? '';
    out[`${priority}/${outcome}`] = value;
  }
  return out;
}
