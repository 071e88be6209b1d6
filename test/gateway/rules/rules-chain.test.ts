// Several enforced rules per request, and the API-key checks made before counting: a repeated key header (400), key validation and allow lists (401).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { writeFileSync } from 'node:fs';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { FloodgateError } from '../../../src/core/errors.js';
import { get, statuses } from '../../http/support/http.js';
import { gatewayFixture, parseMetrics, writeTemp } from '../support/harness.js';

const fixture = gatewayFixture();

/** A request from client address `ip` (the gateway trusts loopback's X-Forwarded-For) with API key `key`. */
function from(ip: string, key: string | undefined, extra: Record<string, string> = {}): { headers: Record<string, string> } {
  return { headers: { 'x-forwarded-for': ip, ...(key === undefined ? {} : { 'x-api-key': key }), ...extra } };
}

/** Sends raw bytes on a fresh connection; resolves with the status line's code. */
function rawStatus(url: string, text: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      data += d;
      const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (m) {
        resolve(Number(m[1]));
        socket.destroy();
      }
    });
    socket.on('error', reject);
    socket.setTimeout(5000, () => reject(new Error(`no answer to ${JSON.stringify(text)}`)));
  });
}

const seenWithKey = (key: string): number => fixture.upstream.seen.filter((r) => r.headers['x-api-key'] === key).length;

describe('gateway: every matching enforced rule applies', () => {
  const TWO_RULES = (finalLine = ''): string => `
trustProxy: [loopback]
rules:
  - name: per-ip
    match: { path: /api/ }
    key: ip
    policies: ["1/1m"]${finalLine}
  - name: per-key
    match: { path: /api/ }
    key: header:x-api-key
    policies: ["2/1m"]
`;

  it('regression: a per-key rule after a matching per-IP rule is applied too (only the first matching rule counted before)', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\n${TWO_RULES()}`);
    // Three addresses, one key: the per-IP rule admits each address once, the per-key rule the key twice.
    const replies = [
      await get(`${g.url}/api/a`, from('10.0.0.1', 'shared')),
      await get(`${g.url}/api/a`, from('10.0.0.2', 'shared')),
      await get(`${g.url}/api/a`, from('10.0.0.3', 'shared')),
    ];
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200, 429],
    );
    assert.match(String(replies[2]!.headers.ratelimit), /^"2-per-1m";r=0/, "the refusal is the per-key rule's");
    assert.equal(
      replies[0]!.headers['ratelimit-policy'],
      '"1-per-1m";q=1;w=60, "2-per-1m";q=2;w=60',
      "an admitted answer carries every rule's policies",
    );
  });

  it('regression: a client refused by the per-IP rule does not spend the quota of the API key it sends', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\n${TWO_RULES()}`);
    // The attacker's first request counts against the victim's key (1 of 2); the next ten are refused by the per-IP rule first.
    assert.deepEqual(await statuses(`${g.url}/api/x`, 11, from('10.6.6.6', 'victim')), [200, ...Array(10).fill(429)]);
    assert.deepEqual(
      await statuses(`${g.url}/api/x`, 1, from('10.0.0.7', 'victim')),
      [200],
      'the victim still has the second unit of its key',
    );
  });

  it('final: true on a rule stops the list there (the rules after it are not applied)', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\n${TWO_RULES('\n    final: true')}`);
    assert.deepEqual(
      [
        (await get(`${g.url}/api/a`, from('10.0.1.1', 'k'))).status,
        (await get(`${g.url}/api/a`, from('10.0.1.2', 'k'))).status,
        (await get(`${g.url}/api/a`, from('10.0.1.3', 'k'))).status,
      ],
      [200, 200, 200],
    );
  });

  it('final is refused on a shadow rule, and must be a boolean', async () => {
    await assert.rejects(
      parseConfigText('rules:\n  - name: s\n    shadow: true\n    final: true\n    policies: ["1/1m"]\n', 'f.yaml'),
      (e: unknown) => e instanceof FloodgateError && /f\.yaml:4:\d+: rules\[0\]\.final: a shadow rule never ends the list/.test(e.message),
    );
    await assert.rejects(
      parseConfigText('rules:\n  - name: s\n    final: yes-please\n    policies: ["1/1m"]\n', 'f.yaml'),
      /rules\[0\]\.final: must be true or false/,
    );
  });
});

describe('gateway: API-key checks before counting', () => {
  it('regression: a repeated X-Api-Key header is refused 400, not joined into a new key ("victim, victim") and forwarded', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nrules:\n  - name: k\n    key: header:x-api-key\n    policies: ["5/1m"]\n`,
    );
    const before = fixture.upstream.seen.length;
    const status = await rawStatus(
      g.url,
      'GET /dup HTTP/1.1\r\nHost: x\r\nX-Api-Key: victim\r\nx-api-key: attacker\r\nConnection: close\r\n\r\n',
    );
    assert.equal(status, 400);
    assert.equal(fixture.upstream.seen.length, before, 'the upstream never saw it');
    // One field line whose value holds a comma is one key, as the upstream reads it.
    assert.equal(await rawStatus(g.url, 'GET /dup HTTP/1.1\r\nHost: x\r\nX-Api-Key: a,b\r\nConnection: close\r\n\r\n'), 200);
    const m = parseMetrics(await g.renderMetrics().then((r) => r.body));
    assert.equal(m.get('floodgate_decisions_total{rule="k",outcome="invalid_key"}'), 1);
  });

  it('a key failing maxLength or pattern is answered 401 without being counted or forwarded', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}
