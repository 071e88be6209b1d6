/** Runs wrk with a Lua script that counts statuses and reports requests, duration and latency percentiles as JSON. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exited, onCleanup, spawnTracked, tailOf } from './processes.js';
import { BenchError } from './errors.js';

/** What one wrk run measured. */
export interface WrkResult {
  /** Responses completed. */
  readonly requests: number;
  /** Measured seconds (wrk's own clock). */
  readonly durationS: number;
  /** requests ÷ durationS. */
  readonly rps: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly meanMs: number;
  /** Responses by status class; 429 apart so a reader sees the limiter refuse. */
  readonly status: { readonly '2xx': number; readonly '429': number; readonly other: number };
  /** wrk's socket errors; timeouts are requests without a response within 2 s. */
  readonly socketErrors: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number };
}

/** Options of {@link runWrk}. */
export interface WrkOptions {
  readonly url: string;
  readonly durationS: number;
  readonly connections: number;
  /** Scenario Lua (init/request) placed before the harness's hooks. */
  readonly lua?: string;
}

const MARKER = 'FLOODGATE_WRK ';

/**
 * The harness's hooks. Each wrk thread has its own Lua state, so the counts
 * live in per-thread globals that `done` (run in the main state) collects
 * through the thread handles `setup` kept.
 */
const HOOKS = `
local floodgate_threads = {}
function setup(thread) table.insert(floodgate_threads, thread) end

fg_2xx, fg_429, fg_other = 0, 0, 0
function response(status, headers, body)
  if status >= 200 and status < 300 then fg_2xx = fg_2xx + 1
  elseif status == 429 then fg_429 = fg_429 + 1
  else fg_other = fg_other + 1 end
end

function done(summary, latency, requests)
  local s2, s429, so = 0, 0, 0
  for _, t in ipairs(floodgate_threads) do
    s2 = s2 + t:get("fg_2xx"); s429 = s429 + t:get("fg_429"); so = so + t:get("fg_other")
  end
  local e = summary.errors
  -- mean is NaN when nothing completed, and JSON has no NaN.
  local mean = latency.mean
  if mean ~= mean then mean = 0 end
  io.write(string.format(
    '\\n${MARKER}{"requests":%d,"durationUs":%d,"p50Us":%d,"p90Us":%d,"p99Us":%d,"maxUs":%d,"meanUs":%f,' ..
    '"s2xx":%d,"s429":%d,"sother":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, mean, s2, s429, so, e.connect, e.read, e.write, e.timeout))
end
`;

/** Throws the install hint when wrk is not on PATH. */
export function assertWrk(): void {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if ((probe.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
    throw new BenchError('wrk is not installed; install it with: apt-get install -y wrk');
  }
}

/** wrk's version line, for the report. */
export function wrkVersion(): string {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  return (
    (probe.stdout ?? '')
      .split('\n')[0]
      ?.replace(/\s+Copyright.*$/, '')
      .trim() ?? 'wrk'
  );
}

let scriptDir: string | undefined;

function writeScript(lua: string | undefined): string {
  if (scriptDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-'));
    scriptDir = dir;
    onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  }
  const path = join(scriptDir, `wrk-${Date.now()}-${Math.random().toString(36).slice(2)}.lua`);
  writeFileSync(path, `${lua ?? ''}\n${HOOKS}`);
  return path;
}

/**
 * Runs one wrk load. wrk inherits the harness's CPU affinity (see pinSelf)
 * and uses one thread, since it has one CPU at most.
 */
export async function runWrk(options: WrkOptions): Promise<WrkResult> {
  const script = writeScript(options.lua);
  const args = ['-t1', `-c${options.connections}`, `-d${options.durationS}s`, '--latency', '-s', script, options.url];
  const child = spawnTracked('wrk', args, {});
  let stdout = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => (stdout += chunk));
  const stderr = tailOf(child.stderr);
  let spawnError: Error | undefined;
  child.once('error', (error) => (spawnError = error));
  await exited(child);
  rmSync(script, { force: true });

  const line = stdout.split('\n').find((l) => l.startsWith(MARKER));
  if (spawnError || child.exitCode !== 0 || line === undefined) {
    const why = spawnError?.message ?? (child.exitCode !== null ? `exit code ${child.exitCode}` : `killed by ${child.signalCode}`);
    throw new BenchError(`wrk failed (${why}): ${stderr() || stdout.trim() || 'no output'}`);
  }
  const raw = JSON.parse(line.slice(MARKER.length)) as Record<string, number>;
  const n = (key: string): number => raw[key] ?? 0;
  const durationS = n('durationUs') / 1e6;
  return {
    requests: n('requests'),
    durationS,
    rps: durationS > 0 ? n('requests') / durationS : 0,
    p50Ms: n('p50Us') / 1000,
    p90Ms: n('p90Us') / 1000,
    p99Ms: n('p99Us') / 1000,
    maxMs: n('maxUs') / 1000,
    meanMs: n('meanUs') / 1000,
    status: { '2xx': n('s2xx'), '429': n('s429'), other: n('sother') },
    socketErrors: { connect: n('connect'), read: n('read'), write: n('write'), timeout: n('timeout') },
  };
}
