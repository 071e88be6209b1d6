/** One overload run: its simulated upstream and gateway, the open-loop load, the gauges sampled meanwhile, and the counters after. */
import { fileURLToPath } from 'node:url';
import { treeCpuMs } from '../lib/cpu.js';
import { log } from '../lib/log.js';
import { freePort, startServer, type RunningServer } from '../lib/server.js';
import type { OwnRunContext } from '../types.js';
import type { GaugeSample } from './analysis.js';
import { runOpenLoop, type Outcome } from './load.js';
import { decisions, GaugeSampler, scrape } from './metrics.js';
import { CAPACITY, DEADLINE_MS, UPSTREAM, type PhaseRun } from './phases.js';

const UPSTREAM_SERVER = fileURLToPath(new URL('./upstream.ts', import.meta.url));
const GATEWAY_SERVER = fileURLToPath(new URL('./gateway.ts', import.meta.url));

/** How often the overload gauges are scraped. */
const SAMPLE_EVERY_MS = 100;

/** What one run measured. */
export interface PhaseMeasured {
  readonly run: PhaseRun;
  readonly durationS: number;
  readonly warmupS: number;
  readonly outcomes: readonly Outcome[];
  readonly samples: readonly GaugeSample[];
  /** floodgate_overload_decisions_total at the end (warm-up included), by `priority/outcome`. */
  readonly decisions: Readonly<Record<string, number>>;
  /** The upstream's counters at the end: answers sent, work done for clients that had gone, longest queue. */
  readonly upstream: { readonly served: number; readonly abandoned: number; readonly maxQueued: number } | undefined;
  /** CPU ms of the gateway process over the measured period and its drain. */
  readonly gatewayCpuMs: number | null;
}

/**
 * Starts a fresh upstream (on the load generator's CPU) and gateway (on the
 * server's), both per run so no run inherits another's backlog; loads the
 * gateway for `warmupS` + `durationS`; samples the overload gauges every
 * 100 ms of the measured period; applies the run's upstream events at their
 * times; stops both.
 */
export async function measurePhase(run: PhaseRun, context: OwnRunContext, warmupS: number, durationS: number): Promise<PhaseMeasured> {
  const servers: RunningServer[] = [];
  try {
    const upstream = await startServer(
      {
        name: 'overload-upstream',
        server: UPSTREAM_SERVER,
        env: {
          OVERLOAD_WORKERS: String(UPSTREAM.workers),
          OVERLOAD_BASE_MS: String(UPSTREAM.baseMs),
          OVERLOAD_JITTER: String(UPSTREAM.jitter),
        },
      },
      { cwd: context.root, cpus: context.plan.load, dist: context.dist, redisUrl: undefined },
    );
    servers.push(upstream);
    const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
    const adminPort = await freePort();
    const gateway = await startServer(
      { name: run.variant, server: GATEWAY_SERVER, env: { OVERLOAD_SECTION: run.overload ?? '', OVERLOAD_ADMIN_PORT: String(adminPort) } },
      { cwd: context.root, cpus: context.plan.server, dist: context.dist, redisUrl: undefined, upstreamUrl },
    );
    servers.push(gateway);
    const metricsUrl = `http://127.0.0.1:${adminPort}/metrics`;
    const sampler = new GaugeSampler(metricsUrl, SAMPLE_EVERY_MS);
    const timers: NodeJS.Timeout[] = [];
    let cpuBefore: number | null = null;
    log(`[overload] ${run.variant}: ${Math.round(run.load * CAPACITY)}/s for ${warmupS} s warm-up + ${durationS} s`);
    const outcomes = await runOpenLoop({
      url: `http://127.0.0.1:${gateway.port}/`,
      rate: run.load * CAPACITY,
      warmupS,
      durationS,
      deadlineMs: DEADLINE_MS,
      mix: run.mix,
      seed: 35,
      onMeasureStart: () => {
        cpuBefore = gateway.pid === undefined ? null : treeCpuMs(gateway.pid);
        if (run.overload !== undefined) sampler.start(performance.now());
        for (const event of run.events ?? []) {
          timers.push(
            setTimeout(
              () => {
                void fetch(`${upstreamUrl}/control?workers=${event.workers}`, { method: 'POST' }).catch((error: unknown) =>
                  log(`[overload] ${run.variant}: the upstream did not take workers=${event.workers}: ${String(error)}`),
                );
              },
              event.atShare * durationS * 1000,
            ),
          );
        }
      },
    });
    for (const timer of timers) clearTimeout(timer);
    const cpuAfter = gateway.pid === undefined ? null : treeCpuMs(gateway.pid);
    const samples = run.overload === undefined ? [] : sampler.stop();
    const counters = await fetch(`${upstreamUrl}/control`)
      .then((r) => r.json() as Promise<PhaseMeasured['upstream']>)
      .catch(() => undefined);
    return {
      run,
      durationS,
      warmupS,
      outcomes,
      samples,
      decisions: decisions(await scrape(metricsUrl)),
      upstream: counters,
      gatewayCpuMs: cpuBefore === null || cpuAfter === null ? null : cpuAfter - cpuBefore,
    };
  } finally {
    for (const server of servers.reverse()) await server.stop();
  }
}
