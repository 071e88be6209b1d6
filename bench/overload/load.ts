/** The overload scenario's open-loop load: Poisson arrivals at a fixed rate, each with a tenant, a class and a client deadline. */
import { Agent, request } from 'node:http';
import { mulberry32 } from '../../test/accuracy/traffic.js';

/** Who sends what share of the load: tenants by weight, classes by share (each request draws both, independently). */
export interface Mix {
  /** Tenant names and their relative rates, e.g. `{ noisy: 10, q1: 1, q2: 1, q3: 1 }`. */
  readonly tenants: Readonly<Record<string, number>>;
  /** Class (`x-priority`) names and their relative rates; `default` sends no header. */
  readonly classes: Readonly<Record<string, number>>;
}

/** One request, as its client saw it. */
export interface Outcome {
  /** When it was due, ms after the measured period began (negative in the warm-up). */
  readonly at: number;
  /** The response status, 0 when none came before the deadline (the client gave up) or the socket failed. */
  readonly status: number;
  /** From when it was due to the end of its response (or to the deadline / the error), ms. */
  readonly latencyMs: number;
  readonly tenant: string;
  readonly cls: string;
  /** `Floodgate-Overload` of a refusal (limit, full, timeout, shed), else undefined. */
  readonly reason: string | undefined;
  /** True when the socket failed (not a deadline). */
  readonly error: boolean;
}

/** Options of {@link runOpenLoop}. */
export interface LoadOptions {
  readonly url: string;
  /** Requests per second, warm-up and measured period alike. */
  readonly rate: number;
  readonly warmupS: number;
  readonly durationS: number;
  /** A response later than this is not goodput; the client closes its connection then, as a client with a timeout does. */
  readonly deadlineMs: number;
  readonly mix: Mix;
  readonly seed: number;
  /** Called once when the measured period begins (its time origin), e.g. to start sampling metrics. */
  readonly onMeasureStart?: () => void;
}

/** How often the scheduler wakes; the requests due since its last wake start together, each timed from when it was due. */
const TICK_MS = 1;

/** Draws a name by weight. */
function picker(weights: Readonly<Record<string, number>>, random: () => number): () => string {
  const names = Object.keys(weights);
  const total = names.reduce((sum, name) => sum + weights[name]!, 0);
  return () => {
    let r = random() * total;
    for (const name of names) {
      r -= weights[name]!;
      if (r < 0) return name;
    }
    return names[names.length - 1]!;
  };
}

/**
 * Sends Poisson arrivals at `rate` for `warmupS` + `durationS` seconds
 * whatever the server does (open loop: a slow server gets more requests in
 * flight, not fewer), over keep-alive connections with no cap on their
 * number, so no request waits for a socket of the client's own. Each carries
 * `x-tenant` and (unless its class is `default`) `x-priority`. A request
 * with no response by its deadline is destroyed, closing its connection.
 * Resolves with every request's outcome, the warm-up's too (a request of
 * the warm-up may end in the measured period), once the last has ended.
 */
export async function runOpenLoop(options: LoadOptions): Promise<Outcome[]> {
  const { rate, deadlineMs, mix } = options;
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 });
  const target = new URL(options.url);
  const random = mulberry32(options.seed);
  const tenant = picker(mix.tenants, random);
  const cls = picker(mix.classes, random);
  const outcomes: Outcome[] = [];
  const totalMs = (options.warmupS + options.durationS) * 1000;
  const measureFrom = options.warmupS * 1000;
  let pending = 0;
  let scheduled = false;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));

  const send = (dueAt: number, start: number): void => {
    const who = tenant();
    const what = cls();
    pending += 1;
    let ended = false;
    const end = (status: number, reason: string | undefined, error: boolean): void => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      const latencyMs = performance.now() - start - dueAt;
      outcomes.push({ at: dueAt - measureFrom, status, latencyMs, tenant: who, cls: what, reason, error });
      pending -= 1;
      if (pending === 0 && scheduled) done();
    };
    const headers: Record<string, string> = { 'x-tenant': who };
    if (what !== 'default') headers['x-priority'] = what;
    const req = request({ agent, host: target.hostname, port: target.port, path: '/', headers }, (res) => {
      const reason = res.headers['floodgate-overload'];
      res.resume();
      res.on('end', () => end(res.statusCode ?? 0, typeof reason === 'string' ? reason : undefined, false));
      res.on('error', () => end(0, undefined, true));
    });
    req.on('error', () => end(0, undefined, !ended && performance.now() - start - dueAt < deadlineMs));
    req.end();
    // The deadline counts from when the request was due, like its latency.
    const timer = setTimeout(
      () => {
        end(0, undefined, false);
        req.destroy();
      },
      Math.max(0, deadlineMs - (performance.now() - start - dueAt)),
    );
  };

  const start = performance.now();
  let next = -Math.log(1 - random()) * (1000 / rate);
  let measureStarted = false;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now() - start;
      if (!measureStarted && now >= measureFrom) {
        measureStarted = true;
        options.onMeasureStart?.();
      }
      while (next <= now && next < totalMs) {
        send(next, start);
        next += -Math.log(1 - random()) * (1000 / rate);
      }
      if (next >= totalMs) resolve();
      else setTimeout(tick, TICK_MS);
    };
    tick();
  });
  scheduled = true;
  if (pending > 0) await finished;
  agent.destroy();
  return outcomes.sort((a, b) => a.at - b.at);
}