rules:
  - name: checked
    key: { header: x-api-key, maxLength: 24, pattern: "[a-z]{3}_[A-Za-z0-9]{8,20}" }
    policies: ["2/1m"]
`);
    for (const bad of ['short', 'abc_' + 'x'.repeat(30), 'abc_12345678; drop', 'ABC_12345678']) {
      const r = await get(`${g.url}/p`, from('10.0.0.1', bad));
      assert.equal(r.status, 401, bad);
      assert.equal(r.headers['www-authenticate'], 'ApiKey header="x-api-key"');
      assert.equal(JSON.parse(r.body).detail, 'The API key in x-api-key is not valid.');
      assert.equal(seenWithKey(bad), 0);
    }
    assert.deepEqual(await statuses(`${g.url}/p`, 3, from('10.0.0.1', 'abc_12345678')), [200, 200, 429], 'a valid key is counted as usual');
    const m = parseMetrics(await g.renderMetrics().then((r) => r.body));
    assert.equal(m.get('floodgate_decisions_total{rule="checked",outcome="invalid_key"}'), 4);
    // The pattern is anchored: a key that only contains a match is not valid.
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', 'xxabc_12345678'))).status, 401);
  });

  it('an allow-list file admits only the keys it lists (comments and blank lines ignored), and a reload reads it again', async () => {
    const list = writeTemp('keys.txt', '# customers\nkey-alice\n\n  key-bob  \n');
    const yaml = (file: string): string =>
      `upstream: ${fixture.upstream.url}\nrules:\n  - name: known\n    key: { header: x-api-key, allowList: ${file} }\n    policies: ["5/1m"]\n`;
    const g = await fixture.start(yaml(list));
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', 'key-alice'))).status, 200);
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', 'key-bob'))).status, 200);
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', 'key-mallory'))).status, 401);
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', '# customers'))).status, 401);
    writeFileSync(list, 'key-mallory\n');
    g.apply(await parseConfigText(yaml(list), 'test.yaml', { listen: g.current.listen, watch: false }));
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', 'key-mallory'))).status, 200);
    assert.equal((await get(`${g.url}/p`, from('10.0.0.1', 'key-alice'))).status, 401);
  });

  it('key mappings are validated: header required, an unreadable or empty allow list and a bad pattern are config errors naming the field', async () => {
    const rule = (key: string): string => `rules:\n  - name: r\n    key: ${key}\n    policies: ["1/1m"]\n`;
    await assert.rejects(parseConfigText(rule('{ maxLength: 5 }'), 'f.yaml'), /rules\[0\]\.key: a key mapping needs header/);
    await assert.rejects(
      parseConfigText(rule('{ header: x-api-key, allowList: /nonexistent/keys.txt }'), 'f.yaml'),
      /rules\[0\]\.key\.allowList: cannot read \/nonexistent\/keys\.txt: ENOENT/,
    );
    await assert.rejects(
      parseConfigText(rule(`{ header: x-api-key, allowList: ${writeTemp('empty.txt', '# none\n')} }`), 'f.yaml'),
      /lists no key/,
    );
    await assert.rejects(
      parseConfigText(rule('{ header: x-api-key, pattern: "([a-z" }'), 'f.yaml'),
      /rules\[0\]\.key\.pattern: is not a valid regular expression/,
    );
    await assert.rejects(parseConfigText(rule('{ header: x-api-key, color: red }'), 'f.yaml'), /unknown field "color"/);
  });
});
