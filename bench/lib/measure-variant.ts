/** One variant's measurement: start its server, warm up, measure (wrk or ghz, then the fixed-rate and open-loop runs), stop. */
import { treeCpuMs } from './cpu.js';
import { runGhz } from './ghz.js';
import { log } from './log.js';
import { hasOha, runOha, type OpenLoopResult } from './oha.js';
import { openLoopPoints, pointRps } from './open-loop-point.js';
import type { CpuPlan } from './processes.js';
import { runFixedRate, type RateResult } from './rate.js';
import type { BenchRedis } from './redis.js';
import type { BenchRedisCluster } from './redis-cluster.js';
import type { BenchPostgres } from './postgres.js';
import { indent, startServer, type RunningServer } from './server.js';
import { runWrk, type WrkOptions, type WrkResult } from './wrk.js';
import type { Scenario, Variant } from '../types.js';

/** The command-line settings one measurement follows. */
export interface MeasureSettings {
  /** Measured seconds. */
  readonly durationS: number;
  /** Unmeasured warm-up seconds; 0 skips the warm-up. */
  readonly warmupS: number;
  /** Connections (or gRPC requests in flight); undefined: the scenario's, else 100. */
  readonly connections: number | undefined;
  /** Where each server process writes a V8 CPU profile (`--cpu-prof`); undefined: none. */
  readonly cpuProfDir?: string | undefined;
  /** Requests/s of the open-loop runs (`--open-loop`), in place of the scenario's shares; undefined: the shares. */
  readonly openLoopRates?: readonly number[] | undefined;
}

/** What every variant of the run shares. */
export interface Context {
  readonly options: MeasureSettings;
  readonly plan: CpuPlan;
  /** The run's copy of dist/ (see lib/dist.ts). */
  readonly dist: string;
  /** The repository root: the servers' working directory. */
  readonly root: string;
  /** The scenario run's upstream, for a scenario with `upstream: true` (lib/run-scenario.ts starts it). */
  readonly upstreamUrl?: string | undefined;
}

/** What one variant's measurement found, before it becomes a result row (lib/result-row.ts). */
export interface Measured {
  readonly wrk: WrkResult;
  /** CPU ms the server's process tree used during the measured wrk run; null where /proc cannot tell. */
  readonly serverCpuMs: number | null;
  readonly redisCommands: Record<string, number> | null;
  readonly fixedRate: RateResult | null;
  readonly openLoop: readonly OpenLoopResult[];
}

