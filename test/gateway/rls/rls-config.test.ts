// The rate limit service's YAML (envoyproxy/ratelimit's format) and descriptor matching: what is read, what is refused and where, and which limit a descriptor reaches.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConfigError } from '../../../src/gateway/config/config-error.js';
import { loadRlsConfig, parseRlsText, type RlsConfig } from '../../../src/gateway/rls/rls-config.js';
import { counterName, descriptorName, matchDescriptor, wildcardMatch } from '../../../src/gateway/rls/rls-match.js';

const ENVOY_EXAMPLE = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: remote_address
    rate_limit:
      unit: MINUTE
      requests_per_unit: 10
    descriptors:
      - key: path
        value: /admin
        rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: remote_address
    value: 10.0.0.1
    rate_limit:
      unlimited: true
  - key: client_id
    value: "files*"
    share_threshold: true
    rate_limit: { unit: day, requests_per_unit: 7, algorithm: token-bucket }
  - key: header_match
    value: fast
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: second
      requests_per_unit: 1
      name: fast
      replaces:
        - name: slow
`;

async function config(text: string): Promise<RlsConfig> {
  const { domain, root } = await parseRlsText(text, 'test.yaml');
  return { domains: new Map([[domain, root]]), files: ['test.yaml'] };
}

test('envoyproxy/ratelimit YAML is read: units in any case, unlimited, shadow_mode, detailed_metric, name, replaces, and the algorithm extension', async () => {
  const c = await config(ENVOY_EXAMPLE);
  const users = matchDescriptor(c, 'mongo_cps', [{ key: 'database', value: 'users' }]);
  assert.equal(users?.limit.requestsPerUnit, 500);
  assert.equal(users?.limit.unit, 'second');
  assert.equal(users?.limit.fullKey, 'mongo_cps.database_users');
  assert.equal(users?.limit.algorithm, 'fixed-window');
  assert.equal(matchDescriptor(c, 'mongo_cps', [{ key: 'remote_address', value: '1.2.3.4' }])?.limit.unit, 'minute');
  assert.equal(matchDescriptor(c, 'mongo_cps', [{ key: 'remote_address', value: '10.0.0.1' }])?.limit.unlimited, true);
  const fast = matchDescriptor(c, 'mongo_cps', [{ key: 'header_match', value: 'fast' }])!.limit;
  assert.deepEqual([fast.shadow, fast.detailedMetric, fast.name, fast.replaces], [true, true, 'fast', ['slow']]);
  assert.equal(matchDescriptor(c, 'mongo_cps', [{ key: 'client_id', value: 'files-1' }])?.limit.algorithm, 'token-bucket');
});

test('matching: an exact value beats the key-only entry, nested entries walk per entry, and a limit needs the whole depth', async () => {
  const c = await config(ENVOY_EXAMPLE);
  // Key-only default entry for any other value.
  assert.equal(matchDescriptor(c, 'mongo_cps', [{ key: 'remote_address', value: '9.9.9.9' }])?.limit.fullKey, 'mongo_cps.remote_address');
  // Nested: the child of the default entry.
  const nested = matchDescriptor(c, 'mongo_cps', [
    { key: 'remote_address', value: '9.9.9.9' },
    { key: 'path', value: '/admin' },
  ]);
  assert.equal(nested?.limit.fullKey, 'mongo_cps.remote_address.path_/admin');
  assert.equal(nested?.counter, 'remote_address_9.9.9.9.path_/admin');
  // More entries than the tree has: no limit (the parent's limit is for one-entry descriptors only).
  assert.equal(
    matchDescriptor(c, 'mongo_cps', [
      { key: 'database', value: 'users' },
      { key: 'x', value: 'y' },
    ]),
    undefined,
  );
  // A child value not in the tree: no limit.
  assert.equal(
    matchDescriptor(c, 'mongo_cps', [
      { key: 'remote_address', value: '9' },
      { key: 'path', value: '/other' },
    ]),
    undefined,
  );
  assert.equal(matchDescriptor(c, 'mongo_cps', [{ key: 'database', value: 'other' }]), undefined);
  assert.equal(matchDescriptor(c, 'other_domain', [{ key: 'database', value: 'users' }]), undefined);
});

test('wildcards: "*" matches any run; share_threshold counts every matching value in one counter', async () => {
  assert.equal(wildcardMatch(['files', ''], 'files-a'), true);
  assert.equal(wildcardMatch(['a', 'b', 'c'], 'a-x-b-y-c'), true);
  assert.equal(wildcardMatch(['a', 'b', 'c'], 'a-x-c'), false);
  assert.equal(wildcardMatch(['ab', 'ba'], 'aba'), false);
  const c = await config(ENVOY_EXAMPLE);
  const a = matchDescriptor(c, 'mongo_cps', [{ key: 'client_id', value: 'files-a' }]);
  const b = matchDescriptor(c, 'mongo_cps', [{ key: 'client_id', value: 'files-b' }]);
  assert.equal(a?.counter, 'client_id_files*');
  assert.equal(a?.counter, b?.counter);
  assert.equal(descriptorName([{ key: 'client_id', value: 'files-a' }]), 'client_id_files-a');
});

test('bad files are refused at their line, as envoyproxy/ratelimit refuses them', async () => {
  const cases: Array<[string, RegExp, number | undefined]> = [
    ['descriptors: []\n', /domain: must be a non-empty string/, undefined],
    ['domain: d\ndescriptors:\n  - value: x\n', /key: must be a non-empty string/, 3],
    ['domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n', /unit: must be one of second/, 4],
    ['domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, unit: second }\n', /must not be set when unlimited/, 4],
    ['domain: d\ndescriptors:\n  - key: k\n    rate_limit: { requests_per_unit: 1 }\n', /needs a unit/, 4],
    ['domain: d\ndescriptors:\n  - key: k\n  - key: k\n', /duplicate descriptor "d.k"/, 4],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, name: a, replaces: [{ name: a }] }\n',
      /cannot replace itself/,
      4,
    ],
    ['domain: d\ndescriptors:\n  - key: k\n    colour: red\n', /unknown field "colour"/, 4],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: day, requests_per_unit: 4000000000 }\n',
      /above what floodgate keeps exact per day.*at most 13031248/,
      4,
    ],
    ['domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n', /applies only to a wildcard/, 5],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, algorithm: leaky }\n',
      /algorithm: must be one of fixed-window/,
      4,
    ],
    ['domain: d\ndescriptors: [\n', /not valid YAML/, undefined],
  ];
  for (const [text, message, line] of cases) {
    await assert.rejects(parseRlsText(text, 'bad.yaml'), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(error.message, message);
      if (line !== undefined) assert.equal(error.line, line, error.message);
      return true;
    });
  }
});

test('a directory: every .yaml and .yml file, one domain each; the same domain twice is refused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-rls-'));
  writeFileSync(join(dir, 'a.yaml'), 'domain: a\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n');
  writeFileSync(join(dir, 'b.yml'), 'domain: b\n');
  writeFileSync(join(dir, 'notes.txt'), 'not a config');
  const loaded = await loadRlsConfig(dir);
  assert.deepEqual([...loaded.domains.keys()], ['a', 'b']);
  writeFileSync(join(dir, 'c.yaml'), 'domain: a\n');
  await assert.rejects(loadRlsConfig(dir), /duplicate domain "a"/);
  await assert.rejects(loadRlsConfig(join(dir, 'missing.yaml')), /cannot read the rate limit config/);
});

test('counterName, the counter of a limit Envoy sends, escapes "." "_" "%" so descriptors of any shape never share a name', () => {
  assert.notEqual(
    counterName([{ key: 'user', value: 'victim.tier_gold' }]),
    counterName([
      { key: 'user', value: 'victim' },
      { key: 'tier', value: 'gold' },
    ]),
  );
  assert.equal(counterName([{ key: 'remote_address', value: '10.0.0.1' }]), 'remote%5Faddress_10%2E0%2E0%2E1');
  assert.equal(
    counterName([
      { key: 'user', value: 'ana' },
      { key: 'tier', value: 'gold' },
    ]),
    'user_ana.tier_gold',
  );
  assert.notEqual(counterName([{ key: 'a', value: '%2E' }]), counterName([{ key: 'a', value: '.' }]));
  // detailed_metric's label is the descriptor as it came.
  assert.equal(descriptorName([{ key: 'user', value: 'a.tier_b' }]), 'user_a.tier_b');
});
