/** Starts envoyproxy/ratelimit (the reference RLS) on a config directory and a Redis, and waits until its gRPC port answers. */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { freePort } from '../lib/server.js';
import { tailOf } from '../lib/processes.js';
import { assertBuilt, REFERENCE_BINARY } from './paths.js';
import { waitForPort } from './port.js';

/** Options of {@link startReference}. */
export interface ReferenceOptions {
  /** A directory of envoyproxy/ratelimit YAML files (or one file): copied into the runtime directory it reads. */
  readonly config: string;
  /** `redis://host:port` or `host:port`. */
  readonly redisUrl: string;
  /** gRPC port on 127.0.0.1; a free one when omitted. */
  readonly grpcPort?: number;
  /** Extra environment (e.g. LOCAL_CACHE_SIZE_IN_BYTES). */
  readonly env?: Readonly<Record<string, string>>;
  /** Spawn in its own process group (the bench harness kills groups). Default false. */
  readonly detached?: boolean;
}

/** A running reference server. */
export interface RunningReference {
  readonly port: number;
  readonly child: ChildProcess;
  /** Its last output lines, for error messages. */
  output(): string;
  /** SIGTERM, SIGKILL after 3 s; removes the runtime directory. */
  stop(): Promise<void>;
}

/**
 * The environment its README gives for a local run: file config under
 * RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, Redis over TCP, stats off (no
 * statsd here), every listener on loopback. The runtime root is a plain
 * directory, so the default symlink-swap watching is turned off.
 */
function referenceEnv(root: string, redisUrl: string, grpc: number, http: number, debug: number): Record<string, string> {
  return {
    USE_STATSD: 'false',
    LOG_LEVEL: 'warn',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: redisUrl.replace(/^redis:\/\//, '').replace(/\/$/, ''),
    RUNTIME_ROOT: root,
    RUNTIME_SUBDIRECTORY: 'ratelimit',
    RUNTIME_APPDIRECTORY: 'config',
    RUNTIME_IGNOREDOTFILES: 'true',
    RUNTIME_WATCH_ROOT: 'false',
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(grpc),
    HOST: '127.0.0.1',
    PORT: String(http),
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(debug),
  };
}

/** Starts the reference binary and resolves once its gRPC port accepts connections. */
export async function startReference(options: ReferenceOptions): Promise<RunningReference> {
  const binary = assertBuilt(REFERENCE_BINARY, 'envoyproxy/ratelimit');
  const root = mkdtempSync(join(tmpdir(), 'floodgate-rls-ref-'));
  const configDir = join(root, 'ratelimit', 'config');
  mkdirSync(configDir, { recursive: true });
  cpSync(options.config, statSync(options.config).isDirectory() ? configDir : join(configDir, basename(options.config)), {
    recursive: true,
  });
  const port = options.grpcPort ?? (await freePort());
  const env = { ...process.env, ...referenceEnv(root, options.redisUrl, port, await freePort(), await freePort()), ...options.env };
  const child = spawn(binary, [], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  const out = tailOf(child.stdout);
  const err = tailOf(child.stderr);
  const output = (): string => [out(), err()].filter((s) => s.length > 0).join('\n');
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await gone;
      clearTimeout(timer);
    }
    rmSync(root, { recursive: true, force: true });
  };
  try {
    await waitForPort(port, child, 20_000);
  } catch (error) {
    await stop();
    throw new Error(`envoyproxy/ratelimit did not start: ${(error as Error).message}\n${output()}`, { cause: error });
  }
  return { port, child, output, stop };
}
