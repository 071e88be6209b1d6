// Compound keys (`header:x-api-key + path:2`, or a YAML list) from the attacker's side: parts holding the separator never collide.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { ruleView } from '../../../src/gateway/admin/admin-rules.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { compoundKey } from '../../../src/gateway/rules/request-keys.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { rejectsConfig } from '../support/config-errors.js';
import { gatewayFixture } from '../support/harness.js';
import { attackTable, type AttackRow } from '../support/key-attacks.js';

const CONFIG = `trustProxy: [loopback]
rules:
  - name: key-and-user
    match: { path: /u/ }
    key: "header:x-api-key + path:2"
    policies: ["1/1m"]
  - name: session-and-tenant
    match: { path: /t/ }
    key: [cookie:sid, query:tenant]
    policies: ["1/1m"]
  - name: key-and-address
    match: { path: /a/ }
    key: "header:x-api-key + ip"
    policies: ["1/1m"]
  - name: token-and-path
    match: { path: /z/ }
    key: "header:authorization + path"
    policies: ["1/1m"]
`;

const u = (apiKey: string | undefined, user: string, extra: string[] = []): { target: string; headers: string[] } => ({
  target: `/u/${user}`,
  headers: [...(apiKey === undefined ? [] : [`X-Api-Key: ${apiKey}`]), ...extra],
});
const t = (sid: string, query: string): { target: string; headers: string[] } => ({
  target: `/t/x?${query}`,
  headers: [`Cookie: sid=${sid}`],
});
const a = (apiKey: string, from: string): { target: string; headers: string[] } => ({
  target: '/a/x',
  headers: [`X-Api-Key: ${apiKey}`, `X-Forwarded-For: ${from}`],
});

/** Each row's values are its own, so every row starts from a fresh count (limit 1: a second request under one key is 429). */
const ROWS: AttackRow[] = [
  { attempt: 'one tuple, twice: the second is over the limit', requests: [u('k1', 'p1'), u('k1', 'p1')], expect: [200, 429] },
  { attempt: 'one part changed is another tuple (the key)', requests: [u('k2a', 'p2'), u('k2b', 'p2')], expect: [200, 200] },
  { attempt: 'one part changed is another tuple (the path)', requests: [u('k3', 'p3a'), u('k3', 'p3b')], expect: [200, 200] },
  {
    attempt: 'a key holding the separator ("a:b" + "c") is not "a" + "b:c"',
    requests: [u('k4:x', 'y'), u('k4', 'x:y')],
    expect: [200, 200],
  },
  {
    attempt: 'a key holding " + " ("a + b", "c") is not ("a", "b + c")',
    requests: [u('k5 + x', 'y'), u('k5', 'x%20+%20y')],
    expect: [200, 200],
  },
  {
    attempt: 'a key spelled as the encoding of another tuple ("3:k6" + "1:z") is not it',
    requests: [u('1:k', 'p6'), u('1:k2:p6', 'x')],
    expect: [200, 200],
  },
  { attempt: 'a missing key part is 401, however the other part reads', requests: [u(undefined, 'p7')], expect: [401] },
  { attempt: 'a missing path part is 400', requests: [{ target: '/u/', headers: ['X-Api-Key: k8'] }], expect: [400] },
  { attempt: 'the key header twice is 400, even inside a compound', requests: [u('k9a', 'p9', ['X-Api-Key: k9b'])], expect: [400] },
  {
    attempt: 'the path part is canonical (//, .., case)',
    requests: [u('k10', 'p10'), { target: '/u//x/../P10', headers: ['X-Api-Key: k10'] }],
    expect: [200, 429],
  },
  { attempt: 'list form: one tuple twice', requests: [t('s11', 'tenant=t11'), t('s11', 'tenant=t11')], expect: [200, 429] },
  {
    attempt: 'list form: a cookie holding ; or = cannot shift into the tenant',
    requests: [t('s12', 'tenant=t12'), t('s12%3Btenant', 't12')],
    expect: [200, 401],
  },
  { attempt: 'list form: a duplicated tenant is 400', requests: [t('s13', 'tenant=a&tenant=b')], expect: [400] },
  {
    attempt: 'list form: an encoded tenant is the tenant it decodes to',
    requests: [t('s14', 'tenant=t14'), t('s14', 'tenant=%74%31%34')],
    expect: [200, 429],
  },
  {
    attempt: 'with ip: one key from two addresses counts apart',
    requests: [a('k15', '198.51.100.15'), a('k15', '198.51.100.16')],
    expect: [200, 200],
  },
  {
    attempt: 'with ip: one key from one address, twice',
    requests: [a('k16', '198.51.100.17'), a('k16', '198.51.100.17')],
    expect: [200, 429],
  },
  {
    attempt: 'regression: Authorization twice (node keeps only the first copy, so no comma shows it) counted under the first copy; now 400',
    requests: [{ target: '/z/x', headers: ['Authorization: attacker', 'Authorization: victim'] }],
    expect: [400],
  },
  {
    attempt: 'Authorization once inside a compound: counted, then over the limit',
    requests: [
      { target: '/z/y', headers: ['Authorization: one'] },
      { target: '/z/y', headers: ['Authorization: one'] },
    ],
    expect: [200, 429],
  },
  {
    attempt: 'with ip: an IPv6 /64 is one address',
    requests: [a('k17', '2001:db8:17::1'), a('k17', '2001:db8:17::2')],
    expect: [200, 429],
  },
];

