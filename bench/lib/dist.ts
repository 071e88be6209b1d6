/** A private copy of dist/ per run, so a build started elsewhere mid-run (which deletes dist/) cannot break or mix the variants. */
import { cpSync, existsSync, mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { onCleanup } from './processes.js';
import { BenchError } from './errors.js';

/**
 * Copies `<root>/dist` to `bench/.bench-tmp/dist-<pid>` (git-ignored) and
 * returns the copy's path; it is removed when the harness exits. The copy
 * stays inside the repository so that its imports still find node_modules.
 */
export function snapshotDist(root: string): string {
  const source = join(root, 'dist');
  const marker = join(source, 'esm', 'index.js');
  if (!existsSync(marker))
    throw new BenchError('dist/ is not built, or a build elsewhere is rebuilding it; run `npm run build` (npm run bench does it for you)');
  const parent = join(root, 'bench', '.bench-tmp');
  const target = join(parent, `dist-${process.pid}`);
  mkdirSync(parent, { recursive: true });
  onCleanup(() => {
    rmSync(target, { recursive: true, force: true });
    try {
      rmdirSync(parent);
    } catch {
      // Another run's copy is still there; it removes the directory when it ends.
    }
  });
  // A build elsewhere may empty dist/ while we copy (files vanish: ENOENT) or before we finish; a partial copy would fail later and more obscurely.
  const changed = new BenchError('dist/ changed while it was being copied (a build running elsewhere?); run the benchmark again');
  try {
    cpSync(source, target, { recursive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw changed;
    throw error;
  }
  if (!existsSync(join(target, 'esm', 'index.js')) || !existsSync(join(target, 'esm', 'package.json'))) throw changed;
  return target;
}
