// Test files: all of test/ for npm test, and for npm run test:unit those that start no program besides node.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** Folders left out whole: they start gateways or validators, type-check the packed build, or measure time: the full run's. */
const FULL_ONLY = ['accuracy', 'bench', 'deploy', 'gateway', 'packaging'];
/** What a test file, or a support file it imports, names when it starts a program the machine must have. */
const NEEDS_PROGRAM = /redis-server|redis-cli|\bnginx\b|\binitdb\b|chromium|validate-deploy|kubeconform|hadolint/;
const SPECIFIER = /\bfrom\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** Every *.test.ts file under dir. */
export function testFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...testFiles(path));
    else if (name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/** True when the file, or a test/ file it imports (transitively), starts a program besides node. */
function needsProgram(file, testRoot, seen = new Set()) {
  if (seen.has(file)) return false;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  if (NEEDS_PROGRAM.test(text)) return true;
  for (const [, spec] of text.matchAll(SPECIFIER)) {
    const target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
    if (target.startsWith(testRoot) && existsSync(target) && needsProgram(target, testRoot, seen)) return true;
  }
  return false;
}

/** The unit tests under testRoot, sorted. */
export function unitTestFiles(testRoot) {
  return testFiles(testRoot)
    .filter((file) => !FULL_ONLY.some((dir) => file.startsWith(join(testRoot, dir) + '/')))
    .filter((file) => !needsProgram(file, testRoot))
    .sort();
}
