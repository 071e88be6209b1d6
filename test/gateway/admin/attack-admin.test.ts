// Attacks on the admin API's token and paths on real sockets: every way to send (or not send) the bearer token, every path trick to reach the API or the stats from the proxy port, and key names that try to escape their segment, their rule, or the key the rules count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { get } from '../../http/support/http.js';
import { gatewayFixture, writeTemp } from '../support/harness.js';
import { requestBytes, sendRaw } from '../support/raw.js';

const fixture = gatewayFixture();
const TOKEN = 'attack-admin-token-0123456789abcdef';
const AUTH = `Authorization: Bearer ${TOKEN}`;

const CONFIG = (upstream: string) =>
  `upstream: ${upstream}\nadmin:\n  listen: 127.0.0.1:0\n  token: ${TOKEN}\n` +
  'rules:\n' +
  '  - name: api\n    match: { path: /api/ }\n    key: { header: x-api-key }\n    policies:\n      - { limit: 2, window: 1h }\n' +
  '  - name: other\n    match: { path: /other/ }\n    key: { header: x-api-key }\n    policies:\n      - { limit: 2, window: 1h }\n';

/** The raw answer to one request written exactly as given. */
const raw = (base: string, line: string, headers: readonly string[] = []) => sendRaw(base, requestBytes(line, headers));

interface Answer {
  status: number;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The admin API, with the token, as JSON. */
async function api(base: string, method: string, path: string, body?: string): Promise<Answer> {
  const r = await sendRaw(
    base,
    `${method} ${path} HTTP/1.1\r\nHost: x\r\n${AUTH}\r\nConnection: close\r\n` +
      (body === undefined ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
  );
  // sendRaw reads latin1; the body is UTF-8 JSON.
  const text = Buffer.from(r.text.slice(r.text.indexOf('\r\n\r\n') + 4), 'latin1').toString('utf8');
  return { status: r.statuses[0] ?? 0, json: text === '' ? undefined : JSON.parse(text) };
}

/** A proxied request's status for `key` (sent as latin1 bytes, as a client may) on `path`. */
async function proxied(base: string, key: string, path = '/api/x'): Promise<number> {
  return (await raw(base, `GET ${path} HTTP/1.1`, [`X-Api-Key: ${key}`])).statuses[0] ?? 0;
}

describe('attack: the bearer token', () => {
  const cases: Array<[string, string[], number]> = [
    ['no Authorization', [], 401],
    ['an empty Bearer', ['Authorization: Bearer '], 401],
    ['Bearer alone', ['Authorization: Bearer'], 401],
    ['a wrong token of the same length', [`Authorization: Bearer ${'x'.repeat(TOKEN.length)}`], 401],
    ['the token less its last character', [`Authorization: Bearer ${TOKEN.slice(0, -1)}`], 401],
    ['the token and one more character', [`Authorization: Bearer ${TOKEN}x`], 401],
    ['the token in upper case', [`Authorization: Bearer ${TOKEN.toUpperCase()}`], 401],
    ['the token then a second word', [`Authorization: Bearer ${TOKEN} ${TOKEN}`], 401],
    ['the token without a scheme', [`Authorization: ${TOKEN}`], 401],
    ['Basic with the token as password', [`Authorization: Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}`], 401],
    ['Bearer glued to the token', [`Authorization: Bearer${TOKEN}`], 401],
    ['the token in another header', [`X-Admin-Token: ${TOKEN}`, `X-Api-Key: ${TOKEN}`, `Cookie: token=${TOKEN}`], 401],
    ['a 15 000-character token', [`Authorization: Bearer ${'a'.repeat(15_000)}`], 401],
    ['a wrong Authorization before the right one (node keeps the first)', ['Authorization: Bearer wrong', AUTH], 401],
    // The scheme is case-insensitive (RFC 9110 §11.1) and spaces around the token are whitespace, not part of it.
    ['bearer in lower case', [`Authorization: bearer ${TOKEN}`], 200],
    ['BEARER in upper case', [`Authorization: BEARER ${TOKEN}`], 200],
    ['a tab and trailing spaces', [`Authorization: Bearer\t${TOKEN}   `], 200],
  ];
  for (const [what, headers, status] of cases)
    it(`${status === 200 ? 'accepted' : 'holds'}: ${what} → ${status} on the API and the stats`, async () => {
      const g = await fixture.start(CONFIG(fixture.upstream.url));
      for (const path of ['/admin/rules', '/admin/stats', '/admin/limited', '/admin/rules/api/keys/k']) {
        const r = await raw(g.adminUrl!, `GET ${path} HTTP/1.1`, headers);
        assert.deepEqual(r.statuses, [status], `${path}: ${r.text.slice(0, 200)}`);
        if (status === 401) assert.match(r.text, /WWW-Authenticate: Bearer realm="floodgate admin"/);
      }
    });

  it('holds: the token in the query string, under any usual name, is refused (it would end in logs and histories)', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    for (const name of ['token', 'access_token', 'bearer', 'auth', 'authorization'])
      for (const path of ['/admin/rules', '/admin/stats'])
        assert.deepEqual((await raw(g.adminUrl!, `GET ${path}?${name}=${TOKEN} HTTP/1.1`)).statuses, [401], `${path}?${name}=`);
  });

  it('holds: a write needs the token before anything else: without it, no 405, 404 or 400 tells what exists', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    for (const line of [
      'POST /admin/rules/api/keys/k/block HTTP/1.1',
      'DELETE /admin/rules HTTP/1.1',
      'GET /admin/rules/nope/keys/k HTTP/1.1',
      'GET /admin/nothing-here HTTP/1.1',
      'GET /admin/rules/api/keys/%E9 HTTP/1.1',
      'OPTIONS /admin/rules/api/keys/k/reset HTTP/1.1',
      'TRACE /admin/stats HTTP/1.1',
    ])
      assert.deepEqual((await raw(g.adminUrl!, line)).statuses, [401], line);
  });

  it('holds: on the admin listener itself, an upgrade (websocket, h2c), CONNECT, HTTP/1.0 or an absolute-form target gets no tunnel and no data without the token', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const admin = new URL(g.adminUrl!).host;
    const tries: Array<[string, number[]]> = [
      [
        'GET /admin/rules HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
        [401],
      ],
      [
        'GET /admin/stats HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
        [401],
      ],
      [`CONNECT ${admin} HTTP/1.1\r\nHost: ${admin}\r\n\r\nGET /admin/rules HTTP/1.1\r\nHost: x\r\n\r\n`, []],
      ['GET /admin/rules HTTP/1.0\r\n\r\n', [401]],
      [`GET http://${admin}/admin/rules HTTP/1.1\r\nHost: ${admin}\r\n\r\n`, [404]],
      ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', [400]],
    ];
    for (const [bytes, statuses] of tries) {
      const r = await sendRaw(g.adminUrl!, bytes, 1500);
      assert.deepEqual(r.statuses, statuses, bytes.split('\r\n')[0]);
      assert.doesNotMatch(r.text, /"rules":|101 Switching/, bytes.split('\r\n')[0]);
    }
  });