describe('compound keys', () => {
  const fixture = gatewayFixture();
  let g: Gateway;
  before(async () => {
    await fixture.ready();
    g = await fixture.start(`upstream: ${fixture.upstream.url}\n${CONFIG}`);
  });

  describe('attack table', () => attackTable(ROWS, () => g));

  it('no two of 20 000 tuples of parts full of separators, digits and colons share a key', () => {
    const alphabet = [':', '1', '1:', ':1', '+', ' + ', 'a', '2:a', '10:', '0'];
    // A seeded generator (mulberry32): the same tuples every run.
    let seed = 32;
    const random = (n: number): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
      return ((x ^ (x >>> 14)) >>> 0) % n;
    };
    const seen = new Map<string, string>();
    // The same tuples joined with ":" collide: the sample holds the tuples an unencoded join would confuse.
    const joined = new Map<string, string>();
    let joinedCollisions = 0;
    for (let i = 0; i < 20_000; i++) {
      const parts = Array.from({ length: 2 + random(3) }, () =>
        Array.from({ length: 1 + random(4) }, () => alphabet[random(alphabet.length)]!).join(''),
      );
      const tuple = JSON.stringify(parts);
      const key = compoundKey(parts);
      const other = seen.get(key);
      assert.ok(other === undefined || other === tuple, `${tuple} and ${other} share ${key}`);
      seen.set(key, tuple);
      const plain = joined.get(parts.join(':'));
      if (plain !== undefined && plain !== tuple) joinedCollisions += 1;
      joined.set(parts.join(':'), tuple);
    }
    assert.ok(joinedCollisions > 100, `${joinedCollisions} collisions of a plain join`);
    assert.ok(seen.size > 15_000, `${seen.size} distinct tuples`);
  });
});

describe('config: compound keys', () => {
  it('takes " + " and the list form, as rule and policy keys', async () => {
    const s = await parseConfigText(CONFIG, 'gw.yaml');
    assert.deepEqual(s.rules[0]!.key, {
      kind: 'compound',
      parts: [
        { kind: 'header', header: 'x-api-key', fallbackToIp: false },
        { kind: 'path', segment: 2 },
      ],
    });
    assert.deepEqual(s.rules[1]!.key, {
      kind: 'compound',
      parts: [
        { kind: 'cookie', name: 'sid' },
        { kind: 'query', name: 'tenant' },
      ],
    });
    const p = await parseConfigText('rules:\n  - name: a\n    policies: [{ limit: 1, window: 1m, key: [method, path] }]\n', 'gw.yaml');
    assert.deepEqual(p.rules[0]!.policies[0]!.key, { kind: 'compound', parts: [{ kind: 'method' }, { kind: 'path' }] });
  });

  it('the admin API shows each key as it is written', async () => {
    const s = await parseConfigText(CONFIG, 'gw.yaml');
    assert.deepEqual(
      s.rules.map((r) => ruleView(r).key),
      [
        { kind: 'compound', source: 'header:x-api-key + path:2' },
        { kind: 'compound', source: 'cookie:sid + query:tenant' },
        { kind: 'compound', source: 'header:x-api-key + ip' },
        { kind: 'compound', source: 'header:authorization + path' },
      ],
    );
  });

  it('refuses one part, nine, a part twice, global, and a fallback inside', async () => {
    await rejectsConfig(
      'rules:\n  - name: a\n    key: [ip]\n    policies: ["1/1m"]\n',
      /rules\[0\]\.key: as a compound key must list 2 to 8 parts/,
    );
    await rejectsConfig(
      `rules:\n  - name: a\n    key: [${Array.from({ length: 9 }, (_, i) => `"cookie:c${i}"`).join(', ')}]\n    policies: ["1/1m"]\n`,
      /must list 2 to 8 parts .*got 9/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    key: "header:X-Key + header:x-key"\n    policies: ["1/1m"]\n',
      /names "header:x-key" twice/,
    );
    await rejectsConfig('rules:\n  - name: a\n    key: "ip + global"\n    policies: ["1/1m"]\n', /"global" is the same for every request/);
    await rejectsConfig(
      'rules:\n  - name: a\n    key: "header:x-key,ip + path"\n    policies: ["1/1m"]\n',
      /falls back to the address, which a compound key cannot do/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    key: "path + "\n    policies: ["1/1m"]\n',
      /each part of a compound key must be one key source/,
    );
  });
});
