// The package manifests agree with the code: peers are only what the library imports, all optional and wide; floodgate-gateway carries every package the gateway loads at floodgate's version; typesVersions mirrors exports.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { root } from './npm.js';

interface Manifest {
  name: string;
  version: string;
  license?: string;
  files?: string[];
  engines?: Record<string, string>;
  exports?: Record<string, unknown>;
  typesVersions?: Record<string, Record<string, string[]>>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const read = (path: string) => JSON.parse(readFileSync(join(root, path), 'utf8')) as Manifest;
const floodgate = read('package.json');
const gateway = read('packages/gateway/package.json');

/** The packages src/gateway/runtime/optional-deps.ts loads, read from its `load('name', …)` calls. */
function gatewayLoads(): string[] {
  const source = readFileSync(join(root, 'src/gateway/runtime/optional-deps.ts'), 'utf8');
  return [...source.matchAll(/\bload\('([^']+)'/g)].map((m) => m[1]!).sort();
}

test('peerDependencies: only what the library imports, each optional, from the oldest major an app may hold', () => {
  const peers: Record<string, string> = floodgate.peerDependencies ?? {};
  assert.deepEqual(peers, {
    '@valkey/valkey-glide': '>=1',
    express: '>=4',
    fastify: '>=3',
    ioredis: '>=4',
    koa: '>=2',
    pg: '>=8',
    redis: '>=4',
  });
  for (const name of Object.keys(peers)) {
    assert.equal(floodgate.peerDependenciesMeta?.[name]?.optional, true, `${name} must be an optional peer`);
  }
  assert.equal((floodgate as { dependencies?: unknown }).dependencies, undefined, 'the library has no runtime dependencies');
  for (const name of gatewayLoads()) {
    if (name === 'ioredis' || name === 'pg') continue; // also a client the library drives (RedisStore, PostgresStore)
    assert.equal(
      floodgate.peerDependencies?.[name],
      undefined,
      `${name} is the gateway's, so floodgate-gateway depends on it, not floodgate`,
    );
  }
});

test('floodgate-gateway depends on floodgate at its version and on every package the gateway loads', () => {
  assert.equal(gateway.name, 'floodgate-gateway');
  assert.equal(gateway.version, floodgate.version);
  assert.equal(gateway.license, 'MIT');
  assert.deepEqual(gateway.files, ['README.md']);
  assert.deepEqual(gateway.engines, floodgate.engines);
  assert.equal(gateway.dependencies?.floodgate, floodgate.version);
  const loads = gatewayLoads();
  assert.ok(loads.length >= 5, `expected the gateway's packages in optional-deps.ts, found ${loads.join(', ')}`);
  assert.deepEqual(
    Object.keys(gateway.dependencies ?? {})
      .filter((n) => n !== 'floodgate')
      .sort(),
    loads,
  );
});

test('typesVersions maps every exported subpath to its CommonJS declarations, so moduleResolution node finds them', () => {
  const mapped = floodgate.typesVersions?.['*'] ?? {};
  const subpaths = Object.keys(floodgate.exports ?? {}).filter((s) => s !== '.' && s !== './package.json');
  assert.deepEqual(Object.keys(mapped).sort(), subpaths.map((s) => s.slice(2)).sort());
  for (const subpath of subpaths) {
    const require = (floodgate.exports?.[subpath] as { require: { types: string } }).require;
    assert.deepEqual(mapped[subpath.slice(2)], [require.types], subpath);
  }
});
