// Type-checks tiny consumer projects that import every subpath of the built package under moduleResolution node10, node16 and bundler, from ESM and CommonJS, with tsc --strict and the package's .d.ts files checked too.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { root } from './npm.js';

const tsc = join(root, 'node_modules/typescript/bin/tsc');

/** Each subpath with one export a consumer uses (a value, so an `any` from a failed resolution would still be caught by TS2307/TS7016). */
const SUBPATHS: Record<string, string> = {
  floodgate: 'RateLimiter',
  'floodgate/redis': 'RedisStore',
  'floodgate/cluster': 'ClusterStore',
  'floodgate/postgres': 'PostgresStore',
  'floodgate/http': 'HttpLimiter',
  'floodgate/express': 'rateLimit',
  'floodgate/koa': 'rateLimit',
  'floodgate/fastify': 'rateLimit',
  'floodgate/node': 'rateLimit',
  'floodgate/gateway': 'Gateway',
};

/** The packages a user of each subpath already has, linked from this repository's node_modules (types included). */
const PEERS = [
  '@types/node',
  'express',
  '@types/express',
  'koa',
  '@types/koa',
  'fastify',
  'ioredis',
  'redis',
  'undici',
  'prom-client',
  'yaml',
  'pino',
];

const work = mkdtempSync(join(tmpdir(), 'floodgate-types-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A directory whose node_modules holds a copy of the package as npm would install it (package.json and dist/), and links to `peers`. */
function consumerRoot(name: string, peers: readonly string[]): string {
  assert.ok(existsSync(join(root, 'dist/cjs/index.d.ts')), 'dist/ is missing: run node scripts/build.mjs first (npm test does)');
  const base = join(work, name);
  const pkg = join(base, 'node_modules/floodgate');
  mkdirSync(pkg, { recursive: true });
  cpSync(join(root, 'package.json'), join(pkg, 'package.json'));
  cpSync(join(root, 'dist'), join(pkg, 'dist'), { recursive: true, filter: (src) => !src.endsWith('.map') });
  for (const peer of peers) {
    const link = join(base, 'node_modules', peer);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, 'node_modules', peer), link, 'dir');
  }
  return base;
}

/** ESM import syntax of every subpath; compiled as ESM or CommonJS by the project's settings. */
function importSource(subpaths: readonly string[]): string {
  const lines = subpaths.map((s, i) => `import { ${SUBPATHS[s]} as v${i} } from '${s}';`);
  return `${lines.join('\n')}
import type { Decision } from 'floodgate';
const limiter = new v0({ limit: 10, window: '1m' });
export async function decide(key: string): Promise<boolean> {
  const d: Decision = await limiter.consume(key);
  return d.allowed;
}
export const used = [${subpaths.map((_, i) => `v${i}`).join(', ')}] as const;
`;
}

/** `import x = require()` of every subpath, for CommonJS under the bundler resolution (module preserve). */
function requireSource(subpaths: readonly string[]): string {
  const lines = subpaths.map((s, i) => `import m${i} = require('${s}');`);
  return `${lines.join('\n')}
const limiter = new m0.RateLimiter({ limit: 10, window: '1m' });
export async function decide(key: string): Promise<boolean> {
  const d: m0.Decision = await limiter.consume(key);
  return d.allowed;
}
export const used = [${subpaths.map((s, i) => `m${i}.${SUBPATHS[s]}`).join(', ')}] as const;
`;
}

interface Consumer {
  name: string;
  compilerOptions: Record<string, unknown>;
  type: 'module' | 'commonjs';
  source: string;
}

/**
 * The six settings a consumer may have. The node10 ones set esModuleInterop as `tsc --init` does: pino's own
 * declarations (which floodgate/gateway's reach) need it there, whatever floodgate ships.
 */
function consumers(subpaths: readonly string[]): Consumer[] {
  const interop = { esModuleInterop: true };
  return [
    {
      name: 'node10-cjs',
      type: 'commonjs',
      compilerOptions: { module: 'commonjs', moduleResolution: 'node10', ...interop },
      source: importSource(subpaths),
    },
    {
      name: 'node10-esm',
      type: 'module',
      compilerOptions: { module: 'es2022', moduleResolution: 'node10', ...interop },
      source: importSource(subpaths),
    },
    {
      name: 'node16-cjs',
      type: 'commonjs',
      compilerOptions: { module: 'node16', moduleResolution: 'node16' },
      source: importSource(subpaths),
    },
    {
      name: 'node16-esm',
      type: 'module',
      compilerOptions: { module: 'node16', moduleResolution: 'node16' },
      source: importSource(subpaths),
    },
    {
      name: 'bundler-esm',
      type: 'module',
      compilerOptions: { module: 'esnext', moduleResolution: 'bundler' },
      source: importSource(subpaths),
    },
    {
      name: 'bundler-cjs',
      type: 'commonjs',
      compilerOptions: { module: 'preserve', moduleResolution: 'bundler' },
      source: requireSource(subpaths),
    },
  ];
}

/** Writes the consumer under `base` and runs tsc --noEmit --strict on it; resolves to tsc's output ('' when clean). */
function typeCheck(base: string, consumer: Consumer): Promise<{ ok: boolean; output: string }> {
  const dir = join(base, consumer.name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: consumer.name, private: true, type: consumer.type }));
  const compilerOptions = {
    target: 'es2022',
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    types: ['node'],
    ...consumer.compilerOptions,
  };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['index.ts'] }, null, 2));
  writeFileSync(join(dir, 'index.ts'), consumer.source);
  return new Promise((resolve) => {
    execFile(process.execPath, [tsc, '-p', dir, '--noEmit', '--strict'], { timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ ok: error === null, output: `${stdout}${stderr}` });
    });
  });
}

/** Runs the checks two at a time (the machine's cores), failing with every project's errors at once. */
async function checkAll(base: string, list: readonly Consumer[]): Promise<void> {
  const failures: string[] = [];
  for (let i = 0; i < list.length; i += 2) {
    const batch = list.slice(i, i + 2);
    const results = await Promise.all(batch.map((c) => typeCheck(base, c)));
    results.forEach((r, j) => {
      if (!r.ok) failures.push(`${batch[j]!.name}:\n${r.output}`);
    });
  }
  assert.deepEqual(failures, [], failures.join('\n'));
}

test('every subpath type-checks under moduleResolution node10, node16 and bundler, ESM and CommonJS (tsc --strict)', async () => {
  const base = consumerRoot('with-peers', PEERS);
  await checkAll(base, consumers(Object.keys(SUBPATHS)));
});

test('the core subpaths type-check with no optional peer installed (only @types/node)', async () => {
  const base = consumerRoot('bare', ['@types/node']);
  const core = ['floodgate', 'floodgate/redis', 'floodgate/cluster', 'floodgate/http', 'floodgate/node', 'floodgate/express'];
  const list = consumers(core).filter((c) => c.name === 'node10-cjs' || c.name === 'node16-esm');
  await checkAll(base, list);
});
