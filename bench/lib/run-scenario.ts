/** One scenario's run: its Redis, the rounds of variants in rotated order, and the rows and header lines of its table. */
import { cpus, loadavg, release } from 'node:os';
import { fileURLToPath } from 'node:url';
import { UsageError } from './errors.js';
import { ghzVersion } from './ghz.js';
import { log } from './log.js';
import { measureVariant, type Context, type MeasureSettings, type Measured } from './measure-variant.js';
import { hasOha } from './oha.js';
import { BenchRedis } from './redis.js';
import { BenchRedisCluster } from './redis-cluster.js';
import { BenchPostgres } from './postgres.js';
import type { Row, RunInfo } from './report.js';
import { toRow } from './result-row.js';
import { combineRounds, roundOrder } from './rounds.js';
import { startServer, type RunningServer } from './server.js';
import { wrkVersion } from './wrk.js';
import type { Scenario, Variant } from '../types.js';

const UPSTREAM_SERVER = fileURLToPath(new URL('../servers/gateway-upstream.ts', import.meta.url));

/** The command-line settings a scenario's run follows. */
export interface RunSettings extends MeasureSettings {
  /** The variants to run (the baseline always runs too); undefined: all. */
  readonly variants: readonly string[] | undefined;
  /** How many times each variant is measured, interleaved. */
  readonly rounds: number;
}

/** What every scenario of the run shares. */
export interface RunContext extends Context {
  readonly options: RunSettings;
}

/** The variants to run: all, or the named ones plus the baseline so ratios stay meaningful. */
function selectVariants(scenario: Scenario, names: readonly string[] | undefined): Variant[] {
  if (names === undefined) return [...scenario.variants];
  const unknown = names.filter((name) => !scenario.variants.some((v) => v.name === name));
  if (unknown.length > 0) {
    throw new UsageError(
      `${scenario.name} has no variant ${unknown.join(', ')}; it has ${scenario.variants.map((v) => v.name).join(', ')}`,
    );
  }
  return scenario.variants.filter((v, i) => i === 0 || names.includes(v.name));
}

/**
 * Runs `scenario`'s selected variants for the given rounds (a variant that
 * fails gets a row with its error; the others are still measured) and
 * returns one row per variant, the medians over the rounds, with the lines
 * shown above its table. Starts and stops the scenario's redis-server when a
 * variant needs one, and its upstream when the scenario has `upstream: true`.
 * Throws {@link UsageError} for an unknown `--variants` name.
 */
export async function runScenario(scenario: Scenario, runContext: RunContext): Promise<{ rows: Row[]; info: RunInfo }> {
  const { options, plan } = runContext;
  const variants = selectVariants(scenario, options.variants);
  const connections = options.connections ?? scenario.connections ?? 100;
  // Other work on this small machine skews every number; say so where the numbers are.
  const loadBefore = loadavg()[0]!;
  if (scenario.openLoop !== undefined && !hasOha()) {
    log(`[${scenario.name}] oha not found (cargo install oha): the open-loop columns are left out`);
  }
  if (loadBefore > 0.5) log(`[${scenario.name}] warning: load average is ${loadBefore.toFixed(2)} before the run; numbers will be noisy`);
  let redis: BenchRedis | undefined;
  if (variants.some((v) => v.redis)) {
    log(`[${scenario.name}] starting redis-server`);
    redis = await BenchRedis.start(plan.redis);
  }
  let cluster: BenchRedisCluster | undefined;
  let postgres: BenchPostgres | undefined;
  let upstream: RunningServer | undefined;
  let context = runContext;
  try {
    if (variants.some((v) => v.redisCluster)) {
      log(`[${scenario.name}] starting a 3-master Redis Cluster`);
      cluster = await BenchRedisCluster.start(plan.redis);
    }
    if (variants.some((v) => v.postgres)) {
      log(`[${scenario.name}] starting PostgreSQL`);
      postgres = await BenchPostgres.start(plan.redis);
    }
    if (scenario.upstream === true) {
      // One upstream for every variant, on the load generator's core: outside the server's CPU count and off its core.
      log(`[${scenario.name}] starting the upstream`);
      upstream = await startServer(
        { name: 'upstream', server: UPSTREAM_SERVER },
        { cwd: runContext.root, cpus: plan.load, dist: runContext.dist, redisUrl: undefined },
      );
      context = { ...runContext, upstreamUrl: `http://127.0.0.1:${upstream.port}` };
    }
    // perRound[r][i]: variant i's row in round r; each round's ratios are against that round's baseline.
    const perRound: Row[][] = [];
    for (let round = 0; round < options.rounds; round++) {
      if (options.rounds > 1) log(`[${scenario.name}] round ${round + 1} of ${options.rounds}`);
      const measured = new Map<Variant, Measured | Error>();
      for (const variant of roundOrder(variants, round)) {
        try {
          measured.set(variant, await measureVariant(scenario, variant, context, redis, cluster, postgres));
        } catch (error) {
          // One broken variant should not cost the others' numbers; it is reported in its row.
          const failure = error instanceof Error ? error : new Error(String(error));
          log(`[${scenario.name}] ${variant.name}: FAILED: ${failure.message.split('\n')[0]}`);
          measured.set(variant, failure);
        }
      }
      const baseline = measured.get(variants[0]!);
      const baseRps = baseline instanceof Error || baseline === undefined ? null : baseline.wrk.rps;
      perRound.push(
        variants.map((variant): Row => toRow(scenario.name, variant.name, measured.get(variant)!, baseRps, options.durationS, connections)),
      );
    }
    const rows = variants.map((_, i) => combineRounds(perRound.map((round) => round[i]!)));
    const info: RunInfo = {
      scenario: scenario.name,
      description: scenario.description,
      lines: [
        scenario.grpc === undefined
          ? `${options.durationS} s measured after ${options.warmupS} s warm-up per variant; ${connections} connections; ${wrkVersion()}, 1 thread`
          : `${options.durationS} s measured after ${options.warmupS} s warm-up per variant; ${connections} requests in flight over ${scenario.grpc.channels ?? 1} HTTP/2 connections; ${ghzVersion()}`,
        ...(options.rounds > 1
          ? [`${options.rounds} rounds, variants in rotated order each round; each row holds the medians over the rounds`]
          : []),
        `${cpus()[0]?.model.trim() ?? 'unknown CPU'}; ${plan.note}`,
        ...(upstream === undefined ? [] : [upstreamLine(plan)]),
        `Node ${process.version}; Linux ${release()}${redis ? `; Redis ${redis.version}` : ''}${postgres ? `; PostgreSQL ${postgres.version} (fsync off)` : ''}`,
        `1-min load average ${loadBefore.toFixed(2)} before the run, ${loadavg()[0]!.toFixed(2)} after (the run itself raises it)`,
      ],
    };
    return { rows, info };
  } finally {
    await upstream?.stop();
    await redis?.stop();
    await cluster?.stop();
    await postgres?.stop();
  }
}

/** Where the run's upstream ran, for the table's header. */
function upstreamLine(plan: RunContext['plan']): string {
  const where = plan.load === undefined ? 'not pinned' : `on CPU ${plan.load} with the harness and wrk`;
  return `upstream (bench/servers/gateway-upstream.ts, 200 {}): one process for all variants, ${where}; its CPU is not in server µs/req`;
}
