// Builds dist/esm and dist/cjs (each with .d.ts) from src with tsc, after generating the embedded Lua scripts.
// `--if-stale` (npm start) skips the build when dist/ was built after every input changed last.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: 'inherit' });

/** What the build reads: a change to any of them makes dist/ stale. */
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.cjs.json', 'scripts/build.mjs', 'scripts/gen-lua.mjs'];
/** Written last by a build that finished: their modification time is when dist/ was complete. */
const STAMPS = ['dist/esm/package.json', 'dist/cjs/package.json'];

/** The input modified most recently: its path and mtime in ms (a directory is walked). */
function newestInput() {
  let newest = { path: '', mtimeMs: 0 };
  const visit = (path) => {
    if (!existsSync(path)) return;
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path)) visit(join(path, name));
    } else if (stat.mtimeMs > newest.mtimeMs) {
      newest = { path, mtimeMs: stat.mtimeMs };
    }
  };
  for (const input of INPUTS) visit(join(root, input));
  return newest;
}

/** Why dist/ needs a build, or undefined when it was built after every input's last change. */
function staleReason() {
  const stamps = STAMPS.map((p) => join(root, p));
  if (stamps.some((p) => !existsSync(p))) return 'dist/ is missing or its last build did not finish';
  const builtAt = Math.min(...stamps.map((p) => statSync(p).mtimeMs));
  const newest = newestInput();
  return newest.mtimeMs > builtAt ? `${relative(root, newest.path)} changed after the last build` : undefined;
}

const say = (line) => process.stderr.write(`floodgate build: ${line}\n`);

if (process.argv.includes('--if-stale')) {
  const reason = staleReason();
  if (reason === undefined) {
    say('dist/ is current (built after the last change to src/), skipping the build; `npm run build` forces one');
    process.exit(0);
  }
  say(`${reason}: building dist/ (about 25 s)`);
}

// Each step on its own line, so a run that takes half a minute shows where it is.
const started = Date.now();
const step = (n, what) => say(`${n}/3 ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
step(1, 'Lua scripts');
if (existsSync(`${root}scripts/gen-lua.mjs`)) run(['scripts/gen-lua.mjs']);
rmSync(`${root}dist`, { recursive: true, force: true });
step(2, 'dist/esm (tsc)');
run([tsc, '-p', 'tsconfig.json']);
step(3, 'dist/cjs (tsc)');
run([tsc, '-p', 'tsconfig.cjs.json']);
// Marks each tree's module format so Node loads .js files correctly whatever the package type.
// Written last: their mtimes are the stamp --if-stale compares against.
mkdirSync(`${root}dist/cjs`, { recursive: true });
writeFileSync(`${root}dist/cjs/package.json`, '{"type":"commonjs"}\n');
writeFileSync(`${root}dist/esm/package.json`, '{"type":"module"}\n');
say(`done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
