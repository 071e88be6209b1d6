// The admin API on the admin listener: bearer token, every endpoint on real sockets, nothing of it on the proxy port, and a most-limited table that stays bounded under a flood of keys.
import assert from 'node:assert/strict';
import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { LimitedKeys, LIMITED_MINUTES, LIMITED_TABLE_SIZE } from '../../../src/gateway/admin/limited-keys.js';
import { adminBlock } from '../support/admin.js';
import { gatewayFixture, serveCli, stopCli, writeTemp } from '../support/harness.js';

const fixture = gatewayFixture();
const TOKEN = 'test-admin-token-0123456789abcdef';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One request with the path sent exactly as written (no URL normalisation), an optional bearer token and JSON body. */
function call(
  base: string,
  method: string,
  path: string,
  options: { token?: string | undefined; body?: string; headers?: Record<string, string>; agent?: Agent } = {},
): Promise<Answer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const req = request({ host: url.hostname, port: url.port, method, path, headers, agent: options.agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json });
      });
    });
    req.setTimeout(5000, () => req.destroy(new Error(`${method} ${path} hung`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

const CONFIG = (upstream: string, admin = adminBlock(TOKEN)) =>
  `upstream: ${upstream}\n${admin}rules:\n` +
  `  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { name: burst, limit: 3, window: 1h }\n      - { limit: 100, window: 1d, blockDuration: 1h }\n`;

describe('gateway: admin API', () => {
  it('GET /admin/rules lists the loaded rules: name, match, key, policies, cost, concurrency, wait', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const r = await call(g.adminUrl!, 'GET', '/admin/rules', { token: TOKEN });
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.headers['cache-control'], 'no-store');
    assert.deepEqual(r.json.rules[0], {
      name: 'api',
      shadow: false,
      final: false,
      match: {},
      key: { kind: 'header', header: 'x-api-key', fallbackToIp: false },
      policies: [
        { name: 'burst', limit: 3, windowMs: 3_600_000, algorithm: 'fixed-window', blockMs: 0 },
        { name: '100-per-1d', limit: 100, windowMs: 86_400_000, algorithm: 'fixed-window', blockMs: 3_600_000 },
      ],
      cost: null,
      count: null,
      concurrency: null,
      wait: null,
    });
  });

  it('inspect, block forever, unblock (the count kept) and reset, each seen by the next proxied request', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const send = () => call(g.url, 'GET', '/x', { headers: { 'x-api-key': 'team/alpha' } });
    assert.equal((await send()).status, 200);
    const key = `/admin/rules/api/keys/${encodeURIComponent('team/alpha')}`;
    const seen = await call(g.adminUrl!, 'GET', key, { token: TOKEN });
    assert.equal(seen.status, 200);
    assert.equal(seen.json.key, 'team/alpha', 'a "/" in a key travels percent-encoded');
    assert.deepEqual(
      seen.json.policies.map((p: { policy: string; remaining: number; refusedForMs: number }) => [p.policy, p.remaining, p.refusedForMs]),
      [
        ['burst', 2, 0],
        ['100-per-1d', 99, 0],
      ],
    );

    const blocked = await call(g.adminUrl!, 'POST', `${key}/block`, { token: TOKEN, body: '{"duration":"forever"}' });
    assert.equal(blocked.status, 200);
    assert.equal(blocked.json.blockedForMs, 'forever');
    assert.equal(blocked.json.policies[0].refusedForMs, 'forever');
    assert.equal((await send()).status, 429, 'blocked for the next request');
    assert.equal((await send()).status, 429);

    const unblocked = await call(g.adminUrl!, 'POST', `${key}/unblock`, { token: TOKEN });
    assert.equal(unblocked.status, 200);
    assert.equal(unblocked.json.policies[0].remaining, 2, 'unblock keeps the count');
    assert.equal(unblocked.json.policies[0].memoryBlockMs, 0, 'and clears the in-memory block');
    assert.equal((await send()).status, 200, 'admitted by the next request');
    assert.equal((await send()).status, 200);
    assert.equal((await send()).status, 429, 'the burst of 3 is spent: unblock was no reset');

    const timed = await call(g.adminUrl!, 'POST', `${key}/block`, { token: TOKEN, body: '{"duration":"10m"}' });
    assert.equal(timed.json.blockedForMs, 600_000);
    // Read back right after the block: a millisecond or two may have passed.
    const left = timed.json.policies[1].refusedForMs as number;
    assert.ok(left > 599_000 && left <= 600_000, `${left}`);

    const reset = await call(g.adminUrl!, 'POST', `${key}/reset`, { token: TOKEN });
    assert.equal(reset.status, 200);
    assert.deepEqual(
      reset.json.policies.map((p: { remaining: number }) => p.remaining),
      [3, 100],
    );
    assert.equal((await send()).status, 200, 'admitted after the reset');
  });

  it('GET /admin/limited: the most-limited keys of the last minutes, most refused first', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      for (const [key, n] of [
        ['heavy', 10],
        ['light', 5],
        ['fine', 2],
      ] as const)
        for (let i = 0; i < n; i++) await call(g.url, 'GET', '/x', { headers: { 'x-api-key': key }, agent });
    } finally {
      agent.destroy();
    }
    const r = await call(g.adminUrl!, 'GET', '/admin/limited?minutes=5', { token: TOKEN });
    assert.equal(r.status, 200);
    assert.equal(r.json.minutes, 5);
    assert.deepEqual(r.json.rules, [
      {
        rule: 'api',
        keys: [
          { policy: 'burst', key: 'heavy', refusals: 7 },
          { policy: 'burst', key: 'light', refusals: 2 },
        ],
      },
    ]);
    const top1 = await call(g.adminUrl!, 'GET', '/admin/limited?top=1&rule=api', { token: TOKEN });
    assert.deepEqual(top1.json.rules[0].keys, [{ policy: 'burst', key: 'heavy', refusals: 7 }]);
  });

  it('a shadow rule refuses nobody, so it lists no limited keys', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  token: ${TOKEN}\nrules:\n  - name: watch\n    shadow: true\n    key: { header: x-api-key }\n    policies: ["1/1h"]\n`,
    );
    for (let i = 0; i < 3; i++) assert.equal((await call(g.url, 'GET', '/x', { headers: { 'x-api-key': 'k' } })).status, 200);
    const r = await call(g.adminUrl!, 'GET', '/admin/limited', { token: TOKEN });
    assert.deepEqual(r.json.rules, [{ rule: 'watch', keys: [] }]);
  });

  it('a flood of 10 000 refused keys keeps the most-limited table bounded, and a key refused often stays on top', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  token: ${TOKEN}\nrules:\n  - name: api\n    key: { header: x-api-key }\n    policies: ["1/1h"]\n`,
    );
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    try {
      const one = (key: string) => call(g.url, 'GET', '/x', { headers: { 'x-api-key': key }, agent });
      // Each fresh key is admitted once, then refused once: 10 000 refused keys, with a heavy one among them.
      assert.equal((await one('heavy')).status, 200);
      for (let batch = 0; batch < 10_000; batch += 250) {
        const keys = Array.from({ length: 250 }, (_, i) => `k${batch + i}`);
        await Promise.all(keys.map(one));
        const refused = await Promise.all([...keys.map(one), one('heavy'), one('heavy')]);
        assert.ok(refused.every((r) => r.status === 429));
      }
    } finally {
      agent.destroy();
    }
    const r = await call(g.adminUrl!, 'GET', '/admin/limited?minutes=15&top=3', { token: TOKEN });
    assert.equal(r.status, 200);
    assert.ok(r.json.tracked <= 2 * LIMITED_TABLE_SIZE, `bounded: ${r.json.tracked} entries`);
    assert.equal(r.json.rules[0].keys[0].key, 'heavy');
    assert.ok(r.json.rules[0].keys[0].refusals >= 70, `heavy kept its count: ${r.json.rules[0].keys[0].refusals}`);
  });

  it('missing or wrong token: 401 with WWW-Authenticate: Bearer, on every endpoint', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const paths: Array<[string, string]> = [
      ['GET', '/admin/rules'],
      ['GET', '/admin/rules/api/keys/a'],
      ['POST', '/admin/rules/api/keys/a/reset'],
      ['POST', '/admin/rules/api/keys/a/block'],
      ['POST', '/admin/rules/api/keys/a/unblock'],
      ['GET', '/admin/limited'],
      ['GET', '/admin/nothing-here'],
    ];
    for (const [method, path] of paths)
      for (const headers of [
        {} as Record<string, string>,
        { authorization: `Bearer ${TOKEN}x` },
        { authorization: `Basic ${TOKEN}` },
        { authorization: TOKEN },
        { authorization: 'Bearer ' },
      ]) {
        const r = await call(g.adminUrl!, method, path, { headers });
        assert.equal(r.status, 401, `${method} ${path} ${JSON.stringify(headers)}`);
        assert.match(String(r.headers['www-authenticate']), /^Bearer/);
      }
    // Nothing changed: the block above was refused.
    assert.equal((await call(g.url, 'GET', '/x', { headers: { 'x-api-key': 'a' } })).status, 200);
    // The scheme is case-insensitive, as RFC 9110 says.
    assert.equal((await call(g.adminUrl!, 'GET', '/admin/rules', { headers: { authorization: `bearer ${TOKEN}` } })).status, 200);
  });

  it('bad input: 400 naming the field; unknown rule 404; wrong method 405', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url));
    const ask = (method: string, path: string, body?: string) =>
      call(g.adminUrl!, method, path, { token: TOKEN, ...(body === undefined ? {} : { body }) });
    const cases: Array<[string, string, string | undefined, number, string | undefined]> = [
      ['GET', '/admin/rules/api/keys/%E0%A4%A', undefined, 400, 'key'],
      ['GET', '/admin/rules/%ZZ/keys/a', undefined, 400, 'rule'],
      ['GET', '/admin/rules/nope/keys/a', undefined, 404, 'rule'],
      ['POST', '/admin/rules/api/keys/a/block', '{"duration":"soon"}', 400, 'duration'],
      ['POST', '/admin/rules/api/keys/a/block', '{"duration":0}', 400, 'duration'],
      ['POST', '/admin/rules/api/keys/a/block', '{}', 400, 'duration'],
      ['POST', '/admin/rules/api/keys/a/block', '{"duration":"1m","until":1}', 400, 'until'],
      ['POST', '/admin/rules/api/keys/a/block', '{"duration":', 400, 'body'],
      ['POST', '/admin/rules/api/keys/a/block', '[]', 400, 'body'],
      ['GET', '/admin/limited?minutes=0', undefined, 400, 'minutes'],
      ['GET', `/admin/limited?minutes=${LIMITED_MINUTES + 1}`, undefined, 400, 'minutes'],
      ['GET', '/admin/limited?top=x', undefined, 400, 'top'],
      ['GET', '/admin/limited?rule=nope', undefined, 404, 'rule'],
      ['POST', '/admin/rules', undefined, 405, undefined],
      ['GET', '/admin/rules/api/keys/a/reset', undefined, 405, undefined],
      ['DELETE', '/admin/rules/api/keys/a', undefined, 405, undefined],
      ['POST', '/admin/rules/api/keys/a/explode', undefined, 404, undefined],
      ['GET', '/admin/rules/api/keys/', undefined, 400, 'key'],
    ];
    for (const [method, path, body, status, field] of cases) {
      const r = await ask(method, path, body);
      assert.equal(r.status, status, `${method} ${path} ${body ?? ''}: ${r.body}`);
      assert.equal(typeof r.json.error, 'string');
      assert.equal(r.json.field, field, `${method} ${path} ${body ?? ''}`);
    }
    assert.equal((await ask('POST', '/admin/rules')).headers.allow, 'GET, HEAD');
  });

  it('nothing of it on the proxy port: /admin/..., /_floodgate/admin/... and encoded variants are forwarded (or refused), never answered by the API', async () => {
    for (const admin of [`admin:\n  listen: 127.0.0.1:0\n  token: ${TOKEN}\n`, '']) {
      const g = await fixture.start(
        `upstream: ${fixture.upstream.url}\n${admin}rules:\n  - name: api\n    key: ip\n    policies: ["1000/1h"]\n`,
      );
      const paths = [
        '/admin/rules',
        '/admin/rules/api/keys/127.0.0.1',
        '/admin/rules/api/keys/127.0.0.1/reset',
        '/admin/limited',
        '/_floodgate/admin/rules',
        '/_floodgate/admin/rules/api/keys/127.0.0.1/unblock',
        '/%61dmin/rules',
        '/_floodgate/%61dmin/rules',
        '/%5Fflood%67ate/admin/rules',
        '//admin/rules',
        '/x/../admin/rules',
        '/ADMIN/rules',
        '/admin%2Frules',
        '/_floodgate%2Fadmin%2Frules',
      ];
      for (const path of paths)
        for (const method of ['GET', 'POST']) {
          const r = await call(g.url, method, path, { token: TOKEN });
          if (r.status === 200) {
            assert.equal(typeof r.json.url, 'string', `${method} ${path} was answered by the upstream: ${r.body}`);
            assert.equal(r.json.rules, undefined);
          } else assert.ok(r.status === 400 || r.status === 404, `${method} ${path}: ${r.status} ${r.body}`);
          assert.equal(r.headers['www-authenticate'], undefined, `${method} ${path}`);
        }
    }
  });

  it('without a token the API is off (404 saying how to turn it on), and /metrics, /healthz, /readyz stay as they were', async () => {
    const g = await fixture.start(CONFIG(fixture.upstream.url, 'admin: 127.0.0.1:0\n'));
    const off = await call(g.adminUrl!, 'GET', '/admin/rules', { token: TOKEN });
    assert.equal(off.status, 404);
    assert.match(off.json.error, /admin API is off.*tokenFile/);
    assert.equal((await call(g.adminUrl!, 'GET', '/metrics')).status, 200);
    assert.equal((await call(g.adminUrl!, 'GET', '/healthz')).status, 200);
    assert.equal((await call(g.adminUrl!, 'GET', '/readyz')).status, 200);
    // With a token, they still need none: scrapers and orchestrators keep working.
    const h = await fixture.start(CONFIG(fixture.upstream.url));
    assert.equal((await call(h.adminUrl!, 'GET', '/metrics')).status, 200);
    assert.equal((await call(h.adminUrl!, 'GET', '/readyz')).status, 200);
  });
});

