/** Open-loop load at a fixed request rate (what wrk2 or `bombardier -r` do): latency from each request's scheduled start, so a stalled server cannot hide its stall. */
import { Agent, request } from 'node:http';

/** What one fixed-rate run measured. */
export interface RateResult {
  /** The rate asked for, requests/s. */
  readonly targetRps: number;
  /** Responses completed ÷ seconds from the first scheduled start to the last response. */
  readonly achievedRps: number;
  readonly requests: number;
  /** Percentiles of (response end − scheduled start), ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Requests that failed (socket error) or got no answer before the run's end + 2 s. */
  readonly errors: number;
  /**
   * CPU µs per request during the run, of the server's process tree and of
   * redis-server: at one rate for every variant, they compare the work each
   * does without the batching a saturated loop gains. Set by the harness (bench/lib/measure-variant.ts).
   */
  readonly serverCpuUsPerReq?: number | null;
  readonly redisCpuUsPerReq?: number | null;
}

/** Options of {@link runFixedRate}. */
export interface RateOptions {
  readonly url: string;
  readonly rps: number;
  readonly durationS: number;
  /** Keep-alive connections; requests beyond them queue in the agent (and that wait counts). */
  readonly connections: number;
  /** The path of the `i`-th request; default the URL's. */
  readonly path?: (i: number) => string;
}

/** How often the scheduler wakes; requests due since the last wake are started together. */
const TICK_MS = 1;
/** Grace after the last scheduled start for stragglers. */
const DRAIN_MS = 2000;

/**
 * Sends `rps` requests per second for `durationS` seconds, whatever the server
 * does. Each request's latency is counted from when it was due, not from when
 * a connection was free: a closed-loop tool (wrk) stops sending while the
 * server stalls and so under-reports exactly the latency a fixed-rate test
 * is meant to show ("coordinated omission").
 */
export async function runFixedRate({ url, rps, durationS, connections, path }: RateOptions): Promise<RateResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const target = new URL(url);
  const latencies: number[] = [];
  let errors = 0;
  let lastEnd = 0;
  const total = Math.round(rps * durationS);
  const intervalMs = 1000 / rps;
  const start = performance.now();
  let sent = 0;
  let pending = 0;
  let finish: () => void = () => {};
  const drained = new Promise<void>((resolve) => {
    finish = resolve;
  });

  const fire = (due: number, i: number): void => {
    pending++;
    const done = (ok: boolean): void => {
      pending--;
      const end = performance.now();
      if (ok) latencies.push(end - due);
      else errors++;
      lastEnd = Math.max(lastEnd, end);
      if (sent === total && pending === 0) finish();
    };
    const req = request(
      { agent, host: target.hostname, port: target.port, path: path?.(i) ?? target.pathname + target.search, method: 'GET' },
      (res) => {
        res.resume();
        res.on('end', () => done(true));
        res.on('error', () => done(false));
      },
    );
    req.on('error', () => done(false));
    req.end();
  };

  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      // Every request due by now, each stamped with its own due time.
      while (sent < total && start + sent * intervalMs <= now) {
        fire(start + sent * intervalMs, sent);
        sent++;
      }
      if (sent === total) {
        clearInterval(timer);
        resolve();
      }
    }, TICK_MS);
  });
  if (pending > 0) {
    const grace = setTimeout(finish, DRAIN_MS);
    await drained;
    clearTimeout(grace);
  }
  errors += pending;
  agent.destroy();

  latencies.sort((a, b) => a - b);
  const at = (q: number): number =>
    latencies.length === 0 ? NaN : latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  const seconds = (lastEnd - start) / 1000;
  return {
    targetRps: rps,
    achievedRps: seconds > 0 ? latencies.length / seconds : 0,
    requests: latencies.length,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    maxMs: latencies.length === 0 ? NaN : latencies[latencies.length - 1]!,
    errors,
  };
}