  it('holds: a cross-origin preflight gets no CORS grant, so no other site can send the token-bearing POST from a browser', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const r = await raw(g.adminUrl!, 'OPTIONS /admin/rules/api/keys/k/reset HTTP/1.1', [
      'Origin: https://evil.example',
      'Access-Control-Request-Method: POST',
      'Access-Control-Request-Headers: authorization',
    ]);
    assert.doesNotMatch(r.text, /access-control-allow/i);
  });

  it('holds: an empty, blank, short or spaced token, in the config or its file, is a config error, never an API that takes an empty token', async () => {
    for (const token of ['', '\n', '   ', '\r\n', 'short-token\n', `${TOKEN.slice(0, 8)} ${TOKEN.slice(8)}`, `${TOKEN}\n\n`]) {
      const inline = `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  token: ${JSON.stringify(token)}\nrules: []\n`;
      await assert.rejects(parseConfigText(inline, 'test.yaml', { watch: false }), /token/, `token ${JSON.stringify(token)}`);
      const file = writeTemp('admin-token', token);
      const fromFile = `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  tokenFile: ${file}\nrules: []\n`;
      await assert.rejects(parseConfigText(fromFile, 'test.yaml', { watch: false }), /token/, `file ${JSON.stringify(token)}`);
    }
  });

  it('holds (restart needed): a reload with a changed token keeps the running token and says so; rotating a leaked token takes a restart', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const g = await fixture.start(CONFIG(fixture.upstream.url), {}, logs);
    const next = await parseConfigText(CONFIG(fixture.upstream.url).replace(TOKEN, `${TOKEN}-rotated`), 'test.yaml', {
      listen: { host: '127.0.0.1', port: 0 },
      watch: false,
    });
    g.apply(next);
    assert.ok(logs.some((l) => Array.isArray(l.settings) && (l.settings as string[]).includes('admin token')));
    assert.deepEqual((await raw(g.adminUrl!, 'GET /admin/rules HTTP/1.1', [AUTH])).statuses, [200]);
    assert.deepEqual((await raw(g.adminUrl!, 'GET /admin/rules HTTP/1.1', [`${AUTH}-rotated`])).statuses, [401]);
  });

  it.todo(
    'a reload with a new token file revokes the old token at once: the token is fixed when the admin API is built (admin-api.ts, which is being extended in parallel); the reload warns that it needs a restart',
  );
});

