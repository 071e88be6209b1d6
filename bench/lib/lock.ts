/** One benchmark at a time on this checkout: two runs on a 2-core machine would only measure each other. */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BenchError } from './errors.js';
import { onCleanup } from './processes.js';

/**
 * Takes `bench/.bench-tmp/run.lock` (git-ignored) for this process, or throws
 * when another live harness holds it. A lock left by a dead process is taken over.
 */
export function lockRun(root: string): void {
  const dir = join(root, 'bench', '.bench-tmp');
  const path = join(dir, 'run.lock');
  mkdirSync(dir, { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      // 'wx' fails if the file exists, so two harnesses cannot both believe they hold it.
      writeFileSync(path, String(process.pid), { flag: 'wx' });
      onCleanup(() => {
        if (readPid(path) === process.pid) rmSync(path, { force: true });
      });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = readPid(path);
      if (holder !== undefined && holder !== process.pid && alive(holder)) {
        throw new BenchError(
          `another benchmark (pid ${holder}) is running from this checkout; wait for it, since two at once measure each other`,
        );
      }
      rmSync(path, { force: true });
    }
  }
  throw new BenchError(`could not take ${path}; remove it if no benchmark is running`);
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else, which still counts as running.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
