/** Starts floodgate's RLS server (`floodgate serve --grpc … --rls-config …`) from the built package and waits until its gRPC port answers. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { BenchError } from '../lib/errors.js';
import { tailOf } from '../lib/processes.js';
import { freePort } from '../lib/server.js';
import { REPO_ROOT } from './paths.js';
import { waitForPort } from './port.js';

/** Options of {@link startFloodgateRls}. */
export interface FloodgateRlsOptions {
  /** An envoyproxy/ratelimit YAML file or directory. */
  readonly config: string;
  /** `redis://host:port`; without it the server keeps its counters in memory. */
  readonly redisUrl?: string;
  /** More `floodgate serve` flags, e.g. `--local-first`. */
  readonly args?: readonly string[];
  /** The `floodgate` entry to run; default this checkout's bin/floodgate.mjs (another checkout's, to check a branch). */
  readonly bin?: string;
}

/** A running floodgate RLS server. */
export interface RunningFloodgate {
  readonly port: number;
  readonly child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** Starts `node bin/floodgate.mjs serve --grpc 127.0.0.1:PORT --rls-config PATH [--redis URL] [...args]`. */
export async function startFloodgateRls(options: FloodgateRlsOptions): Promise<RunningFloodgate> {
  const bin = options.bin ?? join(REPO_ROOT, 'bin', 'floodgate.mjs');
  if (!existsSync(join(dirname(bin), '..', 'dist', 'esm', 'gateway', 'cli', 'cli.js'))) {
    throw new BenchError(`dist/ is not built next to ${bin}: run \`npm run build\` first (bin/floodgate.mjs runs the built package)`);
  }
  const port = await freePort();
  const args = [
    bin,
    'serve',
    '--grpc',
    `127.0.0.1:${port}`,
    '--rls-config',
    options.config,
    ...(options.redisUrl === undefined ? [] : ['--redis', options.redisUrl]),
    ...(options.args ?? []),
  ];
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = tailOf(child.stdout);
  const err = tailOf(child.stderr);
  const output = (): string => [out(), err()].filter((s) => s.length > 0).join('\n');
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await gone;
    clearTimeout(timer);
  };
  try {
    await waitForPort(port, child, 20_000);
  } catch (error) {
    await stop();
    throw new BenchError(`floodgate serve --grpc did not start: ${(error as Error).message}\n${output()}`);
  }
  return { port, child, output, stop };
}
