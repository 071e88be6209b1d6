// Builds dist/esm and dist/cjs (each with .d.ts) from src with tsc, after generating the embedded Lua scripts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: 'inherit' });

if (existsSync(`${root}scripts/gen-lua.mjs`)) run(['scripts/gen-lua.mjs']);
rmSync(`${root}dist`, { recursive: true, force: true });
run([tsc, '-p', 'tsconfig.json']);
run([tsc, '-p', 'tsconfig.cjs.json']);
// Marks each tree's module format so Node loads .js files correctly whatever the package type.
mkdirSync(`${root}dist/cjs`, { recursive: true });
writeFileSync(`${root}dist/cjs/package.json`, '{"type":"commonjs"}\n');
writeFileSync(`${root}dist/esm/package.json`, '{"type":"module"}\n');
