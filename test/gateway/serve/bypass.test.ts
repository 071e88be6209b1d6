// The bypass suite: 60+ raw request variants against a route limited to 1/1h, in front of real Express 5, Fastify 5, Koa and node:http apps; none may reach the limited handler uncounted. Prints the table.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { startGateway } from '../support/harness.js';
import { requestBytes, sendRaw } from '../support/raw.js';
import { ROUTER_APPS, type RouterApp } from '../support/routers.js';

/** A variant: a name and the bytes sent. */
type Variant = readonly [name: string, bytes: string];

const get = (target: string, headers: readonly string[] = [], method = 'GET'): string =>
  requestBytes(`${method} ${target} HTTP/1.1`, headers);

/** Every variant aims at GET /api/… in some disguise. */
const VARIANTS: readonly Variant[] = [
  ['plain', get('/api/secret')],
  ['upper /API/', get('/API/secret')],
  ['mixed /Api/Secret', get('/Api/Secret')],
  ['upper /aPI/', get('/aPI/secret')],
  ['HEAD', get('/api/secret', [], 'HEAD')],
  ['OPTIONS', get('/api/secret', [], 'OPTIONS')],
  ['POST', get('/api/secret', ['Content-Length: 0'], 'POST')],
  ['lower-case method', get('/api/secret', [], 'get')],
  ['%61pi', get('/%61pi/secret')],
  ['%41PI', get('/%41PI/secret')],
  ['%2F', get('/api%2Fsecret')],
  ['%2f', get('/api%2fsecret')],
  ['..%2F', get('/x/..%2Fapi/secret')],
  ['%252F', get('/api%252Fsecret')],
  ['%252e%252e', get('/x/%252e%252e/api/secret')],
  ['%5C', get('/api%5Csecret')],
  ['..%5C', get('/x/..%5Capi/secret')],
  ['%00 in segment', get('/api/secret%00')],
  ['%00 before', get('/api%00/secret')],
  ['%2e%2e', get('/x/%2e%2e/api/secret')],
  ['%2E%2E', get('/x/%2E%2E/api/secret')],
  ['.%2e', get('/x/.%2e/api/secret')],
  ['%2e', get('/%2e/api/secret')],
  ['dot segment', get('/x/../api/secret')],
  ['./', get('/./api/secret')],
  ['/api/./', get('/api/./secret')],
  ['climb above root', get('/../api/secret')],
  ['; after prefix', get('/api;/secret')],
  ['..;', get('/api/..;/api/secret')],
  ['x/..;/', get('/x/..;/api/secret')],
  ['matrix param', get('/api;v=1/secret')],
  ['; in last segment', get('/api/secret;x')],
  ['%3B', get('/api%3B/secret')],
  ['//api', get('//api/secret')],
  ['/api//', get('/api//secret')],
  ['///', get('///api///secret')],
  ['backslash', get('/api\\secret')],
  ['leading backslash', get('\\api/secret')],
  ['trailing dot segment', get('/api./secret')],
  ['trailing %20', get('/api%20/secret')],
  ['trailing %09', get('/api%09/secret')],
  ['fragment', get('/api/secret#frag')],
  ['fragment hides ..', get('/x#/../api/secret')],
  ['query ?', get('/api/secret?x=1')],
  ['query /../', get('/api/secret?/../free')],
  ['absolute http', get('http://api.example.com/api/secret')],
  ['absolute HTTP upper', get('HTTP://api.example.com/API/secret')],
  ['absolute with ..', get('http://api.example.com/x/../api/secret')],
  ['absolute backslash', get('http://api.example.com\\api/secret')],
  ['absolute userinfo', get('http://u@api.example.com/api/secret')],
  ['absolute https', get('https://api.example.com/api/secret')],
  ['asterisk form', get('*')],
  ['authority form', requestBytes('CONNECT api.example.com:80 HTTP/1.1')],
  ['HTTP/0.9 line', 'GET /api/secret\r\n\r\n'],
  ['HTTP/1.0 no Host', 'GET /api/secret HTTP/1.0\r\n\r\n'],
  ['Upgrade h2c', get('/api/secret', ['Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA', 'Connection: Upgrade, HTTP2-Settings'])],
  [
    'Upgrade websocket',
    get('/api/secret', ['Upgrade: websocket', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13']),
  ],
  ['Upgrade foo', get('/api/secret', ['Upgrade: foo'])],
  ['X-Original-URL', get('/free', ['X-Original-URL: /api/secret'])],
  ['X-Rewrite-URL', get('/free', ['X-Rewrite-URL: /api/secret'])],
  ['X-HTTP-Method-Override', get('/api/secret', ['X-HTTP-Method-Override: PUT', 'Content-Length: 0'], 'POST')],
  ['X-Forwarded-Prefix', get('/secret', ['X-Forwarded-Prefix: /api'])],
  ['X-Forwarded-For spoof', get('/api/secret', ['X-Forwarded-For: 203.0.113.9'])],
  ['X-Real-IP spoof', get('/api/secret', ['X-Real-IP: 203.0.113.9'])],
  ['very long path', get(`/api/${'a'.repeat(8000)}`)],
  ['very long prefix junk', get(`/${'x/'.repeat(2000)}${'../'.repeat(2000)}api/secret`)],
  [
    'TE+CL smuggle',
    get('/free', ['Content-Length: 4', 'Transfer-Encoding: chunked'], 'POST').replace(
      /\r\n\r\n$/,
      `\r\n\r\n0\r\n\r\n${get('/api/secret')}`,
    ),
  ],
  ['pipelined', get('/free').replace('Connection: close\r\n', '') + get('/api/secret')],
  ['tab in target', get('/api/\tsecret')],
  ['absolute, Host differs', requestBytes('GET http://api.example.com/api/secret HTTP/1.1', [], 'other.example.com')],
];

/** One row of the printed table. */
interface Row {
  app: string;
  variant: string;
  statuses: string;
  reached: boolean;
  verdict: string;
}

describe('bypass suite: GET /api/ limited to 1/1h', () => {
  for (const makeApp of ROUTER_APPS) {
    describe(makeApp.name.replace(/App$/, ''), () => {
      let app: RouterApp;
      let gateway: Gateway;
      const rows: Row[] = [];
      before(async () => {
        app = await makeApp();
        gateway = await startGateway(
          `upstream: ${app.url}\nrules:\n  - name: api\n    match: { path: /api/, methods: [GET] }\n    key: ip\n    policies: ["1/1h"]\n`,
        );
      });
      after(async () => {
        await gateway.shutdown();
        await app.close();
      });

      test(`no variant reaches the limited handler uncounted (${VARIANTS.length} variants)`, async (t) => {
        assert.ok(VARIANTS.length >= 60);
        // The one request the limit admits: after it, every variant the app would route to the handler must be refused.
        const first = await sendRaw(gateway.url, get('/api/secret'));
        assert.equal(first.statuses[0], 200);
        assert.equal(app.hits.length, 1);
        for (const [variant, bytes] of VARIANTS) {
          const before = app.hits.length;
          const reply = await sendRaw(gateway.url, bytes);
          const reached = app.hits.length > before;
          const statuses = reply.statuses.join('+') || 'closed';
          const verdict = reached
            ? 'BYPASS'
            : reply.statuses.some((s) => s === 429)
              ? 'counted (429)'
              : reply.statuses.length === 0 || reply.statuses.every((s) => s === 400)
                ? 'refused'
                : 'not routed to handler';
          rows.push({ app: app.name, variant, statuses, reached, verdict });
        }
        const table = [
          'app        | variant                  | gateway status | reached handler | verdict',
          ...rows.map(
            (r) =>
              `${r.app.padEnd(10)} | ${r.variant.padEnd(24)} | ${r.statuses.padEnd(14)} | ${String(r.reached).padEnd(15)} | ${r.verdict}`,
          ),
        ].join('\n');
        console.log(`\n${table}\n`);
        t.diagnostic(`${app.name}: ${rows.filter((r) => r.verdict === 'BYPASS').length} bypasses of ${rows.length}`);
        assert.deepEqual(
          rows.filter((r) => r.reached).map((r) => r.variant),
          [],
          `${app.name}: these reached the limited handler uncounted`,
        );
      });

      test('the decision endpoint refuses or counts the same variants given as X-Original-URI', async (t) => {
        // Targets the proxy counted or refused (GET requests, no header tricks) must not be admitted when nginx asks about them.
        const asked = VARIANTS.filter(
          ([name, bytes], i) =>
            bytes.startsWith('GET ') &&
            !bytes.includes('\t') &&
            rows[i]!.verdict !== 'not routed to handler' &&
            !/^(pipelined|Upgrade|X-|HTTP\/|absolute, Host)/.test(name),
        );
        const ask = async (uri: string): Promise<number> =>
          (await sendRaw(gateway.url, requestBytes('GET /_floodgate/decide HTTP/1.1', [`X-Original-URI: ${uri}`]))).statuses[0] ?? 0;
        const allowed: string[] = [];
        for (const [name, bytes] of asked) {
          const uri = /^\S+ (\S+)/.exec(bytes)![1]!;
          if ((await ask(uri)) === 204) allowed.push(name);
        }
        t.diagnostic(`${app.name}: ${asked.length} targets asked through the decision endpoint`);
        assert.deepEqual(allowed, []);
      });
    });
  }
});
