// `npm run check:generated`: fails when a generated file in the repository is not what its generator makes now (the Lua bundles, the docs' SVGs).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });

// The Lua bundles have their own check, which writes nothing.
run(['scripts/gen-lua.mjs', '--check']);

// Drawn files: regenerate, compare with the committed text, and put the committed text back, so a failing check leaves the tree as it was.
const drawn = [{ file: 'docs/img/algorithms.svg', generator: 'scripts/algorithms-svg.ts' }];
const stale = [];
const keep = mkdtempSync(join(tmpdir(), 'floodgate-generated-'));
try {
  for (const { file, generator } of drawn) {
    const path = join(root, file);
    const saved = join(keep, file.replaceAll('/', '_'));
    cpSync(path, saved);
    run(['--import', 'tsx', generator]);
    if (readFileSync(path, 'utf8') !== readFileSync(saved, 'utf8')) stale.push(`${file} (run: npx tsx ${generator})`);
    cpSync(saved, path);
  }
} finally {
  rmSync(keep, { recursive: true, force: true });
}
if (stale.length > 0) {
  console.error(`generated files are out of date:\n  ${stale.join('\n  ')}`);
  process.exit(1);
}
console.log('generated files are current');
