// The server processes and temp dirs the test fixtures started, killed and removed when the test process exits, so no redis-server or postgres outlives a test run.
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

/** Every server process still running. */
export const live = new Set<ChildProcess>();
/** Every temp dir still in place. */
export const dirs = new Set<string>();
let exitHookInstalled = false;

function cleanupAll(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

/** Installs, once per process, the clean-up of {@link live} and {@link dirs} at exit and on SIGINT, SIGTERM, SIGHUP. */
export function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', cleanupAll);
  // Signals skip 'exit' handlers, so clean up, then die of the same signal.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      cleanupAll();
      process.kill(process.pid, signal);
    });
  }
}