describe('attack: reaching the admin API or the stats from the proxy port', () => {
  const API_SIGNS = [/floodgate admin/, /"rules":\[\{"name"/, /"decisions":\[/, /"policies":\[\{"policy"/, /floodgate dashboard/];

  it('holds: no path, encoding, method, request form, Host or upgrade reaches them; each is forwarded upstream or refused', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const admin = new URL(g.adminUrl!).host;
    const paths = [
      '/admin/rules',
      '/admin/stats',
      '/admin/dashboard',
      '/ADMIN/rules',
      '/Admin/Stats',
      '/admin%2Frules',
      '/admin%2fstats',
      '/%61dmin/rules',
      '/%2561dmin/rules',
      '/%2e%2e/admin/rules',
      '/x/%2e%2e/admin/stats',
      '/x/../admin/rules',
      '/admin/../admin/rules',
      '//admin/rules',
      '/./admin/stats',
      '/admin;/rules',
      '/_floodgate/admin/rules',
      '/_floodgate/../admin/stats',
      '/admin/rules/api/keys/k/reset',
      '/metrics',
    ];
    const tried: string[] = [];
    for (const path of paths) {
      tried.push(`GET ${path} HTTP/1.1`, `POST ${path} HTTP/1.1`, `GET ${path} HTTP/1.0`);
      tried.push(`GET http://${admin}${path} HTTP/1.1`);
    }
    for (const line of tried) {
      // With the admin listener's own address as Host too: the proxy must not route by it.
      for (const host of ['api.example.com', admin, 'localhost']) {
        const r = await sendRaw(g.url, requestBytes(line, [AUTH, 'X-Api-Key: k'], host));
        for (const sign of API_SIGNS) assert.doesNotMatch(r.text, sign, `${line} (Host: ${host}) was answered by the admin side`);
        assert.ok(r.statuses.length > 0, `${line}: no answer`);
      }
    }
    // Methods and upgrades that would open a tunnel to the admin port.
    for (const bytes of [
      `CONNECT ${admin} HTTP/1.1\r\nHost: ${admin}\r\n${AUTH}\r\n\r\nGET /admin/rules HTTP/1.1\r\nHost: x\r\n${AUTH}\r\n\r\n`,
      `GET /admin/rules HTTP/1.1\r\nHost: ${admin}\r\n${AUTH}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
      `GET /admin/stats HTTP/1.1\r\nHost: ${admin}\r\n${AUTH}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`,
      `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`,
      `OPTIONS * HTTP/1.1\r\nHost: ${admin}\r\n\r\n`,
      `TRACE /admin/rules HTTP/1.1\r\nHost: ${admin}\r\n${AUTH}\r\n\r\n`,
    ]) {
      const r = await sendRaw(g.url, bytes, 1500);
      for (const sign of API_SIGNS) assert.doesNotMatch(r.text, sign, `${bytes.split('\r\n')[0]} was answered by the admin side`);
    }
    // What reached the upstream went to the upstream's own paths, never to the admin port.
    assert.ok(fixture.upstream.seen.length > 0);
  });
});

describe('attack: the admin listener from a browser on another site', () => {
  it('holds: /metrics, /healthz, /readyz and the dashboard page carry no CORS grant and no secret a rebound page could read', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    for (const path of ['/metrics', '/healthz', '/readyz', '/admin/dashboard']) {
      const r = await raw(g.adminUrl!, `GET ${path} HTTP/1.1`, ['Origin: https://evil.example']);
      assert.deepEqual(r.statuses, [200], path);
      assert.doesNotMatch(r.text, /access-control-allow/i, path);
      assert.ok(!r.text.includes(TOKEN), path);
    }
  });

  it('holds with admin.hosts: a DNS-rebinding page (its own name as Host) gets 421 on every admin path; addresses, localhost and the listed names are answered', async () => {
    const config = CONFIG(fixture.upstream.url).replace(
      `  token: ${TOKEN}\n`,
      `  token: ${TOKEN}\n  hosts: [floodgate-admin.internal, "*.monitoring.internal"]\n`,
    );
    const g = await fixture.start(config);
    const port = new URL(g.adminUrl!).port;
    for (const path of ['/metrics', '/healthz', '/readyz', '/admin/dashboard', '/admin/rules']) {
      for (const host of [
        `evil.example:${port}`,
        'evil.example',
        'EVIL.example.',
        `monitoring.internal:${port}`,
        `floodgate-admin.internal.evil.example:${port}`,
        `x${'.monitoring.internal'.slice(1)}.evil`,
        `127.0.0.1.evil.example`,
        'xmonitoring.internal',
      ]) {
        const r = await sendRaw(g.adminUrl!, requestBytes(`GET ${path} HTTP/1.1`, [AUTH], host));
        assert.deepEqual(r.statuses, [421], `${path} (Host: ${host})`);
        assert.doesNotMatch(r.text, /floodgate_|"rules"|"status":"ready"/, `${path} (Host: ${host}) leaked`);
      }
      for (const host of [
        `127.0.0.1:${port}`,
        `localhost:${port}`,
        'LOCALHOST',
        `floodgate-admin.internal:${port}`,
        'FLOODGATE-ADMIN.internal.',
        `prom.monitoring.internal:${port}`,
        `[::1]:${port}`,
      ]) {
        const r = await sendRaw(g.adminUrl!, requestBytes(`GET ${path} HTTP/1.1`, [AUTH], host));
        assert.deepEqual(r.statuses, [200], `${path} (Host: ${host})`);
      }
    }
  });

  it('holds: admin.hosts entries that are not host names are refused at load, naming the entry', async () => {
    for (const bad of ['[]', '[http://x.internal]', '["x.internal:9090"]', '["*"]', '["a b"]', '"x.internal"']) {
      await assert.rejects(
        parseConfigText(CONFIG(fixture.upstream.url).replace(`  token: ${TOKEN}\n`, `  token: ${TOKEN}\n  hosts: ${bad}\n`), 'test.yaml', {
          listen: { host: '127.0.0.1', port: 0 },
          watch: false,
        }),
        /admin\.hosts/,
        bad,
      );
    }
  });
});

describe('attack: key names in the admin API paths', () => {
  it('regression: a key over 128 bytes is blocked, inspected and reset as the rules count it (by its hash); it was accepted and touched nothing', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    for (const key of ['k'.repeat(129), 'L'.repeat(10_000)]) {
      const blocked = await api(g.adminUrl!, 'POST', `/admin/rules/api/keys/${key}/block`, '{"duration":"forever"}');
      assert.equal(blocked.status, 200);
      assert.match(blocked.json.key, /^sha256:/, 'the answer names the key as counted');
      assert.equal(await proxied(g.url, key), 429, 'the block holds on the proxy port');
      const seen = await api(g.adminUrl!, 'GET', `/admin/rules/api/keys/${encodeURIComponent(key)}`);
      assert.equal(seen.json.policies[0].refusedForMs, 'forever');
      assert.equal((await api(g.adminUrl!, 'POST', `/admin/rules/api/keys/${key}/reset`)).status, 200);
      assert.equal(await proxied(g.url, key), 200, 'the reset holds on the proxy port');
    }
    // The hash shown by /admin/limited acts on the same key.
    const key = 'h'.repeat(300);
    for (let i = 0; i < 3; i += 1) await proxied(g.url, key);
    const limited = await api(g.adminUrl!, 'GET', '/admin/limited');
    const listed = limited.json.rules.find((r: { rule: string }) => r.rule === 'api').keys[0].key as string;
    assert.match(listed, /^sha256:/);
    assert.equal((await api(g.adminUrl!, 'POST', `/admin/rules/api/keys/${encodeURIComponent(listed)}/reset`)).status, 200);
    assert.equal(await proxied(g.url, key), 200);
  });

  it('holds: an encoded slash, a NUL, a latin1 byte, "..", and keys named like routes each stay one key and touch no other', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const block = (key: string) => api(g.adminUrl!, 'POST', `/admin/rules/api/keys/${encodeURIComponent(key)}/block`, '{"duration":"1h"}');
    for (const key of ['a/b', 'reset', 'x/reset', '..', 'rules', 'keys', '%2F', 'é', 'a?b=c', 'a#b']) {
      const r = await block(key);
      assert.equal(r.status, 200, key);
      assert.equal(r.json.key, key);
      // Header values travel as latin1: é is the single byte 0xE9, as the gateway reads it.
      assert.equal(await proxied(g.url, key), 429, `${key} blocked`);
    }
    for (const other of ['a', 'b', 'x', 'k', '.', '%2F'.toLowerCase(), 'Ã©', 'a?b=d'])
      assert.equal(await proxied(g.url, other), 200, `${other} untouched`);
    // A NUL cannot travel in a header, but the API takes it as a key of its own, touching no neighbour.
    assert.equal((await api(g.adminUrl!, 'POST', '/admin/rules/api/keys/n%00m/block', '{"duration":"1h"}')).status, 200);
    assert.equal(await proxied(g.url, 'n'), 200);
    assert.equal(await proxied(g.url, 'nm'), 200);
    // Unencoded, a slash makes another route, refused rather than taken as a key.
    assert.equal((await api(g.adminUrl!, 'POST', '/admin/rules/api/keys/p/q/block')).status, 404);
    assert.equal((await api(g.adminUrl!, 'GET', '/admin/rules/api/keys/p/q/r/s')).status, 404);
    assert.equal((await api(g.adminUrl!, 'GET', '/admin/rules/api/keys/')).status, 400);
    assert.equal((await api(g.adminUrl!, 'GET', '/admin/rules/api/keys/%')).status, 400);
    assert.equal(await proxied(g.url, 'p'), 200);
  });

  it("holds: a block or reset of one rule's key touches no other rule's count of the same key", async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    assert.equal((await api(g.adminUrl!, 'POST', '/admin/rules/api/keys/shared/block', '{"duration":"forever"}')).status, 200);
    assert.equal(await proxied(g.url, 'shared', '/api/x'), 429);
    assert.equal(await proxied(g.url, 'shared', '/other/x'), 200, 'the other rule does not see the block');
    assert.equal(await proxied(g.url, 'shared', '/other/x'), 200);
    assert.equal(await proxied(g.url, 'shared', '/other/x'), 429, 'the other rule counts on its own');
    assert.equal((await api(g.adminUrl!, 'POST', '/admin/rules/other/keys/shared/reset')).status, 200);
    assert.equal(await proxied(g.url, 'shared', '/other/x'), 200);
    assert.equal(await proxied(g.url, 'shared', '/api/x'), 429, "the other rule's reset leaves this block");
    // Rule names are matched exactly: no case folding, no prefix.
    for (const rule of ['API', 'ap', 'api%20', 'api%00', '%2e%2e', '%2Fapi'])
      assert.equal((await api(g.adminUrl!, 'POST', `/admin/rules/${rule}/keys/shared/unblock`)).status, 404, rule);
    assert.equal(await proxied(g.url, 'shared', '/api/x'), 429);
  });

  it('holds: the dashboard and stats answer only at their exact paths on the admin listener', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    for (const path of ['/admin/stats/', '/admin//stats', '/admin/%73tats', '/ADMIN/STATS', '/admin/stats%00'])
      assert.doesNotMatch((await raw(g.adminUrl!, `GET ${path} HTTP/1.1`)).text, /"decisions"/, path);
    assert.equal((await get(`${g.adminUrl!}/admin/stats?x=1`)).status, 401);
  });
});
