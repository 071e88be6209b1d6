// key: cookie:NAME from the attacker's side: a real gateway on a socket and a real upstream, one row per trick with a cookie.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get } from '../../http/support/http.js';
import { rejectsConfig } from '../support/config-errors.js';
import { gatewayFixture } from '../support/harness.js';
import { attackTable, statusOf, type AttackRow } from '../support/key-attacks.js';

const CONFIG = `rules:
  - name: by-session
    key: cookie:sid
    policies: ["1/1m"]
`;

const c = (value: string): string => `Cookie: ${value}`;
const long = (fill: string, tail: string): string => fill.repeat(3000) + tail;

/** Each row's values are its own, so every row starts from a fresh count (limit 1: a second request under one key is 429). */
const ROWS: AttackRow[] = [
  {
    attempt: 'one session, twice: the second is over the limit',
    requests: [
      { target: '/', headers: [c('sid=s1')] },
      { target: '/', headers: [c('sid=s1')] },
    ],
    expect: [200, 429],
  },
  {
    attempt: 'two sessions count apart',
    requests: [
      { target: '/', headers: [c('sid=s2a')] },
      { target: '/', headers: [c('sid=s2b')] },
    ],
    expect: [200, 200],
  },
  { attempt: 'no Cookie header', requests: [{ target: '/' }], expect: [401] },
  { attempt: 'other cookies only', requests: [{ target: '/', headers: [c('theme=dark; lang=en')] }], expect: [401] },
  { attempt: 'an empty value (sid=)', requests: [{ target: '/', headers: [c('sid=')] }], expect: [401] },
  { attempt: 'a name without a value (sid)', requests: [{ target: '/', headers: [c('sid')] }], expect: [401] },
  { attempt: 'the name twice in one header (sid=a; sid=b)', requests: [{ target: '/', headers: [c('sid=s7a; sid=s7b')] }], expect: [400] },
  { attempt: 'the name in two Cookie headers', requests: [{ target: '/', headers: [c('sid=s8a'), c('sid=s8b')] }], expect: [400] },
  {
    attempt: "the victim's value twice (sid=v; sid=v) is still ambiguous",
    requests: [{ target: '/', headers: [c('sid=s9; sid=s9')] }],
    expect: [400],
  },
  {
    attempt: 'two Cookie headers, the name in one: counted',
    requests: [
      { target: '/', headers: [c('theme=dark'), c('sid=s10')] },
      { target: '/', headers: [c('sid=s10')] },
    ],
    expect: [200, 429],
  },
  { attempt: 'another case of the name (SID=) is another cookie', requests: [{ target: '/', headers: [c('SID=s11')] }], expect: [401] },
  {
    attempt: 'a percent-encoded value (%73%31%32) is the value it decodes to',
    requests: [
      { target: '/', headers: [c('sid=s12')] },
      { target: '/', headers: [c('sid=%73%31%32')] },
    ],
    expect: [200, 429],
  },
  {
    attempt: 'a quoted value ("s13") is the value without quotes',
    requests: [
      { target: '/', headers: [c('sid=s13')] },
      { target: '/', headers: [c('sid="s13"')] },
    ],
    expect: [200, 429],
  },
  {
    attempt: 'spaces around name and value are not part of them',
    requests: [
      { target: '/', headers: [c('sid=s14')] },
      { target: '/', headers: [c('lang=en;   sid =  s14  ')] },
    ],
    expect: [200, 429],
  },
  {
    attempt: 'a malformed escape (%zz) is kept as written',
    requests: [
      { target: '/', headers: [c('sid=s15%zz')] },
      { target: '/', headers: [c('sid=s15%zz')] },
    ],
    expect: [200, 429],
  },
  { attempt: 'a percent-encoded name (%73id) is not the cookie', requests: [{ target: '/', headers: [c('%73id=s16')] }], expect: [401] },
  {
    attempt: 'a cookie whose name ends in the name (xsid=) is not it',
    requests: [{ target: '/', headers: [c('xsid=s17')] }],
    expect: [401],
  },
  {
    attempt: 'a 9 000-byte value is counted (hashed), and again under the same value',
    requests: [
      { target: '/', headers: [c(`sid=${long('abc', 'x18')}`)] },
      { target: '/', headers: [c(`sid=${long('abc', 'x18')}`)] },
    ],
    expect: [200, 429],
  },
  {
    attempt: 'two 9 000-byte values that differ only at the end count apart',
    requests: [
      { target: '/', headers: [c(`sid=${long('def', 'x19a')}`)] },
      { target: '/', headers: [c(`sid=${long('def', 'x19b')}`)] },
    ],
    expect: [200, 200],
  },
];

describe('cookie:NAME keys', () => {
  const fixture = gatewayFixture();
  let g: Gateway;
  before(async () => {
    await fixture.ready();
    g = await fixture.start(`upstream: ${fixture.upstream.url}\n${CONFIG}`);
  });

  describe('attack table', () => attackTable(ROWS, () => g));

  it('a refused request never reaches the upstream, and a missing cookie says which (401, WWW-Authenticate)', async () => {
    const seen = fixture.upstream.seen.length;
    assert.equal(await statusOf(g, { target: '/refused', headers: [c('sid=r1; sid=r2')] }), 400);
    const missing = await get(`${g.url}/refused`);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers['www-authenticate'], 'ApiKey cookie="sid"');
    assert.equal(fixture.upstream.seen.length, seen);
  });
});

describe('cookie:NAME keys on a shadow rule', () => {
  const fixture = gatewayFixture();

  it('reads the cookie as an enforced rule does, reports a refusal and forwards the request', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nrules:\n  - { name: watch, shadow: true, key: cookie:sid, policies: ["1/1m"] }\n`,
    );
    const report = async (headers: Record<string, string>): Promise<[number, unknown]> => {
      const reply = await get(`${g.url}/x`, { headers });
      return [reply.status, reply.headers['floodgate-shadow']];
    };
    assert.deepEqual(await report({}), [200, '"watch";outcome=refused-401']);
    assert.deepEqual(await report({ cookie: 'sid=a; sid=b' }), [200, '"watch";outcome=refused-400']);
    assert.deepEqual(await report({ cookie: 'sid=sh1' }), [200, '"watch";outcome=allowed']);
    assert.deepEqual(await report({ cookie: 'sid=%73h1' }), [200, '"watch";outcome=limited']);
  });
});

describe('config: cookie keys', () => {
  it('parses cookie:NAME, as a rule key and a policy key', async () => {
    const s = await parseConfigText(
      'rules:\n  - name: a\n    key: cookie:sid\n    policies: ["1/1m", { name: per-user, limit: 5, window: 1m, key: "cookie:user_id" }]\n',
      'gw.yaml',
    );
    assert.deepEqual(s.rules[0]!.key, { kind: 'cookie', name: 'sid' });
    assert.deepEqual(s.rules[0]!.policies[1]!.key, { kind: 'cookie', name: 'user_id' });
  });

  it('refuses a cookie name that is no token, with the file, line and field', async () => {
    await rejectsConfig(
      'rules:\n  - name: a\n    key: "cookie:a b"\n    policies: ["1/1m"]\n',
      /^gw\.yaml:3:10: rules\[0\]\.key: names a cookie as NAME in cookie:NAME/,
    );
    await rejectsConfig('rules:\n  - name: a\n    key: "cookie:"\n    policies: ["1/1m"]\n', /rules\[0\]\.key: names a cookie/);
  });
});
