// key: method from the attacker's side: a real gateway on a socket and a real upstream; each row on a gateway of its own (methods are few).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { gatewayFixture } from '../support/harness.js';
import { statusOf, type AttackRow } from '../support/key-attacks.js';

const CONFIG = `rules:
  - name: by-method
    key: method
    policies: ["1/1m"]
`;

const m = (method: string, headers: string[] = []): { target: string; method: string; headers: string[] } => ({
  target: '/x',
  method,
  headers,
});

/** A fresh gateway per row: the method is the whole key, so rows would share counts. */
const ROWS: AttackRow[] = [
  { attempt: 'GET twice: the second is over the limit', requests: [m('GET'), m('GET')], expect: [200, 429] },
  { attempt: 'GET and POST count apart', requests: [m('GET'), m('POST')], expect: [200, 200] },
  {
    attempt: 'regression: HEAD counted apart from GET, so alternating them doubled a budget the GET handler spends; HEAD counts as GET',
    requests: [m('GET'), m('HEAD')],
    expect: [200, 429],
  },
  {
    attempt: 'methods outside the standard nine (PROPFIND, MKCOL) share one OTHER bucket, so each is not a fresh one',
    requests: [m('PROPFIND'), m('MKCOL'), m('GET')],
    expect: [200, 429, 200],
  },
  { attempt: 'a lower-case method (get) is refused by the HTTP parser, never counted', requests: [m('get'), m('GET')], expect: [400, 200] },
  { attempt: 'an unknown method (FOO) is refused by the HTTP parser, never counted', requests: [m('FOO'), m('GET')], expect: [400, 200] },
  {
    attempt: 'X-HTTP-Method-Override does not change the key',
    requests: [m('POST', ['X-HTTP-Method-Override: GET']), m('POST'), m('GET', ['X-HTTP-Method-Override: DELETE'])],
    expect: [200, 429, 200],
  },
];

describe('method keys', () => {
  const fixture = gatewayFixture();
  for (const row of ROWS) {
    it(`${row.attempt} → ${row.expect.join(', ')}`, async () => {
      const g = await fixture.start(`upstream: ${fixture.upstream.url}\n${CONFIG}`);
      const got: number[] = [];
      for (const request of row.requests) got.push(await statusOf(g, request));
      assert.deepEqual(got, [...row.expect]);
    });
  }

  it('parses method, alone and as a part', async () => {
    const s = await parseConfigText(`${CONFIG}  - name: b\n    key: "method + path:1"\n    policies: ["1/1m"]\n`, 'gw.yaml');
    assert.deepEqual(s.rules[0]!.key, { kind: 'method' });
    assert.deepEqual(s.rules[1]!.key, { kind: 'compound', parts: [{ kind: 'method' }, { kind: 'path', segment: 1 }] });
  });
});
