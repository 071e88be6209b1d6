// Regressions of rule matching: case, HEAD, escaped separators, `;` parameters, double encoding, host spelling, absolute-form targets, HTTP/0.9 and pathPattern backtracking, against a real Express 5 upstream.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { expressApp, type RouterApp } from '../support/routers.js';
import { requestBytes, sendRaw } from '../support/raw.js';
import { gatewayFixture, startGateway } from '../support/harness.js';

const status = async (g: Gateway, line: string, headers: readonly string[] = [], host?: string): Promise<number> =>
  (await sendRaw(g.url, requestBytes(line, headers, host))).statuses[0] ?? 0;

describe('gateway: what a rule for /api/ matches', () => {
  let app: RouterApp;
  const gateways: Gateway[] = [];
  before(async () => {
    app = await expressApp();
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.shutdown()));
    await app.close();
  });
  const start = async (extra = '', match = '{ path: /api/, methods: [GET] }'): Promise<Gateway> => {
    const g = await startGateway(
      `upstream: ${app.url}\n${extra}rules:\n  - name: api\n    match: ${match}\n    key: ip\n    policies: ["1/1h"]\n`,
    );
    gateways.push(g);
    return g;
  };

  test('regression: /API/secret and /Api/Secret (upper case) are counted by a rule for /api/', async () => {
    const g = await start();
    assert.equal(await status(g, 'GET /api/secret HTTP/1.1'), 200);
    const before = app.hits.length;
    assert.equal(await status(g, 'GET /API/secret HTTP/1.1'), 429);
    assert.equal(await status(g, 'GET /Api/Secret HTTP/1.1'), 429);
    assert.equal(app.hits.length, before, 'Express must not have served them');
  });

  test('regression: HEAD /api/secret is counted by a rule for GET', async () => {
    const g = await start();
    assert.equal(await status(g, 'HEAD /api/secret HTTP/1.1'), 200);
    const before = app.hits.length;
    assert.equal(await status(g, 'GET /api/secret HTTP/1.1'), 429);
    assert.equal(await status(g, 'HEAD /api/secret HTTP/1.1'), 429);
    assert.equal(app.hits.length, before);
  });

  test('regression: %2F, %5C, %00, %252F and ; in the path are refused with 400 before the upstream', async () => {
    const g = await start();
    const before = app.hits.length;
    for (const target of [
      '/api%2Fx',
      '/api%2fx',
      '/x/..%2Fapi/x',
      '/api%5Cx',
      '/api/x%00',
      '/api%252Fx',
      '/x/%252e%252e/api/x',
      '/api;/x',
      '/api/..;/x',
      '/api;v=1/x',
    ]) {
      assert.equal(await status(g, `GET ${target} HTTP/1.1`), 400, target);
    }
    assert.equal(app.hits.length, before);
    // The quota was not touched by the refusals.
    assert.equal(await status(g, 'GET /api/secret HTTP/1.1'), 200);
  });

  test('paths: escapedSlashes decode and semicolons strip match and forward the path the upstream would read', async () => {
    const g = await start('paths: { escapedSlashes: decode, semicolons: strip }\n');
    assert.equal(await status(g, 'GET /api%2Fsecret HTTP/1.1'), 200);
    assert.equal(app.hits.at(-1)!.url, '/api/secret');
    assert.equal(await status(g, 'GET /api;v=1/secret HTTP/1.1'), 429);
    assert.equal(await status(g, 'GET /x/..;/api/secret HTTP/1.1'), 429);
  });

  test('paths: caseSensitive true and escapedSlashes keep match as written', async () => {
    const g = await start('paths: { caseSensitive: true, escapedSlashes: keep, doubleEncoding: keep }\n');
    assert.equal(await status(g, 'GET /api/secret HTTP/1.1'), 200);
    assert.equal(await status(g, 'GET /API/secret HTTP/1.1'), 200);
    // Not under /api/ as written, and Express does not route it there either.
    assert.equal(await status(g, 'GET /api%2Fx HTTP/1.1'), 404);
    assert.equal(await status(g, 'GET /api/x%2Fy HTTP/1.1'), 429);
    assert.equal(await status(g, 'GET /a%252Fb HTTP/1.1'), 404);
  });

  test('regression: a request line without an HTTP version (HTTP/0.9) is refused with 400', async () => {
    const g = await start();
    const before = app.hits.length;
    const reply = await sendRaw(g.url, 'GET /api/secret\r\n\r\n');
    assert.equal(reply.statuses[0], 400);
    assert.equal(app.hits.length, before);
  });
});

