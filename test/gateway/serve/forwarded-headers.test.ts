// Which client headers reach a real upstream: identity and rewrite headers of untrusted peers stripped, X-Forwarded-For replaced or appended to by trust, a hop count never trusting the peer, proxy.stripHeaders, and the validation of the new proxy fields.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { ErrorCode } from '../../../src/core/errors.js';
import { gatewayFixture } from '../support/harness.js';

const fixture = gatewayFixture();

const SPOOFED: Record<string, string> = {
  'x-real-ip': '203.0.113.7',
  forwarded: 'for=203.0.113.7;proto=https',
  'x-original-url': '/admin',
  'x-rewrite-url': '/admin',
  'x-http-method-override': 'DELETE',
  'x-forwarded-prefix': '/internal',
  'true-client-ip': '203.0.113.7',
  'x-forwarded-for': '203.0.113.7',
  'x-forwarded-proto': 'https',
  'x-forwarded-host': 'admin.example.test',
  'x-app': 'kept',
};

/** What the upstream saw of one request carrying the spoofed headers. */
async function echoed(yaml: string, headers: Record<string, string> = SPOOFED): Promise<Record<string, string | undefined>> {
  const g = await fixture.start(`upstream: ${fixture.upstream.url}\n${yaml}`);
  const reply = await get(`${g.url}/echo`, { headers });
  assert.equal(reply.status, 200);
  return (JSON.parse(reply.body) as { headers: Record<string, string | undefined> }).headers;
}

describe('gateway: forwarded headers', () => {
  it('regression: identity headers from an untrusted client (X-Real-IP, Forwarded, X-Original-URL, X-HTTP-Method-Override, ...) are not forwarded', async () => {
    const h = await echoed('rules: []');
    for (const name of [
      'x-real-ip',
      'forwarded',
      'x-original-url',
      'x-rewrite-url',
      'x-http-method-override',
      'x-forwarded-prefix',
      'true-client-ip',
    ]) {
      assert.equal(h[name], undefined, name);
    }
    assert.equal(h['x-forwarded-for'], '127.0.0.1', 'replaced by the peer, not appended to');
    assert.equal(h['x-forwarded-proto'], 'http');
    assert.match(String(h['x-forwarded-host']), /^127\.0\.0\.1:\d+$/);
    assert.equal(h['x-app'], 'kept');
  });

  it('a trusted proxy (trustProxy CIDRs) keeps its headers, and its X-Forwarded-For is appended to', async () => {
    const h = await echoed('trustProxy: [loopback]\nrules: []');
    assert.equal(h['x-real-ip'], '203.0.113.7');
    assert.equal(h['x-original-url'], '/admin');
    assert.equal(h['x-forwarded-for'], '203.0.113.7, 127.0.0.1');
    assert.equal(h['x-forwarded-proto'], 'https');
    assert.equal(h['x-forwarded-host'], 'admin.example.test');
  });

  it('regression: trustProxy as a hop count does not make a direct client trusted for forwarded headers', async () => {
    const h = await echoed('trustProxy: 1\nrules: []', { ...SPOOFED, 'x-forwarded-for': '198.51.100.1, 203.0.113.7' });
    assert.equal(h['x-real-ip'], undefined);
    assert.equal(h['x-original-url'], undefined);
    assert.equal(h['x-forwarded-proto'], 'http');
    assert.match(String(h['x-forwarded-host']), /^127\.0\.0\.1:\d+$/);
    // The one entry the hop count believes (the address the IP key uses) stays; anything further left is dropped.
    assert.equal(h['x-forwarded-for'], '203.0.113.7, 127.0.0.1');
  });

  it('proxy.stripHeaders sets the list, or false forwards them all', async () => {
    const custom = await echoed('proxy: { stripHeaders: [x-app] }\nrules: []');
    assert.equal(custom['x-app'], undefined);
    assert.equal(custom['x-real-ip'], '203.0.113.7', 'the list replaces the default one');
    const none = await echoed('proxy: { stripHeaders: false }\nrules: []');
    assert.equal(none['x-original-url'], '/admin');
    assert.equal(none['x-forwarded-for'], '127.0.0.1', 'X-Forwarded-For still names the peer');
  });

  it('refuses malformed proxy fields of the new kinds, naming file, line and field', async () => {
    const cases: Array<[string, RegExp]> = [
      ['proxy:\n  stripHeaders: x-real-ip\n', /^p\.yaml:2:\d+: proxy\.stripHeaders: must be a list of header names, or false/],
      ['proxy:\n  stripHeaders: ["bad header"]\n', /^p\.yaml:2:\d+: proxy\.stripHeaders: must be a header name/],
      ['proxy:\n  requestBuffer: -1\n', /^p\.yaml:2:\d+: proxy\.requestBuffer: must be a whole number/],
      ['proxy:\n  minBodyRate: fast\n', /^p\.yaml:2:\d+: proxy\.minBodyRate: must be a whole number/],
      ['proxy:\n  queueTimeout: soon\n', /^p\.yaml:2:\d+: proxy\.queueTimeout: /],
      ['proxy:\n  upgrades: websocket\n', /^p\.yaml:2:\d+: proxy\.upgrades: must be a list of upgrade protocols/],
    ];
    for (const [yaml, message] of cases) {
      await assert.rejects(parseConfigText(yaml, 'p.yaml'), (error: Error & { code?: string }) => {
        assert.equal(error.code, ErrorCode.INVALID_CONFIG);
        assert.match(error.message, message);
        return true;
      });
    }
  });
});
