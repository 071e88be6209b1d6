/** Open-loop load at a share of a variant's saturating rate, with oha (`cargo install oha`): latency corrected for coordinated omission, at rates a Node.js client on one core cannot send. */
import { spawnSync } from 'node:child_process';
import { exited, spawnTracked, tailOf } from './processes.js';
import { BenchError } from './errors.js';

/** What one open-loop run at a share of the saturating rate measured. */
export interface OpenLoopResult {
  /** The share of the variant's closed-loop requests/s asked for, e.g. 0.8. */
  readonly share: number;
  /** The rate asked for, requests/s. */
  readonly targetRps: number;
  /** Responses ÷ the run's seconds. */
  readonly achievedRps: number;
  /** Percentiles of latency from each request's scheduled start, ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Requests that failed (connection errors, timeouts). */
  readonly errors: number;
}

/** Options of {@link runOha}. */
export interface OhaOptions {
  readonly url: string;
  readonly share: number;
  readonly rps: number;
  readonly durationS: number;
  readonly connections: number;
  /** Request header fields, each sent on every request. */
  readonly headers?: Readonly<Record<string, string>>;
}

let found: boolean | undefined;

/** Whether oha is on the PATH (asked once). */
export function hasOha(): boolean {
  found ??= spawnSync('oha', ['--version'], { encoding: 'utf8' }).error === undefined;
  return found;
}

interface OhaJson {
  summary: { total: number };
  latencyPercentiles: Record<string, number | null>;
  statusCodeDistribution: Record<string, number>;
  errorDistribution: Record<string, number>;
  details?: unknown;
}

/**
 * Sends `rps` requests/s for `durationS` seconds whatever the server does.
 * `--latency-correction` counts each request from when it was due, not from
 * when a connection was free, so a stalled server cannot hide its stall.
 */
export async function runOha(options: OhaOptions): Promise<OpenLoopResult> {
  const rps = Math.max(1, Math.round(options.rps));
  const args = [
    '-z',
    `${options.durationS}s`,
    '-q',
    String(rps),
    '-c',
    String(options.connections),
    '--latency-correction',
    '--no-tui',
    '--output-format',
    'json',
    ...Object.entries(options.headers ?? {}).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    options.url,
  ];
  const child = spawnTracked('oha', args, {});
  let stdout = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => (stdout += chunk));
  const stderr = tailOf(child.stderr);
  await exited(child);
  if (child.exitCode !== 0) throw new BenchError(`oha failed (exit ${child.exitCode ?? child.signalCode}): ${stderr() || 'no output'}`);
  const out = JSON.parse(stdout) as OhaJson;
  const responses = Object.values(out.statusCodeDistribution).reduce((a, b) => a + b, 0);
  const ms = (key: string): number => (out.latencyPercentiles[key] ?? NaN) * 1000;
  return {
    share: options.share,
    targetRps: rps,
    achievedRps: out.summary.total > 0 ? responses / out.summary.total : 0,
    p50Ms: ms('p50'),
    p99Ms: ms('p99'),
    errors: Object.values(out.errorDistribution).reduce((a, b) => a + b, 0),
  };
}
