// Request targets: rules match the canonical path the upstream is sent (no bypass through `..`, `//`, %-escapes, `;` or a fragment); a decision-only gateway does not count other paths; answers during a drain close their connections.
import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import { canonicalHost, canonicalTarget, requestTarget } from '../../../src/gateway/rules/path-match.js';
import { DEFAULT_PATHS, type PathSettings } from '../../../src/gateway/config/settings.js';
import { get } from '../../http/support/http.js';
import { gatewayFixture, startGateway } from '../support/harness.js';

/** One request with `path` sent exactly as written (node's URL parsing would resolve dot segments first). */
function raw(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('canonicalTarget', () => {
  it('leaves ordinary targets alone (the same string)', () => {
    const target = '/api/orders/42?x=../y&z=%2e';
    assert.equal(canonicalTarget(target), target);
  });

  it('merges slashes, resolves dot segments and decodes escapes of unreserved characters', () => {
    const cases: Array<[string, string]> = [
      ['//api//x', '/api/x'],
      ['/x/../api/x', '/api/x'],
      ['/api/./x/', '/api/x/'],
      ['/api/x/..', '/api/'],
      ['/%61pi/x', '/api/x'],
      ['/a/%2e%2e/api?q=1', '/api?q=1'],
      ['/caf%c3%a9', '/caf%C3%A9'],
      ['http://host.example/x/../api/x?q', '/api/x?q'],
    ];
    for (const [input, expected] of cases) assert.equal(canonicalTarget(input), expected, input);
    // With escapedSlashes: keep, an escaped slash is data, not a separator.
    assert.equal(
      canonicalTarget('/a%2fb', { caseSensitive: false, escapedSlashes: 'keep', semicolons: 'reject', doubleEncoding: 'reject' }),
      '/a%2Fb',
    );
  });

  it('refuses targets that climb above the root or are not paths', () => {
    for (const bad of ['/..', '/a/../../b', '/%2e%2e/x', '/a/%zz', '/a\\b', '*', 'ftp://x/y', 'api/x'])
      assert.equal(canonicalTarget(bad), undefined, bad);
  });
});

describe('requestTarget and canonicalHost', () => {
  const opts = (o: Partial<PathSettings>): PathSettings => ({ ...DEFAULT_PATHS, ...o });

  it('refuses by default what routers read in different ways', () => {
    for (const bad of [
      '/a%2Fb',
      '/a%5cb',
      '/a%00',
      '/a%09b',
      '/a%7f',
      '/a%252F',
      '/a;b',
      '/a/..;/b',
      '/a%3Bb',
      '/a#b',
      'http://u@h/x',
      'http:///x',
      'http://h\\x',
    ]) {
      assert.equal(canonicalTarget(bad), undefined, bad);
    }
    assert.equal(canonicalTarget('/a?x=%2F;#'), '/a?x=%2F;#', 'the query is not the path');
  });

  it('decodes, strips or keeps as the options say', () => {
    assert.equal(canonicalTarget('/x/..%2Fapi%5Cy', opts({ escapedSlashes: 'decode' })), '/api/y');
    assert.equal(canonicalTarget('/x/..;/api;v=1/y;z', opts({ semicolons: 'strip' })), '/api/y');
    assert.equal(canonicalTarget('/a;b%3B', opts({ semicolons: 'keep' })), '/a;b%3B');
    assert.equal(canonicalTarget('/a%252Fb', opts({ doubleEncoding: 'keep' })), '/a%252Fb');
  });

  it('an absolute-form target gives its authority, and is canonicalised by hand (not by WHATWG URL)', () => {
    assert.deepEqual(requestTarget('HTTP://Api.Example.com:80/x/../api/?q'), { target: '/api/?q', authority: 'Api.Example.com:80' });
    assert.deepEqual(requestTarget('http://h?q=1'), { target: '/?q=1', authority: 'h' });
    assert.deepEqual(requestTarget('/x'), { target: '/x', authority: undefined });
  });

  it('host names lose case, port and trailing dots', () => {
    for (const h of ['api.example.com', 'API.example.com.', 'api.example.com.:443', ' api.example.com:8080 ', 'api.example.com..'])
      assert.equal(canonicalHost(h), 'api.example.com', h);
    assert.equal(canonicalHost('[::1]:80'), '[::1]');
  });
});

describe('gateway: request targets', () => {
  const fixture = gatewayFixture();

  it('a path rule cannot be slipped with //, .. or %-escapes, and the upstream gets the path that was matched', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}/base/\nrules:\n  - name: api\n    match: { path: /api/ }\n    key: ip\n    policies: ["1/1m"]\n`,
    );
    assert.equal((await raw(g.url, '/api/x')).status, 200);
    for (const sneaky of ['/x/../api/x', '//api/x', '/%61pi/x', '/api/./x', '/API/../api/x']) {
      assert.equal((await raw(g.url, sneaky)).status, 429, sneaky);
    }
    const before = fixture.upstream.seen.length;
    assert.equal((await raw(g.url, '/free/./y//z?q=/../')).status, 200);
    assert.equal(fixture.upstream.seen[before]!.url, '/base/free/y/z?q=/../');
    // Out of the upstream's base path: refused, not forwarded.
    assert.equal((await raw(g.url, '/../etc/passwd')).status, 400);
    assert.equal(fixture.upstream.seen.length, before + 1);
  });

  it('the decision endpoint matches X-Original-URI canonically and refuses a status it cannot use', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nrules:\n  - name: api\n    match: { path: /api/ }\n    key: ip\n    policies: ["1/1m"]\n`,
    );
    const ask = (uri: string, query = '') => get(`${g.url}/_floodgate/decide${query}`, { headers: { 'x-original-uri': uri } });
    assert.equal((await ask('/api/x')).status, 204);
    assert.equal((await ask('//api/x')).status, 429);
    assert.equal((await ask('/..')).status, 400);
    const wrong = await ask('/api/x', '?status=999');
    assert.equal(wrong.status, 400);
    assert.match(wrong.body, /401 or 403/);
  });

  it("without an upstream, other paths answer 404 without spending anyone's quota", async () => {
    const g = await fixture.start('rules:\n  - name: api\n    key: header:x-api-key\n    policies: ["3/1m"]\n');
    const key = { 'x-api-key': 'b' };
    for (let i = 0; i < 4; i++) assert.equal((await get(`${g.url}/other`, { headers: key })).status, 404);
    const decided = await get(`${g.url}/_floodgate/decide`, { headers: { ...key, 'x-original-uri': '/other' } });
    assert.equal(decided.status, 204);
    assert.match(String(decided.headers.ratelimit), /r=2;/);
  });

  it('a port in use fails the start with LISTEN_FAILED naming the setting, and leaves nothing open', async () => {
    await assert.rejects(
      startGateway(`upstream: ${fixture.upstream.url}\nrules:\n  - name: all\n    key: ip\n    policies: ["1/1m"]\n`, {
        listen: { host: '127.0.0.1', port: fixture.upstream.port },
      }),
      (error: unknown) => {
        assert.equal((error as { code?: string }).code, 'FLOODGATE_LISTEN_FAILED');
        assert.match(
          (error as Error).message,
          /cannot listen on 127\.0\.0\.1:\d+ \(--listen, or listen in the config file\): EADDRINUSE, the port is in use/,
        );
        return true;
      },
    );
  });

  it('a request in flight when the drain starts is answered with Connection: close', async () => {
    const g = await startGateway(`upstream: ${fixture.upstream.url}\nrules:\n  - name: all\n    key: ip\n    policies: ["100/1m"]\n`);
    // A keep-alive client: without the drain it would be answered keep-alive too.
    const slow = raw(g.url, '/slow?ms=300', { connection: 'keep-alive' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const stopped = g.shutdown();
    const reply = await slow;
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.connection, 'close');
    await stopped;
  });
});
