// key: query:NAME from the attacker's side: a real gateway on a socket and a real upstream, one row per trick with a query parameter.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get } from '../../http/support/http.js';
import { rejectsConfig } from '../support/config-errors.js';
import { gatewayFixture } from '../support/harness.js';
import { attackTable, type AttackRow } from '../support/key-attacks.js';

const CONFIG = `rules:
  - name: by-query-key
    key: query:api_key
    policies: ["1/1m"]
`;

const q = (query: string): { target: string } => ({ target: `/x?${query}` });
const long = (fill: string, tail: string): string => fill.repeat(3000) + tail;

/** Each row's values are its own, so every row starts from a fresh count (limit 1: a second request under one key is 429). */
const ROWS: AttackRow[] = [
  { attempt: 'one key, twice: the second is over the limit', requests: [q('api_key=q1'), q('api_key=q1')], expect: [200, 429] },
  { attempt: 'two keys count apart', requests: [q('api_key=q2a'), q('api_key=q2b')], expect: [200, 200] },
  { attempt: 'no query', requests: [{ target: '/x' }], expect: [401] },
  { attempt: 'other parameters only', requests: [q('page=2&sort=asc')], expect: [401] },
  { attempt: 'an empty value (api_key=)', requests: [q('api_key=')], expect: [401] },
  { attempt: 'the name without = (api_key)', requests: [q('api_key')], expect: [401] },
  { attempt: 'the parameter twice (?k=a&k=b)', requests: [q('api_key=q7a&api_key=q7b')], expect: [400] },
  { attempt: 'the same value twice (?k=v&k=v) is still ambiguous', requests: [q('api_key=q8&api_key=q8')], expect: [400] },
  { attempt: 'the parameter twice, once with an empty value', requests: [q('api_key=q9&api_key=')], expect: [400] },
  {
    attempt: 'the parameter twice, once with a percent-encoded name (%61pi_key)',
    requests: [q('api_key=q10a&%61pi_key=q10b')],
    expect: [400],
  },
  { attempt: 'a percent-encoded name is the name it decodes to', requests: [q('%61pi_key=q11'), q('api_key=q11')], expect: [200, 429] },
  {
    attempt: 'a percent-encoded value (%71%31%32) is the value it decodes to',
    requests: [q('api_key=q12'), q('api_key=%71%31%32')],
    expect: [200, 429],
  },
  { attempt: '+ is a space (a+b and a%20b are one key)', requests: [q('api_key=q13+x'), q('api_key=q13%20x')], expect: [200, 429] },
  { attempt: 'an escaped + (%2B) is a plus, not a space', requests: [q('api_key=q14+x'), q('api_key=q14%2Bx')], expect: [200, 200] },
  { attempt: 'another case of the name (API_KEY=) is another parameter', requests: [q('API_KEY=q15')], expect: [401] },
  { attempt: 'the order of parameters does not matter', requests: [q('api_key=q16&page=1'), q('page=2&api_key=q16')], expect: [200, 429] },
  { attempt: 'a malformed escape (%zz) is kept as written', requests: [q('api_key=q17%zz'), q('api_key=q17%zz')], expect: [200, 429] },
  {
    attempt: '; does not separate parameters (the value runs on)',
    requests: [q('api_key=q18;api_key=x'), q('api_key=q18')],
    expect: [200, 200],
  },
  { attempt: 'api_key[] is another name', requests: [q('api_key[]=q19')], expect: [401] },
  {
    attempt: 'a 9 000-byte value is counted (hashed), and again under the same value',
    requests: [q(`api_key=${long('abc', 'q20')}`), q(`api_key=${long('abc', 'q20')}`)],
    expect: [200, 429],
  },
  {
    attempt: 'two 9 000-byte values that differ only at the end count apart',
    requests: [q(`api_key=${long('def', 'q21a')}`), q(`api_key=${long('def', 'q21b')}`)],
    expect: [200, 200],
  },
  { attempt: 'the key in the path, not the query, is not the parameter', requests: [{ target: '/api_key=q22' }], expect: [401] },
];

describe('query:NAME keys', () => {
  const fixture = gatewayFixture();
  let g: Gateway;
  before(async () => {
    await fixture.ready();
    g = await fixture.start(`upstream: ${fixture.upstream.url}\n${CONFIG}`);
  });

  describe('attack table', () => attackTable(ROWS, () => g));

  it('a missing parameter says which (401, WWW-Authenticate), and the upstream gets the query as sent', async () => {
    const missing = await get(`${g.url}/x`);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers['www-authenticate'], 'ApiKey query="api_key"');
    assert.equal((await get(`${g.url}/seen?api_key=%71q+1`)).status, 200);
    assert.equal(fixture.upstream.seen.at(-1)!.url, '/seen?api_key=%71q+1');
  });

  it('the decision endpoint reads the parameter from X-Original-URI, not from its own target', async () => {
    const ask = (uri: string) => get(`${g.url}/_floodgate/decide?api_key=own`, { headers: { 'x-original-uri': uri } });
    assert.equal((await ask('/x?api_key=d1')).status, 204);
    assert.equal((await ask('/x?api_key=d1')).status, 429);
    assert.equal((await ask('/x')).status, 401);
  });
});

describe('config: query keys', () => {
  it('parses query:NAME', async () => {
    const s = await parseConfigText('rules:\n  - name: a\n    key: query:api_key\n    policies: ["1/1m"]\n', 'gw.yaml');
    assert.deepEqual(s.rules[0]!.key, { kind: 'query', name: 'api_key' });
  });

  it('refuses a name with characters a config cannot mean, with the file, line and field', async () => {
    await rejectsConfig(
      'rules:\n  - name: a\n    key: "query:a&b"\n    policies: ["1/1m"]\n',
      /^gw\.yaml:3:10: rules\[0\]\.key: names a query parameter/,
    );
  });
});
