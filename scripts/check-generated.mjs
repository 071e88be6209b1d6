// `npm run check:generated`: fails when a generated file in the repository is not what its generator makes now (the Lua bundles, the docs' SVGs).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });

// The Lua bundles have their own check, which writes nothing.
run(['scripts/gen-lua.mjs', '--check']);

// Drawn files: regenerate, compare with the committed text, and put the committed text back, so a failing check leaves the tree as it was.
const drawn = [
  { files: ['docs/img/algorithms.svg'], generator: 'scripts/algorithms-svg.ts' },
  {
    files: readdirSync(join(root, 'bench/results'))
      .filter((f) => f.endsWith('.json'))
      .map((f) => `docs/img/bench-${f.replace(/\.json$/, '')}.svg`),
    generator: 'scripts/bench-chart.ts',
  },
];
const stale = [];
const keep = mkdtempSync(join(tmpdir(), 'floodgate-generated-'));
try {
  for (const { files, generator } of drawn) {
    const saved = files.map((file) => {
      const copy = join(keep, file.replaceAll('/', '_'));
      if (existsSync(join(root, file))) cpSync(join(root, file), copy);
      return copy;
    });
    run(['--import', 'tsx', generator]);
    files.forEach((file, i) => {
      const before = existsSync(saved[i]) ? readFileSync(saved[i], 'utf8') : '(missing)';
      if (readFileSync(join(root, file), 'utf8') !== before) stale.push(`${file} (run: npx tsx ${generator})`);
      if (existsSync(saved[i])) cpSync(saved[i], join(root, file));
    });
  }
} finally {
  rmSync(keep, { recursive: true, force: true });
}
if (stale.length > 0) {
  console.error(`generated files are out of date:\n  ${stale.join('\n  ')}`);
  process.exit(1);
}
console.log('generated files are current');
