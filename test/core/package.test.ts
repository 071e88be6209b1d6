// The built package: ESM and CommonJS entry points with types, and a core import that loads no Redis client, node:cluster or HTTP code.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));

/** Runs a snippet in a fresh node process from the package root and returns its stdout. */
function node(args: string[]): string {
  return execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
}

// What importing the core may not load: Redis clients, cluster/worker IPC, HTTP servers, frameworks.
const FORBIDDEN = /\b(ioredis|redis|valkey|cluster|worker_threads|http|https|net|express|koa|fastify)\b/;

test('every exports entry points at a built file with its declarations', () => {
  for (const [subpath, entry] of Object.entries(pkg.exports as Record<string, unknown>)) {
    if (typeof entry === 'string') continue;
    const e = entry as { import: { types: string; default: string }; require: { types: string; default: string } };
    for (const file of [e.import.types, e.import.default, e.require.types, e.require.default]) {
      // Subpaths of later issues may not be built yet; the core ones must be.
      if (['.', './redis'].includes(subpath)) assert.ok(existsSync(`${root}${file}`), `${subpath}: ${file}`);
    }
  }
});

test('ESM import of the core works and loads no Redis, cluster or HTTP module', () => {
  const out = node([
    '--input-type=module',
    '-e',
    `import { RateLimiter } from 'floodgate';
     const l = new RateLimiter({ limit: 1, window: '1s' });
     const d = await l.consume('k');
     const builtins = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).join(' ');
     console.log(JSON.stringify({ allowed: d.allowed, builtins }));`,
  ]);
  const { allowed, builtins } = JSON.parse(out);
  assert.equal(allowed, true);
  for (const name of ['cluster', 'worker_threads', 'http', 'https', 'net']) {
    assert.ok(!builtins.split(' ').includes(`NativeModule ${name}`), `core loaded node:${name}`);
  }
});

test('CommonJS require of the core works and requires nothing outside the package', () => {
  const out = node([
    '-e',
    `const { RateLimiter, FloodgateError } = require('floodgate');
     new RateLimiter({ limit: 1, window: '1s' }).consume('k').then((d) => {
       const loaded = Object.keys(require.cache).filter((f) => !f.includes('/dist/cjs/'));
       console.log(JSON.stringify({ allowed: d.allowed, loaded, error: typeof FloodgateError }));
     });`,
  ]);
  const { allowed, loaded, error } = JSON.parse(out);
  assert.equal(allowed, true);
  assert.equal(error, 'function');
  assert.deepEqual(
    loaded.filter((f: string) => FORBIDDEN.test(f)),
    [],
  );
});

test('the core has no runtime dependencies', () => {
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.peerDependenciesMeta.ioredis.optional, true);
  assert.equal(pkg.peerDependenciesMeta.redis.optional, true);
  assert.equal(pkg.peerDependenciesMeta['@valkey/valkey-glide'].optional, true);
});
