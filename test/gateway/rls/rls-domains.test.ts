// Regression tests for F9: a flood of made-up descriptor values in one rate limit domain, or under one limit, does not refuse another's new users (tables per domain, overflow sketches per limit), on the embedded memory store scaled down.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { loadRlsConfig } from '../../../src/gateway/rls/rls-config.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';

// Two domains with the same numbers, and in one of them two limits with the same numbers: before, all shared one table and one sketch.
const CONFIG_A = `
domain: a
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: org
    rate_limit: { unit: hour, requests_per_unit: 5 }
`;
const CONFIG_B = `
domain: b
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
`;
// A table of 50 keys and a sketch of 4 cells: the defaults' behaviour (100 000 keys, 16 384 cells) after a few seconds of flood.
const GATEWAY = 'rules: []\nstore: { maxKeys: 50, overflowCells: 4 }\n';

let f: RlsFixture;
before(async () => {
  f = await startRls(CONFIG_A, GATEWAY);
});
after(() => f.stop());

/** Both domains: the fixture serves one file, so the second domain goes in a directory beside it. */
async function twoDomains(): Promise<void> {
  const dir = join(dirname(f.file), 'domains');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'a.yaml'), CONFIG_A);
  writeFileSync(join(dir, 'b.yaml'), CONFIG_B);
  f.rls.setConfig(await loadRlsConfig(dir));
}

async function flood(domain: string, key: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await f.client.should(domain, [{ entries: [{ key, value: `made-up-${i}` }] }]);
}

test('F9: a flood of made-up values in domain a does not refuse the first call of a new user in domain b', async () => {
  await twoDomains();
  await flood('a', 'user', 300);
  // Domain a's own table is full and its sketch saturated: its new users may be refused early, as an HTTP rule's are.
  for (let i = 0; i < 5; i++) {
    const r = await f.client.should('b', [{ entries: [{ key: 'user', value: `new-${i}` }] }]);
    assert.equal(r.overall_code, 'OK', `new user ${i} of domain b`);
    assert.equal(r.statuses[0]!.limit_remaining, 4);
  }
});

test('F9: a flood under one limit of a domain does not refuse the first call under another limit with the same numbers', async () => {
  await flood('a', 'user', 300);
  for (let i = 0; i < 5; i++) {
    const r = await f.client.should('a', [{ entries: [{ key: 'org', value: `new-org-${i}` }] }]);
    assert.equal(r.overall_code, 'OK', `new org ${i}`);
  }
});