/** Start, warm up, measure, stop: one variant. Always stops its server. */
export async function measureVariant(
  scenario: Scenario,
  variant: Variant,
  { options, plan, dist, root, upstreamUrl }: Context,
  redis: BenchRedis | undefined,
  cluster?: BenchRedisCluster,
  postgres?: BenchPostgres,
): Promise<Measured> {
  // Every variant starts from an empty Redis (and PostgreSQL) so none inherits another's keys.
  await redis?.reset();
  await cluster?.reset();
  await postgres?.reset();
  log(`[${scenario.name}] ${variant.name}: starting server`);
  const server = await startServer(variant, {
    cwd: root,
    cpus: plan.server,
    dist,
    redisUrl: variant.redis ? redis?.url : undefined,
    clusterNodes: variant.redisCluster ? cluster?.nodes : undefined,
    postgresUrl: variant.postgres ? postgres?.url : undefined,
    upstreamUrl,
    cpuProfDir: options.cpuProfDir,
  });
  try {
    const load = {
      url: `http://127.0.0.1:${server.port}${scenario.path ?? '/'}`,
      connections: options.connections ?? scenario.connections ?? 100,
      ...(scenario.wrkLua === undefined ? {} : { lua: scenario.wrkLua }),
    };
    // A gRPC scenario swaps wrk for ghz; everything around the load (warm-up, settle, CPU, Redis counts) stays the same.
    const grpc = scenario.grpc;
    const runLoad = (o: WrkOptions): Promise<WrkResult> =>
      grpc === undefined
        ? runWrk(o)
        : runGhz({ load: grpc, target: `127.0.0.1:${server.port}`, durationS: o.durationS, concurrency: o.connections });
    if (options.warmupS > 0) {
      // Unmeasured: lets V8 optimise the hot path and the limiter reach its steady state (keys blocked, scripts cached).
      log(`[${scenario.name}] ${variant.name}: warm-up ${options.warmupS} s`);
      await runLoad({ ...load, durationS: options.warmupS });
      assertAlive(server);
      await settle(server);
    }
    await redis?.resetStats();
    log(`[${scenario.name}] ${variant.name}: measuring ${options.durationS} s`);
    const cpuBefore = server.pid === undefined ? null : treeCpuMs(server.pid);
    const wrk = await runLoad({ ...load, durationS: options.durationS });
    const cpuAfter = server.pid === undefined ? null : treeCpuMs(server.pid);
    const serverCpuMs = cpuBefore === null || cpuAfter === null ? null : cpuAfter - cpuBefore;
    const redisCommands = redis ? await redis.commandCounts() : null;
    assertAlive(server);
    let fixedRate: RateResult | null = null;
    if (scenario.fixedRate !== undefined) {
      await settle(server);
      log(`[${scenario.name}] ${variant.name}: ${scenario.fixedRate} requests/s open-loop for ${options.durationS} s`);
      const rateCpu = server.pid === undefined ? null : treeCpuMs(server.pid);
      const rateRedisCpu = await redis?.cpuMs();
      const run = await runFixedRate({
        url: load.url,
        rps: scenario.fixedRate,
        durationS: options.durationS,
        connections: load.connections,
        ...(scenario.fixedRatePath === undefined ? {} : { path: scenario.fixedRatePath }),
      });
      const rateCpuAfter = server.pid === undefined ? null : treeCpuMs(server.pid);
      const rateRedisCpuAfter = await redis?.cpuMs();
      const perRequest = (before: number | null | undefined, after: number | null | undefined): number | null =>
        before == null || after == null || run.requests === 0 ? null : ((after - before) * 1000) / run.requests;
      fixedRate = {
        ...run,
        serverCpuUsPerReq: perRequest(rateCpu, rateCpuAfter),
        redisCpuUsPerReq: perRequest(rateRedisCpu, rateRedisCpuAfter),
      };
      assertAlive(server);
    }
    const openLoop: OpenLoopResult[] = [];
    const points = hasOha() ? openLoopPoints(scenario, options.openLoopRates) : [];
    for (const point of points) {
      await settle(server);
      const rps = pointRps(point, wrk.rps);
      const share = 'share' in point ? ` (${Math.round(point.share * 100)} %)` : '';
      log(`[${scenario.name}] ${variant.name}: ${Math.round(rps)} requests/s${share} open-loop for ${options.durationS} s`);
      openLoop.push(
        await runOha({
          url: load.url,
          point,
          rps,
          durationS: options.durationS,
          warmupS: options.warmupS,
          connections: load.connections,
          ...(scenario.openLoop?.headers === undefined ? {} : { headers: scenario.openLoop.headers }),
        }),
      );
      assertAlive(server);
    }
    return { wrk, serverCpuMs, redisCommands, fixedRate, openLoop };
  } finally {
    await server.stop();
  }
}

/** Longest wait for a server to go idle after its warm-up. */
const SETTLE_MAX_MS = 5000;

/**
 * Waits until the server's process tree uses under 10 % of a core over
 * 200 ms (at most {@link SETTLE_MAX_MS}). wrk's warm-up leaves with its
 * connections' requests still queued in a saturated server; starting the
 * measured run at once would measure 256 connections torn down while 256
 * new ones arrive, which a saturated Node.js loop takes in at one per
 * iteration (libuv ≥ 1.45 accepts once per poll): a connection storm, not
 * the steady state. docs/benchmarks.md ("Where the gateway's tail came
 * from") gives the figures of both.
 */
async function settle(server: RunningServer): Promise<void> {
  if (server.pid === undefined) return;
  const deadline = Date.now() + SETTLE_MAX_MS;
  let before = treeCpuMs(server.pid);
  while (before !== null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = treeCpuMs(server.pid);
    if (now === null || now - before < 20) return;
    before = now;
  }
}

/** A server that died under load makes wrk's numbers meaningless (all connect errors); fail the variant instead. */
function assertAlive(server: RunningServer): void {
  const status = server.exitStatus();
  if (status !== null) throw new Error(`server died during the run (${status})\n${indent(server.output())}`);
}
