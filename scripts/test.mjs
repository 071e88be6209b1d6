// `npm test`: builds, checks that redis-server is installed, then runs every test/**/*.test.ts with node's test runner.
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
if (probe.error || probe.status !== 0) {
  console.error(
    'redis-server was not found on PATH. The tests start real Redis servers (single node and cluster).\n' +
      'Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y redis-server (macOS: brew install redis), then run npm test again.',
  );
  process.exit(1);
}

execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: root, stdio: 'inherit' });

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...collect(path));
    else if (name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : collect(join(root, 'test')).sort();
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=120000', '--test-reporter=spec', ...files],
  { cwd: root, stdio: 'inherit', env: { ...process.env, FLOODGATE_TEST: '1' } },
);
process.exit(result.status ?? 1);
