/** The `floodgate` command: parse the command line, load the config, and run (or check) the gateway; exit codes 0 ok, 1 runtime failure, 2 bad arguments or config. */
import * as clusterModule from 'node:cluster';
import type { Cluster } from 'node:cluster';
import { readFile } from 'node:fs/promises';
import { ErrorCode, isFloodgateError } from '../../errors.js';
import { parseCommandLine } from './args.js';
import { parseConfigText, type SettingsOverrides } from '../config/config-file.js';
import { ConfigError } from '../config/config-error.js';
import { answerReadiness } from '../workers/cluster-ready.js';
import { loadGatewayDeps } from '../serve/optional-deps.js';
import { HELP } from './help.js';
import { createLogger } from '../serve/log.js';
import { ConfigReloader } from '../config/reload.js';
import { Gateway } from '../serve/gateway.js';
import type { GatewaySettings } from '../config/settings.js';
import { runPrimary } from '../workers/workers.js';

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
      case 'check': {
        const settings = await readSettings(command.configFile, {});
        process.stdout.write(
          `${command.configFile}: valid; ${settings.settings.rules.length} rule(s): ${settings.settings.rules.map((r) => r.name).join(', ') || '(none)'}\n`,
        );
        return 0;
      }
      case 'serve': {
        const { settings, text } =
          command.settings !== undefined
            ? { settings: command.settings, text: undefined }
            : await readSettings(command.configFile!, command.overrides);
        await serve(settings, command.overrides, text);
        return 0;
      }
    }
  } catch (error) {
    process.stderr.write(
      `floodgate: ${isFloodgateError(error) ? `${error.message} [${error.code}]` : error instanceof Error ? error.message : String(error)}\n`,
    );
    if (isFloodgateError(error) && error.code === ErrorCode.INVALID_ARGUMENT)
      process.stderr.write('Run "floodgate --help" for the options.\n');
    return isFloodgateError(error) && USAGE_CODES.has(error.code) ? 2 : 1;
  }
}

async function readSettings(file: string, overrides: SettingsOverrides): Promise<{ settings: GatewaySettings; text: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(ErrorCode.CONFIG_UNREADABLE, { file }, `cannot read the config file: ${(error as Error).message}`, error);
  }
  const settings = await parseConfigText(text, file, overrides);
  if (settings.upstream === undefined && settings.decisionPath === false) {
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      { file, field: 'upstream' },
      'is required unless the decision endpoint is on (decisionPath); otherwise the gateway would have nothing to do.',
    );
  }
  return { settings, text };
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
  const gateway = await Gateway.start(settings, deps, log, { clustered });
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
          apply: (next) => gateway.apply(next),
          log,
          metrics: gateway.metrics,
          watch: settings.watch,
          ...(configText === undefined ? {} : { initialText: configText }),
        });
  reloader?.start();
  if (reloader === undefined) process.on('SIGHUP', () => log.info('SIGHUP: no --config file to reload'));
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    reloader?.stop();
    gateway.shutdown().then(
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
