/** The `floodgate` command: parse the command line, load the config, and run (or check) the gateway. */
/**
 * Exit codes: 0 ok, 1 runtime failure, 2 bad arguments or config.
 */
import * as clusterModule from 'node:cluster';
import type { Cluster } from 'node:cluster';
import { readFile } from 'node:fs/promises';
import { ErrorCode, isFloodgateError } from '../../index.js';
import { parseCommandLine } from './args.js';
import { parseConfigText, type SettingsOverrides } from '../config/config-file.js';
import { ConfigError } from '../config/config-error.js';
import { answerReadiness } from '../workers/cluster-ready.js';
import { loadGatewayDeps } from '../runtime/optional-deps.js';
import { HELP } from './help.js';
import { createLogger, type GatewayLogger } from '../runtime/log.js';
import { ConfigReloader } from '../config/reload.js';
import { Gateway } from '../serve/gateway.js';
import { RlsServer } from '../rls/rls-server.js';
import type { GatewaySettings } from '../config/settings.js';
import { runPrimary } from '../workers/workers.js';
import { answerAdminCalls, takeSiblingsAdminState } from '../workers/worker-admin.js';
import { floodgateVersion } from '../runtime/own-package.js';
import { GATEWAY_PACKAGES, packagesFor, packageState, requirePackages } from '../runtime/package-check.js';
import { ruleWarnings, warnAboutRules } from '../rules/rule-warnings.js';
import { WarningCode } from '../../core/warnings.js';
import { drainWhenLauncherExits } from './launcher-watch.js';

// The CommonJS build has no esModuleInterop; the namespace works in both builds.
const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);

/** Error codes that mean "the user asked for something invalid" (exit 2) rather than "something failed" (exit 1). */
const USAGE_CODES: ReadonlySet<string> = new Set([
  ErrorCode.INVALID_ARGUMENT,
  ErrorCode.INVALID_CONFIG,
  ErrorCode.CONFIG_SYNTAX,
  ErrorCode.CONFIG_UNREADABLE,
]);

/**
 * Runs the CLI with `argv` (without node and the script). `serve` keeps
 * running until SIGTERM/SIGINT; the others resolve with the exit code.
 */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    const command = parseCommandLine(argv);
    switch (command.kind) {
      case 'help':
        process.stdout.write(HELP);
        return 0;
      case 'version':
        process.stdout.write(`${floodgateVersion() ?? "unknown (floodgate's package.json was not found)"}\n`);
        return 0;
      case 'check':
        return await check(command.configFile, command.overrides);
      case 'serve': {
        const { settings, text } =
          command.settings !== undefined
            ? { settings: command.settings, text: undefined }
            : await readSettings(command.configFile!, command.overrides);
        if (command.settings !== undefined) requirePackages(packagesOf(settings, false));
        // Workers are the primary's children: only the process npm started watches npm.
        if (cluster.isPrimary) drainWhenLauncherExits();
        await serve(settings, command.overrides, text);
        return 0;
      }
    }
  } catch (error) {
    process.stderr.write(`floodgate: ${describeError(error)}\n`);
    if (isFloodgateError(error) && error.code === ErrorCode.INVALID_ARGUMENT)
      process.stderr.write('Run "floodgate --help" for the options.\n');
    return isFloodgateError(error) && USAGE_CODES.has(error.code) ? 2 : 1;
  }
}

/** The error line: the message with its code after the first line, so a command on a later line can be copied whole. */
function describeError(error: unknown): string {
  if (!isFloodgateError(error)) return error instanceof Error ? error.message : String(error);
  const [first, ...rest] = error.message.split('\n');
  return [`${first} [${error.code}]`, ...rest].join('\n');
}

/** `floodgate check`: the file is valid, serve has its packages, every rule can match, and the rate limit service's YAML and TLS files load; exit 0, else 1 or 2. */
async function check(file: string, overrides: SettingsOverrides): Promise<number> {
  const { settings } = await readSettings(file, overrides);
  // serve refuses a bad rate limit config (exit 2): check reads it as serve does, so it says "valid" only for what serve runs
  // (strictly: a config serve would start without under grpc.badConfigAtStart: serve is still an error here).
  const rls = settings.grpc === undefined ? undefined : await RlsServer.prepare(settings.grpc, true);
  let unreachable = 0;
  for (const warning of ruleWarnings(settings)) {
    const isError = warning.code === WarningCode.UNREACHABLE_RULE;
    if (isError) unreachable += 1;
    process.stderr.write(`floodgate: ${isError ? '' : 'warning: '}${warning.message} [${warning.code}]\n`);
  }
  if (unreachable > 0) return 2;
  const domains =
    rls === undefined
      ? ''
      : `; rate limit service: ${[...(rls.config?.domains.keys() ?? [])].join(', ') || '(no domains)'} from ${rls.settings.config}`;
  process.stdout.write(
    `${file}: valid; ${settings.rules.length} rule(s): ${settings.rules.map((r) => r.name).join(', ') || '(none)'}${domains}\n`,
  );
  return 0;
}

