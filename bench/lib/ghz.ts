/** Runs ghz (a gRPC load generator) with a fixed concurrency and duration for scenarios that load a gRPC server, and reads its JSON report into the harness's result shape. */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchError } from './errors.js';
import { exited, spawnTracked, tailOf } from './processes.js';
import { TOOL_CACHE_DIR } from './tool-cache.js';
import type { WrkResult } from './wrk.js';

/** A scenario's gRPC load: one unary method, its requests sent round-robin. */
export interface GrpcLoad {
  /** The .proto that declares the method: absolute, or relative to one of {@link importPaths}. */
  readonly proto: string;
  /** Directories its imports are found in. */
  readonly importPaths?: readonly string[];
  /** `package.Service.Method`. */
  readonly call: string;
  /** Request messages as JSON objects (proto field names); ghz sends request i with message i mod length. */
  readonly messages: readonly unknown[];
  /** HTTP/2 connections ghz spreads its concurrency over. Default 1 (ghz's own default). */
  readonly channels?: number;
}

/** Options of {@link runGhz}. */
export interface GhzOptions {
  readonly load: GrpcLoad;
  /** `host:port`. */
  readonly target: string;
  readonly durationS: number;
  /** Requests in flight at once (ghz -c). */
  readonly concurrency: number;
}

/** ghz: `$FLOODGATE_BENCH_GHZ`, else the one bench/rls/build-reference.sh built, else the one on PATH. */
export function ghzBinary(): string {
  if (process.env.FLOODGATE_BENCH_GHZ) return process.env.FLOODGATE_BENCH_GHZ;
  const built = join(TOOL_CACHE_DIR, 'bin', 'ghz');
  return existsSync(built) ? built : 'ghz';
}

/** Throws the build hint when ghz cannot be run. */
export function assertGhz(): void {
  const probe = spawnSync(ghzBinary(), ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new BenchError(`ghz is not installed (${ghzBinary()}); build it with: bash bench/rls/build-reference.sh`);
  }
}

/** ghz's version, for the report; `go install` leaves "dev" in the binary, so the build script's stamp says which. */
export function ghzVersion(): string {
  const probe = spawnSync(ghzBinary(), ['--version'], { encoding: 'utf8' });
  const own = (probe.stdout ?? '').trim();
  const stamp = join(TOOL_CACHE_DIR, 'bin', '.ghz.stamp');
  if ((own === '' || own === 'dev') && ghzBinary() === join(TOOL_CACHE_DIR, 'bin', 'ghz') && existsSync(stamp)) {
    return `ghz ${readFileSync(stamp, 'utf8').split(' ')[0]}`;
  }
  return `ghz ${own || 'unknown version'}`;
}

/** The part of ghz's JSON report the harness reads (durations in ns). */
interface GhzReport {
  count: number;
  total: number;
  average: number;
  slowest: number;
  statusCodeDistribution?: Record<string, number>;
  latencyDistribution?: { percentage: number; latency: number }[] | null;
}

/**
 * Runs ghz closed-loop: `concurrency` workers each send the next request as
 * soon as the last one is answered, for `durationS` seconds. ghz inherits
 * the harness's CPU (see pinSelf), like wrk. Its JSON report lists every
 * request, so it goes to a temp file rather than a pipe.
 *
 * Latency percentiles are ghz's over successful calls. The status columns
 * count gRPC statuses: OK as 2xx, every other status as "other"; an RLS
 * OVER_LIMIT answer is a successful call, so the 429 column stays 0.
 */
export async function runGhz(options: GhzOptions): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-ghz-'));
  try {
    const dataFile = join(dir, 'data.json');
    const reportFile = join(dir, 'report.json');
    writeFileSync(dataFile, JSON.stringify(options.load.messages));
    const args = [
      '--insecure',
      '--proto',
      options.load.proto,
      ...(options.load.importPaths === undefined ? [] : ['--import-paths', options.load.importPaths.join(',')]),
      '--call',
      options.load.call,
      '--data-file',
      dataFile,
      '--concurrency',
      String(options.concurrency),
      '--connections',
      String(options.load.channels ?? 1),
      '--duration',
      `${options.durationS}s`,
      // By default ghz closes its connections at the end and counts the calls still in flight as Unavailable; leave them out instead.
      '--duration-stop',
      'ignore',
      '--format',
      'json',
      '--output',
      reportFile,
      options.target,
    ];
    const child = spawnTracked(ghzBinary(), args, {});
    const stderr = tailOf(child.stderr);
    const stdout = tailOf(child.stdout);
    let spawnError: Error | undefined;
    child.once('error', (error) => (spawnError = error));
    await exited(child);
    if (spawnError || child.exitCode !== 0 || !existsSync(reportFile)) {
      const why = spawnError?.message ?? (child.exitCode !== null ? `exit code ${child.exitCode}` : `killed by ${child.signalCode}`);
      throw new BenchError(`ghz failed (${why}): ${stderr() || stdout() || 'no output'}`);
    }
    return toResult(JSON.parse(readFileSync(reportFile, 'utf8')) as GhzReport);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function toResult(report: GhzReport): WrkResult {
  const ms = (ns: number | undefined): number => (ns ?? 0) / 1e6;
  const percentile = (p: number): number => ms(report.latencyDistribution?.find((d) => d.percentage === p)?.latency);
  const statuses = report.statusCodeDistribution ?? {};
  const ok = statuses.OK ?? 0;
  // Unavailable and DeadlineExceeded are the gRPC forms of wrk's connect errors and timeouts: counted there, not here.
  const apart = new Set(['OK', 'Unavailable', 'DeadlineExceeded']);
  const other = Object.entries(statuses).reduce((sum, [name, n]) => (apart.has(name) ? sum : sum + n), 0);
  const durationS = report.total / 1e9;
  return {
    requests: report.count,
    durationS,
    rps: durationS > 0 ? report.count / durationS : 0,
    p50Ms: percentile(50),
    p90Ms: percentile(90),
    p99Ms: percentile(99),
    maxMs: ms(report.slowest),
    meanMs: ms(report.average),
    status: { '2xx': ok, '429': 0, other },
    socketErrors: { connect: statuses.Unavailable ?? 0, read: 0, write: 0, timeout: statuses.DeadlineExceeded ?? 0 },
  };
}
