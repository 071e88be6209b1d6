/** Child processes of the harness: CPU pinning, spawning in process groups, and killing whatever is left on exit. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

/** Every child still running; each leads its own process group (detached) so a kill reaches its children too. */
const live = new Set<ChildProcess>();
/** How to get rid of something started by code we do not own (the shared redis-server helper) or a temp dir. */
interface Cleanup {
  /** Synchronous, for the 'exit' handler. */
  readonly kill: () => void;
  /** Thorough (e.g. also removes the temp dir), for when there is time to wait. */
  readonly stop?: () => Promise<void>;
}
const cleanups = new Set<Cleanup>();
/** Set once stopping starts, so the run loop, which goes on while cleanups finish, starts nothing new. */
let shuttingDown = false;

/** Where each party runs; `undefined` means "not pinned". */
export interface CpuPlan {
  /** CPU list (taskset syntax) of the server under test. */
  readonly server: string | undefined;
  /** CPU list of the harness itself and wrk (they inherit it from the harness). */
  readonly load: string | undefined;
  /** CPU list of redis-server. */
  readonly redis: string | undefined;
  /** Human-readable summary for the report. */
  readonly note: string;
}

/** Which side of the machine redis-server shares: the system under test (default) or the load generator. */
export type RedisPlacement = 'server' | 'load';

/**
 * Decides the pinning: with two or more CPUs the server gets CPU 1 and the
 * harness and wrk CPU 0, so the load generator never steals the server's core.
 *
 * redis-server goes with the server by default: the app and its store are
 * the system under test, and the load generator keeps a core of its own. On
 * the load generator's core, every Redis round trip waits for the scheduler
 * to switch away from a busy wrk, so both limiters measure mostly that
 * scheduling latency (the server then idles half the time) rather than their
 * own cost. `--redis-cpu load` restores that placement for comparison.
 * With one CPU (or no taskset) nothing is pinned.
 */
export function planCpus(redisWith: RedisPlacement = 'server'): CpuPlan {
  const nproc = Number(spawnSync('nproc', { encoding: 'utf8' }).stdout?.trim());
  const hasTaskset = spawnSync('taskset', ['-V'], { encoding: 'utf8' }).error === undefined;
  if (!hasTaskset) return { server: undefined, load: undefined, redis: undefined, note: 'not pinned (taskset not found)' };
  if (!(nproc >= 2)) return { server: undefined, load: undefined, redis: undefined, note: `not pinned (nproc = ${nproc || 1})` };
  if (redisWith === 'load') {
    return { server: '1', load: '0', redis: '0', note: `server on CPU 1; harness, wrk and redis-server on CPU 0 (nproc = ${nproc})` };
  }
  return { server: '1', load: '0', redis: '1', note: `server and redis-server on CPU 1; harness and wrk on CPU 0 (nproc = ${nproc})` };
}

/**
 * Pins every thread of this process to `cpus`. Children inherit the affinity
 * of the thread that forks them, so redis-server and wrk started afterwards
 * land there too, whoever spawns them (including test/support/redis-server.ts).
 */
export function pinSelf(cpus: string | undefined): void {
  if (cpus === undefined) return;
  const result = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`taskset could not pin the harness to CPU ${cpus}: ${result.stderr.trim()}`);
}

/** `[command, args]` prefixed with `taskset -c cpus` when pinning. */
export function pinned(cpus: string | undefined, command: string, args: readonly string[]): [string, string[]] {
  return cpus === undefined ? [command, [...args]] : ['taskset', ['-c', cpus, command, ...args]];
}

/** Spawns a child in its own process group and tracks it until it exits. */
export function spawnTracked(command: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string }): ChildProcess {
  if (shuttingDown) throw new Error('the harness is stopping');
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Own group: Ctrl-C in a terminal then reaches only the harness, which stops children in order, and kill(-pid) reaches grandchildren.
    detached: true,
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  // A spawn failure (ENOENT) arrives as 'error'; callers see it through 'exit'/'close' waits, so do not crash here.
  child.once('error', () => live.delete(child));
  return child;
}

/** Sends `signal` to the child's whole process group; false when it is already gone. */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): boolean {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return false;
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Resolves when the child has exited (immediately if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
}

/** SIGTERM, then SIGKILL after `graceMs` if the group has not exited. */
export async function stopChild(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (!signalGroup(child, 'SIGTERM')) return;
  const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
  if ((await Promise.race([exited(child), timer])) === 'timeout') {
    signalGroup(child, 'SIGKILL');
    await exited(child);
  }
}

/** Registers a cleanup run by {@link killEverything} / {@link stopEverything}; returns its unregister function. */
export function onCleanup(kill: () => void, stop?: () => Promise<void>): () => void {
  const cleanup: Cleanup = stop === undefined ? { kill } : { kill, stop };
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/**
 * Kills every tracked child group, then runs every cleanup's `stop` (or
 * `kill`), waiting at most `timeoutMs`: for signal handlers, which may still
 * wait a little, unlike the 'exit' handler.
 */
export async function stopEverything(timeoutMs = 2000): Promise<void> {
  shuttingDown = true;
  for (const child of live) signalGroup(child, 'SIGKILL');
  live.clear();
  const pending = [...cleanups].map(async (cleanup) => {
    try {
      if (cleanup.stop) await cleanup.stop();
      else cleanup.kill();
    } catch {
      // Best effort: we are exiting anyway.
    }
  });
  cleanups.clear();
  await Promise.race([Promise.all(pending), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
}

/** Kills every tracked child group and runs every cleanup, synchronously; safe to call from an 'exit' handler. */
export function killEverything(): void {
  shuttingDown = true;
  for (const child of live) signalGroup(child, 'SIGKILL');
  live.clear();
  for (const cleanup of cleanups) {
    try {
      cleanup.kill();
    } catch {
      // Best effort: we are exiting anyway.
    }
  }
  cleanups.clear();
}

/** Keeps the last `max` lines written to a stream, for error messages. */
export function tailOf(stream: NodeJS.ReadableStream | null, max = 20): () => string {
  const lines: string[] = [];
  let partial = '';
  stream?.setEncoding('utf8');
  stream?.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
    if (lines.length > max) lines.splice(0, lines.length - max);
  });
  return () => [...lines, partial].filter((line) => line.length > 0).join('\n');
}
