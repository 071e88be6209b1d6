/** The benchmark CLI: `npm run bench -- <scenario|all> [options]`; bench/cli/options.ts holds the options and usage. */
import { fileURLToPath } from 'node:url';
import { parseOptions, USAGE } from './cli/options.js';
import { listScenarios, loadScenarios } from './cli/scenarios.js';
import { snapshotDist } from './lib/dist.js';
import { BenchError, UsageError } from './lib/errors.js';
import { assertGhz } from './lib/ghz.js';
import { lockRun } from './lib/lock.js';
import { log } from './lib/log.js';
import { assertOha } from './lib/oha.js';
import { killEverything, pinSelf, planCpus, stopEverything } from './lib/processes.js';
import { formatTable, type Row } from './lib/report.js';
import { runScenario } from './lib/run-scenario.js';
import { assertWrk } from './lib/wrk.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

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
  if (selected.length === 0) throw new UsageError(`no scenario ${JSON.stringify(wanted)}; run \`npm run bench\` for the list`);
  if (options.variants !== undefined && selected.length > 1) throw new UsageError('--variants needs a single scenario');
  if (selected.some((s) => s.grpc === undefined && s.run === undefined)) assertWrk();
  if (selected.some((s) => s.grpc !== undefined)) assertGhz();
  if (options.openLoopRates !== undefined) assertOha();
  lockRun(ROOT);
  const dist = snapshotDist(ROOT);

  const plan = planCpus(options.redisCpu);
  pinSelf(plan.load);
  const rows: Row[] = [];
  for (const scenario of selected) {
    if (scenario.run !== undefined) {
      const own = await scenario.run({
        root: ROOT,
        dist,
        plan,
        durationS: options.given.duration,
        warmupS: options.given.warmup,
        phases: options.phases,
        rounds: options.rounds,
      });
      rows.push(...own.rows);
      // With --json, its tables (which hold more than its rows show at a glance) go to stderr: one run gives both.
      if (options.json) log(own.text);
      else process.stdout.write(`${own.text}\n`);
      continue;
    }
    const result = await runScenario(scenario, { options, plan, dist, root: ROOT });
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
