/** Starts a variant's server process, waits for its "ready" line, and stops it. */
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Variant } from '../types.js';
import { pinned, spawnTracked, stopChild, tailOf } from './processes.js';

/** A running server under test. */
export interface RunningServer {
  /** Port it listens on (127.0.0.1). */
  readonly port: number;
  /** Its process id (with pinning, taskset has exec'd into it), for {@link treeCpuMs}. */
  readonly pid: number | undefined;
  /** Non-null once the process has exited, with how. */
  exitStatus(): string | null;
  /** The last lines the process wrote (stdout and stderr), for error messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after a grace period. */
  stop(): Promise<void>;
}

/** Options of {@link startServer}. */
export interface StartServerOptions {
  /** Repository root: the server's working directory. */
  readonly cwd: string;
  /** CPU list to pin the server to, or undefined. */
  readonly cpus: string | undefined;
  /** The run's copy of dist/, passed as FLOODGATE_BENCH_DIST. */
  readonly dist: string;
  /** Redis URL for variants that need it. */
  readonly redisUrl: string | undefined;
  /** `host:port,…` of the run's Redis Cluster for variants that need it. */
  readonly clusterNodes?: string | undefined;
  /** The run's PostgreSQL URL for variants that need it. */
  readonly postgresUrl?: string | undefined;
  /** The run's upstream (a scenario with `upstream: true`), passed as FLOODGATE_BENCH_UPSTREAM_URL. */
  readonly upstreamUrl?: string | undefined;
  /** Where the server writes a V8 CPU profile when it exits (node `--cpu-prof`); undefined: none. */
  readonly cpuProfDir?: string | undefined;
  /** How long to wait for "ready". Default 20 s (tsx compiles on first start; ioredis connects). */
  readonly readyTimeoutMs?: number;
}

/** A free TCP port on 127.0.0.1 (the OS picks it; racy in theory, fine for one harness). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Starts `variant`'s server and resolves once it printed "ready"; rejects with its output if it exits or times out first. */
export async function startServer(variant: Variant, options: StartServerOptions): Promise<RunningServer> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...variant.env,
    FLOODGATE_BENCH_PORT: String(port),
    FLOODGATE_BENCH_VARIANT: variant.name,
    FLOODGATE_BENCH_DIST: options.dist,
    NODE_ENV: 'production',
  };
  if (options.redisUrl !== undefined) env.FLOODGATE_BENCH_REDIS_URL = options.redisUrl;
  else delete env.FLOODGATE_BENCH_REDIS_URL;
  if (options.clusterNodes !== undefined) env.FLOODGATE_BENCH_REDIS_CLUSTER = options.clusterNodes;
  else delete env.FLOODGATE_BENCH_REDIS_CLUSTER;
  if (options.postgresUrl !== undefined) env.FLOODGATE_BENCH_POSTGRES_URL = options.postgresUrl;
  else delete env.FLOODGATE_BENCH_POSTGRES_URL;
  if (options.upstreamUrl !== undefined) env.FLOODGATE_BENCH_UPSTREAM_URL = options.upstreamUrl;
  else delete env.FLOODGATE_BENCH_UPSTREAM_URL;

  // One folder per variant: node names each profile by time, pid and thread (the tsx loader runs on a thread of its own).
  const profile = options.cpuProfDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', join(options.cpuProfDir, variant.name)];
  const [command, args] = pinned(options.cpus, process.execPath, [...profile, '--import', 'tsx', variant.server, ...(variant.args ?? [])]);
  const child = spawnTracked(command, args, { env, cwd: options.cwd });
  const stdoutTail = tailOf(child.stdout);
  const stderrTail = tailOf(child.stderr);
  // The "ready" line says nothing about a failure; leave it out of error messages.
  const output = (): string =>
    [stdoutTail().replace(/^ready$\n?/m, ''), stderrTail()]
      .map((s) => s.trim())
      .filter((s) => s.length > 0)
      .join('\n');
  let spawnError: Error | undefined;
  child.once('error', (error) => (spawnError = error));

  const running: RunningServer = {
    port,
    pid: child.pid,
    exitStatus: () => describeExit(child, spawnError),
    output,
    stop: () => stopChild(child),
  };

  try {
    await waitForReady(child, options.readyTimeoutMs ?? 20_000);
  } catch (error) {
    await running.stop();
    const detail = output();
    throw new Error(`${(error as Error).message}${spawnError ? ` (${spawnError.message})` : ''}${detail ? `\n${indent(detail)}` : ''}`, {
      cause: error,
    });
  }
  return running;
}

function waitForReady(child: ChildProcess, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer | string): void => {
      buffered += chunk.toString();
      if (/^ready\r?$/m.test(buffered)) finish();
    };
    const timer = setTimeout(() => finish(new Error(`server did not print "ready" within ${timeoutMs} ms`)), timeoutMs);
    const onExit = (): void =>
      finish(new Error(`server exited before it was ready (${describeExit(child, undefined) ?? 'failed to start'})`));
    function finish(error?: Error): void {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onExit);
      if (error) reject(error);
      else resolve();
    }
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onExit);
  });
}

function describeExit(child: ChildProcess, spawnError: Error | undefined): string | null {
  if (spawnError) return `could not start: ${spawnError.message}`;
  if (child.exitCode !== null) return `exit code ${child.exitCode}`;
  if (child.signalCode !== null) return `killed by ${child.signalCode}`;
  return null;
}

/** Indents a block of process output under an error line. */
export function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    | ${line}`)
    .join('\n');
}