describe('gateway: admin API settings', () => {
  const parse = (yaml: string) => parseConfigText(`upstream: http://127.0.0.1:1\n${yaml}rules: []\n`, '/tmp/test.yaml');

  it('admin: { listen, token | tokenFile }; a short token, both, or a token without listen are config errors', async () => {
    const file = writeTemp('admin-token', `${TOKEN}\n`);
    assert.equal(
      (await parse(`admin:\n  listen: 127.0.0.1:9\n  tokenFile: ${file}\n`)).adminToken,
      TOKEN,
      'the trailing newline is not part of it',
    );
    assert.equal((await parse(`admin:\n  listen: 127.0.0.1:9\n  token: ${TOKEN}\n`)).adminToken, TOKEN);
    assert.equal((await parse('admin: 127.0.0.1:9\n')).adminToken, undefined);
    await assert.rejects(
      parse('admin:\n  listen: 127.0.0.1:9\n  token: short\n'),
      /admin\.token: the token is 5 characters; an admin token needs at least 16/,
    );
    await assert.rejects(
      parse(`admin:\n  listen: 127.0.0.1:9\n  token: ${TOKEN}\n  tokenFile: ${file}\n`),
      /tokenFile: and token are both set/,
    );
    await assert.rejects(parse(`admin:\n  token: ${TOKEN}\n`), /admin: needs listen/);
    await assert.rejects(parse('admin:\n  listen: 127.0.0.1:9\n  tokenFile: /nonexistent/token\n'), /cannot read the admin token file/);
  });

  it('an admin token with --workers is accepted (the primary serves the admin API by asking the workers), in the config file and with --admin-token-file', async () => {
    assert.equal((await parse(`workers: 2\nadmin:\n  listen: 127.0.0.1:9\n  token: ${TOKEN}\n`)).adminToken, TOKEN);
    const file = writeTemp('admin-token', TOKEN);
    const workers = parseCommandLine([
      'serve',
      '--upstream',
      'http://127.0.0.1:1',
      '--limit',
      '1/1s',
      '--admin',
      '127.0.0.1:9',
      '--admin-token-file',
      file,
      '--workers',
      '2',
    ]);
    assert.equal(workers.kind === 'serve' && workers.settings?.workers, 2);
    assert.equal(workers.kind === 'serve' && workers.settings?.adminToken, TOKEN);
    const ok = parseCommandLine([
      'serve',
      '--upstream',
      'http://127.0.0.1:1',
      '--limit',
      '1/1s',
      '--admin',
      '127.0.0.1:9',
      '--admin-token-file',
      file,
    ]);
    assert.equal(ok.kind === 'serve' && ok.settings?.adminToken, TOKEN);
    assert.throws(
      () => parseCommandLine(['serve', '--upstream', 'http://127.0.0.1:1', '--limit', '1/1s', '--admin-token-file', file]),
      /--admin-token-file needs --admin HOST:PORT/,
    );
  });

  it('floodgate serve --admin --admin-token-file: the API answers with the token from the file, in a real process', async () => {
    const file = writeTemp('admin-token', `${TOKEN}\n`);
    const cli = await serveCli([
      '--upstream',
      fixture.upstream.url,
      '--limit',
      '2/1h',
      '--key',
      'header:x-api-key',
      '--admin',
      '127.0.0.1:0',
      '--admin-token-file',
      file,
    ]);
    try {
      const line = await cli.waitForLog((l) => l.msg === 'floodgate gateway listening');
      const adminUrl = String(line.admin);
      assert.equal((await call(adminUrl, 'GET', '/admin/rules')).status, 401);
      const rules = await call(adminUrl, 'GET', '/admin/rules', { token: TOKEN });
      assert.equal(rules.json.rules[0].name, 'default');
      for (let i = 0; i < 3; i++) await call(cli.url, 'GET', '/x', { headers: { 'x-api-key': 'cli-key' } });
      assert.equal((await call(cli.url, 'GET', '/x', { headers: { 'x-api-key': 'cli-key' } })).status, 429);
      assert.equal((await call(adminUrl, 'POST', '/admin/rules/default/keys/cli-key/reset', { token: TOKEN })).status, 200);
      assert.equal((await call(cli.url, 'GET', '/x', { headers: { 'x-api-key': 'cli-key' } })).status, 200);
    } finally {
      await stopCli(cli);
    }
  });

  it('the most-limited table: each rule and minute holds at most LIMITED_TABLE_SIZE keys, and minutes older than the window are dropped', () => {
    let now = 0;
    const limited = new LimitedKeys(() => now);
    for (let i = 0; i < 100; i++) limited.note('r', 'p', 'heavy');
    for (let i = 0; i < 50_000; i++) limited.note('r', 'p', `k${i}`);
    assert.ok(limited.size <= LIMITED_TABLE_SIZE, `${limited.size}`);
    assert.deepEqual(limited.top('r', 1, 1), [{ policy: 'p', key: 'heavy', refusals: 100 }]);
    now += LIMITED_MINUTES * 60_000;
    limited.note('r', 'p', 'later');
    assert.deepEqual(limited.top('r', LIMITED_MINUTES, 5), [{ policy: 'p', key: 'later', refusals: 1 }]);
    assert.equal(limited.size, 1);
  });
});
