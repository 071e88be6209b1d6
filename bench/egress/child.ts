/** The egress scenario's child processes: started pinned, in their own process group, their JSON result line read back. */
import type { ChildProcess } from 'node:child_process';
import { BenchError } from '../lib/errors.js';
import { exited, pinned, spawnTracked, stopChild } from '../lib/processes.js';

/** A started child: its process, and what it has written so far. */
export interface Child {
  readonly process: ChildProcess;
  /** Resolves once the child printed a line `ready`; rejects if it exits first. */
  readonly ready: Promise<void>;
  /** Resolves with the last JSON line of its stdout once it exits 0; rejects with its stderr otherwise. */
  readonly result: Promise<unknown>;
}

/** Starts `node --import tsx <entry>` on `cpus` with `env` added (the harness's own pinning when `cpus` is undefined). */
export function startChild(entry: string, options: { root: string; cpus: string | undefined; env: Record<string, string> }): Child {
  const [command, args] = pinned(options.cpus, process.execPath, ['--import', 'tsx', entry]);
  const child = spawnTracked(command, args, { cwd: options.root, env: { ...process.env, NODE_ENV: 'production', ...options.env } });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const failure = (): BenchError =>
    new BenchError(
      `${entry} (${JSON.stringify(options.env)}) exited with ${child.exitCode ?? child.signalCode}: ${stderr.trim() || '(no output)'}`,
    );
  const result = exited(child).then(() => {
    const line = stdout
      .trim()
      .split('\n')
      .reverse()
      .find((l) => l.startsWith('{'));
    if (child.exitCode !== 0 || line === undefined) throw failure();
    return JSON.parse(line) as unknown;
  });
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (): void => {
      if (/^ready$/m.test(stdout)) {
        child.stdout?.off('data', onData);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    void exited(child).then(() => reject(failure()));
  });
  // Whichever of the two a caller does not wait for must not become an unhandled rejection.
  ready.catch(() => undefined);
  result.catch(() => undefined);
  return { process: child, ready, result };
}

/** Stops the children that are still running (SIGTERM, then SIGKILL). */
export async function stopChildren(children: readonly Child[]): Promise<void> {
  await Promise.all(children.map((c) => stopChild(c.process, 2000)));
}