/** A store section that names Redis, for when the file cannot be parsed yet (no yaml package): a hint, not a reading. */
const REDIS_STORE = /^[^#\n]*\b(?:type\s*:\s*["']?redis\b|url\s*:\s*["']?rediss?:|cluster\s*:|sentinel\s*:)/m;

/**
 * Reads the config file and checks every package serve needs with it at
 * once: a missing yaml package is reported with the others, not alone and
 * first, so one install fixes every one.
 */
/** The gateway packages `settings` need; `fromFile` when they were read from a config file (which needs yaml). */
function packagesOf(settings: GatewaySettings, fromFile: boolean): ReturnType<typeof packagesFor> {
  return packagesFor({
    config: fromFile,
    redis: settings.store.kind === 'redis',
    postgres: settings.store.kind === 'postgres',
    otel: settings.telemetry?.otel,
    grpc: settings.grpc !== undefined,
    grpcJs: settings.grpc?.server === 'grpc-js',
  });
}

async function readSettings(file: string, overrides: SettingsOverrides): Promise<{ settings: GatewaySettings; text: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(ErrorCode.CONFIG_UNREADABLE, { file }, `cannot read the config file: ${(error as Error).message}`, error);
  }
  const redisFlag = overrides.storeOverrides?.kind === 'redis';
  if (packageState(GATEWAY_PACKAGES.yaml).status !== 'ok')
    requirePackages(packagesFor({ config: true, redis: redisFlag || REDIS_STORE.test(text) }));
  const settings = await parseConfigText(text, file, overrides, { requireRules: true });
  requirePackages(packagesOf(settings, true));
  if (settings.upstream === undefined && settings.decisionPath === false) {
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      { file, field: 'upstream' },
      'is required unless the decision endpoint is on (decisionPath); otherwise the gateway would have nothing to do.',
    );
  }
  return { settings, text };
}

/**
 * In a `--workers` worker with the admin API on, before it listens: answers the primary's admin calls, and takes the
 * overrides the operator set on the workers already serving (a worker started in place of one that died).
 */
async function joinAdminApi(gateway: Gateway, log: GatewayLogger): Promise<void> {
  const admin = gateway.workerAdmin;
  if (admin === undefined) return;
  answerAdminCalls(admin);
  try {
    const taken = await takeSiblingsAdminState(admin);
    if (taken > 0) log.info({ overrides: taken }, "took the admin API's overrides of the workers already serving");
  } catch (error) {
    log.warn({ error: (error as Error).message }, "could not take the admin API's overrides of the other workers; starting without them");
  }
}

/** Runs the gateway until SIGTERM/SIGINT; under `--workers`, the primary supervises workers instead. */
async function serve(settings: GatewaySettings, overrides: SettingsOverrides, configText: string | undefined): Promise<void> {
  const deps = await loadGatewayDeps();
  if (settings.workers > 0 && cluster.isPrimary) {
    await runPrimary(settings, deps);
    return;
  }
  const clustered = settings.workers > 0 && cluster.isWorker;
  const log = createLogger(deps.pino, settings.logLevel, clustered ? { worker: cluster.worker?.id } : {});
  // Node ends a process on a SIGHUP nobody listens for: one sent as soon as the listening line is out,
  // before the reloader below is set up, is held and applied then.
  let heldSighup = false;
  const holdSighup = (): void => {
    heldSighup = true;
  };
  process.on('SIGHUP', holdSighup);
  // Read before the gateway listens: a bad rate limit config or certificate ends the start before any "listening" line.
  const prepared = settings.grpc === undefined ? undefined : await RlsServer.prepare(settings.grpc);
  const gateway = await Gateway.start(settings, deps, log, {
    clustered,
    ...(clustered ? { beforeListen: (g: Gateway) => joinAdminApi(g, log) } : {}),
  });
  let rls: RlsServer | undefined;
  if (prepared !== undefined) {
    try {
      rls = await RlsServer.start(prepared, gateway, deps.prom, log);
    } catch (error) {
      await gateway.shutdown();
      throw error;
    }
  }
  warnAboutRules(settings, log);
  if (clustered) {
    // The primary's AggregatorRegistry asks each worker for this registry over IPC. prom-client adds the
    // worker's listener for those requests only when an AggregatorRegistry is constructed, so one is, here.
    new deps.prom.AggregatorRegistry();
    deps.prom.AggregatorRegistry.setRegistries([gateway.metrics.registry]);
    // The primary's /readyz is the whole gateway's, and only workers hold stores: it asks each one.
    answerReadiness(() => gateway.notReady());
  }
  const reloader =
    settings.configFile === undefined
      ? undefined
      : new ConfigReloader({
          file: settings.configFile,
          overrides,
          apply: (next) => {
            gateway.apply(next);
            warnAboutRules(next, log);
          },
          log,
          metrics: gateway.metrics,
          watch: settings.watch,
          ...(configText === undefined ? {} : { initialText: configText }),
        });
  await reloader?.start();
  if (reloader === undefined) process.on('SIGHUP', () => log.info('SIGHUP: no --config file to reload'));
  process.off('SIGHUP', holdSighup);
  if (heldSighup) void reloader?.reload('SIGHUP');
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    reloader?.stop();
    // The rate limit service stops first: its answers need the store the gateway closes.
    (rls?.close() ?? Promise.resolve())
      .then(() => gateway.shutdown())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          log.error({ error: (error as Error).message }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
