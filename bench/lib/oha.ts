/** Open-loop load with oha: latency counted from each request's due time, at rates a Node.js client cannot send. */
import { spawnSync } from 'node:child_process';
import { exited, spawnTracked, tailOf } from './processes.js';
import { BenchError } from './errors.js';
import type { OpenLoopPoint } from './open-loop-point.js';

/** What one open-loop run measured, with the point it ran at (`share` or `rate`, see {@link OpenLoopPoint}). */
export type OpenLoopResult = OpenLoopPoint & OpenLoopFigures;

/** The figures of one open-loop run. */
export interface OpenLoopFigures {
  /** The rate asked for, requests/s. */
  readonly targetRps: number;
  /** Responses ÷ the run's seconds. */
  readonly achievedRps: number;
  /** Percentiles of latency from each request's scheduled start, ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Requests due in the measured seconds that got no answer (failed, or still out when oha stopped). */
  readonly errors: number;
}

/** Options of {@link runOha}. */
export interface OhaOptions {
  readonly url: string;
  /** The point the run is for; its result carries it. */
  readonly point: OpenLoopPoint;
  readonly rps: number;
  readonly durationS: number;
  /** Seconds sent at the same rate before the measured ones, and not counted: oha opens its connections then. */
  readonly warmupS: number;
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

/** Throws a {@link BenchError} saying how to install oha when it is not on the PATH (`--open-loop` asks for its columns outright). */
export function assertOha(): void {
  if (!hasOha()) throw new BenchError('--open-loop needs oha, which is not on the PATH; install it with: cargo install oha');
}

/**
 * Sends `rps` requests/s for `warmupS + durationS` seconds whatever the
 * server does, and measures the last `durationS`. `--latency-correction`
 * counts each request from when it was due, not from when a connection was
 * free, so a stalled server cannot hide its stall.
 *
 * The warm-up is not counted because oha opens its connections as its first
 * requests fall due: a Node.js server accepts one connection per event-loop
 * iteration, so 256 connections opened at once delay the first requests by
 * tens of ms (a bare node:http server at 27 000 requests/s: p99 8–92 ms over
 * 5 s counted from the start, 0.8 ms over 20 s). That is a connection storm,
 * not the steady-state tail this run is for; the per-request CSV lets the
 * first seconds be dropped.
 */
export async function runOha(options: OhaOptions): Promise<OpenLoopResult> {
  const rps = Math.max(1, Math.round(options.rps));
  const args = [
    '-z',
    `${options.warmupS + options.durationS}s`,
    '-q',
    String(rps),
    '-c',
    String(options.connections),
    '--latency-correction',
    '--no-tui',
    '--output-format',
    'csv',
    ...Object.entries(options.headers ?? {}).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    options.url,
  ];
  const child = spawnTracked('oha', args, {});
  const chunks: string[] = [];
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => chunks.push(chunk));
  const stderr = tailOf(child.stderr);
  await exited(child);
  if (child.exitCode !== 0) throw new BenchError(`oha failed (exit ${child.exitCode ?? child.signalCode}): ${stderr() || 'no output'}`);
  const ms = measuredLatencies(chunks.join(''), options.warmupS, options.warmupS + options.durationS);
  const due = Math.round(rps * options.durationS);
  return {
    ...options.point,
    targetRps: rps,
    achievedRps: ms.length / options.durationS,
    p50Ms: percentile(ms, 0.5),
    p99Ms: percentile(ms, 0.99),
    errors: Math.max(0, due - ms.length),
  };
}

/**
 * Latencies (ms, sorted) of the answered requests oha's CSV lists as started
 * in [from, to) seconds; its columns are request-start, DNS, DNS+dialup,
 * Response-delay, request-duration, bytes, status.
 */
function measuredLatencies(csv: string, from: number, to: number): Float64Array {
  const lines = csv.split('\n');
  const out = new Float64Array(lines.length);
  let n = 0;
  for (let i = 1; i < lines.length; i += 1) {
    const fields = lines[i]!.split(',');
    if (fields.length < 7) continue;
    const start = Number(fields[0]);
    if (start >= from && start < to) out[n++] = Number(fields[4]) * 1000;
  }
  return out.subarray(0, n).sort();
}

/** The `q` quantile of sorted `values` (nearest rank); NaN when empty. */
function percentile(values: Float64Array, q: number): number {
  if (values.length === 0) return NaN;
  return values[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;
}