describe('gateway: host rules', () => {
  const fixture = gatewayFixture();
  const yaml = (url: string): string =>
    `upstream: ${url}\nrules:\n  - name: api\n    match: { host: api.example.com }\n    key: ip\n    policies: ["1/1h"]\n`;

  test('regression: a trailing dot, upper case or a port in Host does not defeat a host rule', async () => {
    const g = await fixture.start(yaml(fixture.upstream.url));
    assert.equal(await status(g, 'GET /x HTTP/1.1', [], 'api.example.com'), 200);
    for (const host of ['api.example.com.', 'API.Example.COM', 'api.example.com:80', 'api.example.com.:8080', 'api.example.com..']) {
      assert.equal(await status(g, 'GET /x HTTP/1.1', [], host), 429, host);
    }
  });

  test("regression: an absolute-form target's host is the one host rules match and the upstream is told", async () => {
    const g = await fixture.start(yaml(fixture.upstream.url));
    const before = fixture.upstream.seen.length;
    // Host says another name; RFC 9112 §3.2.2: the target's authority wins.
    assert.equal(await status(g, 'GET http://api.example.com/x HTTP/1.1', [], 'other.example.com'), 200);
    assert.equal(fixture.upstream.seen[before]!.headers['x-forwarded-host'], 'api.example.com');
    assert.equal(fixture.upstream.seen[before]!.url, '/x');
    assert.equal(await status(g, 'GET http://API.example.com./x HTTP/1.1', [], 'other.example.com'), 429);
    // The other way round: a target naming another host is not counted under api.example.com, and is forwarded as that host.
    assert.equal(await status(g, 'GET http://other.example.com/x HTTP/1.1', [], 'api.example.com'), 200);
    assert.equal(fixture.upstream.seen.at(-1)!.headers['x-forwarded-host'], 'other.example.com');
  });
});

describe('config: pathPattern', () => {
  const rule = (pattern: string): string =>
    `rules:\n  - name: r\n    match: { pathPattern: ${JSON.stringify(pattern)} }\n    key: ip\n    policies: ["1/1m"]\n`;

  test('regression: a pathPattern with a repeated group holding a repetition (catastrophic backtracking) is refused at load', async () => {
    for (const bad of ['^(a+)+$', '^(/[a-z]*)*$', '^(?:x|y+){2,}$', '^((ab)*c)+$']) {
      await assert.rejects(
        parseConfigText(rule(bad), 'p.yaml'),
        (error: unknown) => {
          assert.equal((error as { code?: string }).code, 'FLOODGATE_INVALID_CONFIG');
          assert.match((error as Error).message, /p\.yaml:3.*pathPattern.*exponential time/s);
          return true;
        },
        bad,
      );
    }
    for (const good of ['^/users/[0-9]+$', '^/(a|b)/x?$', '^/[a-z/]+$', '^/(ab)+$', '^/x{2}(y)?$', '^[(+*]+$']) {
      const settings = await parseConfigText(rule(good), 'p.yaml');
      assert.ok(settings.rules[0]!.match.pathPattern instanceof RegExp, good);
    }
  });

  test('config: paths options are validated', async () => {
    await assert.rejects(
      parseConfigText('paths: { escapedSlashes: allow }\n', 'p.yaml'),
      /p\.yaml:1.*escapedSlashes.*reject, decode, keep/s,
    );
    await assert.rejects(parseConfigText('paths: { nul: keep }\n', 'p.yaml'), /nul/);
    const s = await parseConfigText('paths: { semicolons: keep }\n', 'p.yaml');
    assert.deepEqual(s.paths, { caseSensitive: false, escapedSlashes: 'reject', semicolons: 'keep', doubleEncoding: 'reject' });
  });
});
