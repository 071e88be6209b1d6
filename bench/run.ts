/** The benchmark CLI: `npm run bench -- <scenario|all> [--json] [--duration S] [--warmup S] [--connections N] [--variants a,b] [--rounds N]`. */
import { existsSync, readdirSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { killEverything, pinSelf, planCpus, stopEverything, type CpuPlan, type RedisPlacement } from './lib/processes.js';
import { snapshotDist } from './lib/dist.js';
import { BenchError } from './lib/errors.js';
import { lockRun } from './lib/lock.js';
import { BenchRedis } from './lib/redis.js';
import { formatTable, type Row, type RunInfo } from './lib/report.js';
import { combineRounds, roundOrder } from './lib/rounds.js';
import { indent, startServer, type RunningServer } from './lib/server.js';
import { runFixedRate, type RateResult } from './lib/rate.js';
import { hasOha, runOha, type OpenLoopResult } from './lib/oha.js';
import { treeCpuMs } from './lib/cpu.js';
import { assertWrk, runWrk, wrkVersion, type WrkOptions, type WrkResult } from './lib/wrk.js';
import { assertGhz, ghzVersion, runGhz } from './lib/ghz.js';
import type { Scenario, Variant } from './types.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SCENARIO_DIR = fileURLToPath(new URL('./scenarios/', import.meta.url));

const USAGE = `usage: npm run bench -- <scenario|all> [options]

options:
  --json            print one JSON array of results on stdout, nothing else
  --duration S      measured seconds per variant (default 10)
  --warmup S        unmeasured warm-up seconds per variant (default 2; 0 skips)
  --connections N   wrk connections (default: the scenario's, else 100)
  --variants a,b    run only these variants (the baseline, the first, always runs)
  --rounds N        measure every variant N times, interleaved (the order rotates
                    each round); rows show medians, ratios are the median of
                    each round's ratio to that round's baseline (default 1)
  --redis-cpu W     where redis-server runs: "server" (default, the core of the
                    system under test) or "load" (with wrk)
  --help            this text`;

/** Parsed command line. */
interface Options {
  readonly scenario: string | undefined;
  readonly json: boolean;
  readonly durationS: number;
  readonly warmupS: number;
  readonly connections: number | undefined;
  readonly variants: readonly string[] | undefined;
  readonly redisCpu: RedisPlacement;
  readonly rounds: number;
}

/** Messages for people go to stderr, so that --json leaves stdout to the JSON alone. */
const log = (message: string): void => void process.stderr.write(`${message}\n`);

/** A bad command line: the message and the usage are printed, exit code 2. */
class UsageError extends BenchError {}

function parseOptions(argv: readonly string[]): Options | 'help' {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      variants: { type: 'string' },
      'redis-cpu': { type: 'string' },
      rounds: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return 'help';
  if (positionals.length > 1) throw new UsageError(`one scenario at a time (or "all"); got ${positionals.join(' ')}`);
  return {
    scenario: positionals[0],
    json: values.json ?? false,
    durationS: seconds(values.duration, 'duration', 10, 1),
    warmupS: seconds(values.warmup, 'warmup', 2, 0),
    connections: values.connections === undefined ? undefined : wholeNumber(values.connections, 'connections', 1),
    variants: values.variants
      ?.split(',')
      .map((v) => v.trim())
      .filter((v) => v.length > 0),
    redisCpu: placement(values['redis-cpu']),
    rounds: values.rounds === undefined ? 1 : wholeNumber(values.rounds, 'rounds', 1),
  };
}

function placement(value: string | undefined): RedisPlacement {
  if (value === undefined || value === 'server' || value === 'load') return value ?? 'server';
  throw new UsageError(`--redis-cpu takes "server" or "load"; got ${JSON.stringify(value)}`);
}

function seconds(value: string | undefined, name: string, fallback: number, min: number): number {
  return value === undefined ? fallback : wholeNumber(value, name, min);
}

function wholeNumber(value: string, name: string, min: number): number {
  // wrk takes whole seconds and connections; reject "1.5" rather than silently rounding it.
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} must be a whole number ≥ ${min}; got ${JSON.stringify(value)}`);
  return n;
}

/** Loads and checks every bench/scenarios/*.ts, sorted by name. */
async function loadScenarios(): Promise<Scenario[]> {
  const files = readdirSync(SCENARIO_DIR)
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .sort();
  const scenarios: Scenario[] = [];
  for (const file of files) {
    const module = (await import(pathToFileURL(join(SCENARIO_DIR, file)).href)) as { default?: Scenario };
    scenarios.push(checkScenario(module.default, basename(file, '.ts')));
  }
  return scenarios;
}

function checkScenario(scenario: Scenario | undefined, fileName: string): Scenario {
  const where = `bench/scenarios/${fileName}.ts`;
  if (!scenario || typeof scenario !== 'object') throw new BenchError(`${where} must export default a Scenario (see bench/README.md)`);
  if (scenario.name !== fileName) throw new BenchError(`${where}: name is ${JSON.stringify(scenario.name)}; it must equal the file name`);
  if (!Array.isArray(scenario.variants) || scenario.variants.length === 0)
    throw new BenchError(`${where}: variants must be a non-empty array`);
  const seen = new Set<string>();
  for (const variant of scenario.variants) {
    if (seen.has(variant.name)) throw new BenchError(`${where}: variant ${variant.name} appears twice`);
    seen.add(variant.name);
    if (!existsSync(variant.server)) throw new BenchError(`${where}: variant ${variant.name}: server ${variant.server} does not exist`);
  }
  return scenario;
}

function listScenarios(scenarios: readonly Scenario[]): string {
  const lines = [USAGE, '', 'scenarios:'];
  for (const scenario of scenarios) {
    lines.push(`  ${scenario.name}  ${scenario.description}`);
    const width = Math.max(...scenario.variants.map((v) => v.name.length));
    for (const variant of scenario.variants) lines.push(`      ${variant.name.padEnd(width)}  ${variant.description ?? ''}`);
  }
  lines.push('  all  every scenario above, one after the other');
  return `${lines.join('\n')}\n`;
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

/** What every variant of the run shares. */
interface Context {
  readonly options: Options;
  readonly plan: CpuPlan;
  /** The run's copy of dist/ (see lib/dist.ts). */
  readonly dist: string;
}

interface Measured {
  readonly wrk: WrkResult;
  /** CPU ms the server's process tree used during the measured wrk run; null where /proc cannot tell. */
  readonly serverCpuMs: number | null;
  readonly redisCommands: Record<string, number> | null;
  readonly fixedRate: RateResult | null;
  readonly openLoop: readonly OpenLoopResult[];
}

/** Start, warm up, measure, stop: one variant. Always stops its server. */
async function measureVariant(
  scenario: Scenario,
  variant: Variant,
  { options, plan, dist }: Context,
  redis: BenchRedis | undefined,
): Promise<Measured> {
  // Every variant starts from an empty Redis so none inherits another's keys.
  await redis?.reset();
  log(`[${scenario.name}] ${variant.name}: starting server`);
  const server = await startServer(variant, { cwd: ROOT, cpus: plan.server, dist, redisUrl: variant.redis ? redis?.url : undefined });
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
    if (scenario.openLoop !== undefined && hasOha()) {
      for (const share of scenario.openLoop.shares) {
        await settle(server);
        const rps = share * wrk.rps;
        log(
          `[${scenario.name}] ${variant.name}: ${Math.round(rps)} requests/s (${Math.round(share * 100)} %) open-loop for ${options.durationS} s`,
        );
        openLoop.push(
          await runOha({
            url: load.url,
            share,
            rps,
            durationS: options.durationS,
            warmupS: options.warmupS,
            connections: load.connections,
            ...(scenario.openLoop.headers === undefined ? {} : { headers: scenario.openLoop.headers }),
          }),
        );
        assertAlive(server);
      }
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

async function runScenario(scenario: Scenario, context: Context): Promise<{ rows: Row[]; info: RunInfo }> {
  const { options, plan } = context;
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
  try {
    // perRound[r][i]: variant i's row in round r; each round's ratios are against that round's baseline.
    const perRound: Row[][] = [];
    for (let round = 0; round < options.rounds; round++) {
      if (options.rounds > 1) log(`[${scenario.name}] round ${round + 1} of ${options.rounds}`);
      const measured = new Map<Variant, Measured | Error>();
      for (const variant of roundOrder(variants, round)) {
        try {
          measured.set(variant, await measureVariant(scenario, variant, context, redis));
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
        `Node ${process.version}; Linux ${release()}${redis ? `; Redis ${redis.version}` : ''}`,
        `1-min load average ${loadBefore.toFixed(2)} before the run, ${loadavg()[0]!.toFixed(2)} after (the run itself raises it)`,
      ],
    };
    return { rows, info };
  } finally {
    await redis?.stop();
  }
}

function toRow(
  scenario: string,
  variant: string,
  result: Measured | Error,
  baseRps: number | null,
  durationS: number,
  connections: number,
): Row {
  if (result instanceof Error) {
    return {
      scenario,
      variant,
      rps: null,
      p50Ms: null,
      p99Ms: null,
      redisCmdsPerReq: null,
      ratio: null,
      serverCpuUsPerReq: null,
      requests: null,
      p90Ms: null,
      maxMs: null,
      status: null,
      socketErrors: null,
      redisCommands: null,
      durationS,
      connections,
      error: result.message,
    };
  }
  const { wrk, serverCpuMs, redisCommands, fixedRate, openLoop } = result;
  const redisCalls = redisCommands ? Object.values(redisCommands).reduce((a, b) => a + b, 0) : null;
  return {
    scenario,
    variant,
    rps: round(wrk.rps, 1),
    p50Ms: round(wrk.p50Ms, 3),
    p99Ms: round(wrk.p99Ms, 3),
    redisCmdsPerReq: redisCalls === null ? null : wrk.requests > 0 ? round(redisCalls / wrk.requests, 4) : 0,
    ratio: baseRps ? round(wrk.rps / baseRps, 3) : null,
    serverCpuUsPerReq: serverCpuMs === null || wrk.requests === 0 ? null : round((serverCpuMs * 1000) / wrk.requests, 2),
    requests: wrk.requests,
    p90Ms: round(wrk.p90Ms, 3),
    maxMs: round(wrk.maxMs, 3),
    status: wrk.status,
    socketErrors: wrk.socketErrors,
    redisCommands,
    durationS: round(wrk.durationS, 3),
    connections,
    ...(openLoop.length === 0
      ? {}
      : {
          openLoop: openLoop.map((o) => ({
            ...o,
            achievedRps: round(o.achievedRps, 1),
            p50Ms: round(o.p50Ms, 3),
            p99Ms: round(o.p99Ms, 3),
          })),
        }),
    ...(fixedRate === null
      ? {}
      : {
          fixedRate: {
            targetRps: fixedRate.targetRps,
            achievedRps: round(fixedRate.achievedRps, 1),
            requests: fixedRate.requests,
            p50Ms: round(fixedRate.p50Ms, 3),
            p99Ms: round(fixedRate.p99Ms, 3),
            maxMs: round(fixedRate.maxMs, 3),
            errors: fixedRate.errors,
            serverCpuUsPerReq: roundOrNull(fixedRate.serverCpuUsPerReq, 2),
            redisCpuUsPerReq: roundOrNull(fixedRate.redisCpuUsPerReq, 2),
          },
        }),
  };
}

function roundOrNull(value: number | null | undefined, digits: number): number | null {
  return value == null ? null : round(value, digits);
}

function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const scenarios = await loadScenarios();
  if (options.scenario === undefined) {
    process.stdout.write(
      options.json
        ? `${JSON.stringify(scenarios.map(({ name, description, variants }) => ({ name, description, variants: variants.map((v) => v.name) })))}\n`
        : listScenarios(scenarios),
    );
    return 0;
  }
  const wanted = options.scenario;
  const selected = wanted === 'all' ? scenarios : scenarios.filter((s) => s.name === wanted);
  if (selected.length === 0) throw new UsageError(`no scenario ${JSON.stringify(options.scenario)}; run \`npm run bench\` for the list`);
  if (options.variants !== undefined && selected.length > 1) throw new UsageError('--variants needs a single scenario');
  if (selected.some((s) => s.grpc === undefined)) assertWrk();
  if (selected.some((s) => s.grpc !== undefined)) assertGhz();
  lockRun(ROOT);
  const dist = snapshotDist(ROOT);

  const plan = planCpus(options.redisCpu);
  pinSelf(plan.load);
  const rows: Row[] = [];
  for (const scenario of selected) {
    const result = await runScenario(scenario, { options, plan, dist });
    rows.push(...result.rows);
    if (!options.json) process.stdout.write(`${formatTable(result.info, result.rows)}\n`);
  }
  if (options.json) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
  return rows.some((row) => row.error !== undefined) ? 1 : 0;
}

// Whatever ends the harness — Ctrl-C, kill, a crash — nothing it started may outlive it.
process.on('exit', killEverything);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    // Ignore repeats: test/support/redis-server.ts re-raises the signal after its own cleanup, and the stop below is bounded anyway.
    if (stopping) return;
    stopping = true;
    log(`\n${signal}: stopping every server, wrk and redis-server this run started`);
    void stopEverything().finally(() => process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const)[signal]));
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      log(`${(error as Error).message}\n\n${USAGE}`);
      process.exitCode = 2;
    } else {
      // A BenchError already says what to do; anything else is a harness bug, where the stack helps.
      log(error instanceof BenchError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error));
      process.exitCode = 1;
    }
    killEverything();
  },
);
