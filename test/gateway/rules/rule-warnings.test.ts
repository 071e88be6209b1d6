// Configs whose rules do not limit what they seem to: no rules key (refused), rules: [] (a warning), and a rule after a final rule that takes all its requests (a warning in serve, an error in check); no false positives.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { covers } from '../../../src/gateway/rules/unreachable-rules.js';
import type { MatchSettings } from '../../../src/gateway/config/settings.js';
import { gatewayFixture, runCli, serveCli, stopCli, writeTemp } from '../support/harness.js';

const fixture = gatewayFixture();

const UNREACHABLE = `rules:
  - name: everyone
    policies: ["100/1m"]
    final: true
  - name: login
    match: { path: /login, methods: [POST] }
    policies: ["2/1m"]
`;

describe('a config without rules', () => {
  it('a forgotten rules section: serve refuses to start instead of forwarding everything unlimited', async () => {
    const file = writeTemp('norules.yaml', `upstream: ${fixture.upstream.url}\n`);
    const cli = runCli(['serve', '--config', file, '--listen', '127.0.0.1:0']);
    assert.equal(await cli.exited, 2);
    assert.equal(
      cli.stderr(),
      `floodgate: ${file}:1:1: rules: is missing, so every request would be forwarded without limits. Add rules, e.g. rules: [{ name: all, policies: ["100/1m"] }]; to forward without limits on purpose, write rules: []. [FLOODGATE_INVALID_CONFIG]\n`,
    );
    const checked = runCli(['check', '--config', file]);
    assert.equal(await checked.exited, 2);
    assert.equal(checked.stderr(), cli.stderr());
  });

  it('rules: [] written on purpose starts, forwards, and warns once (log line and process warning)', async () => {
    const file = writeTemp('empty.yaml', `upstream: ${fixture.upstream.url}\nrules: []\n`);
    const message = `${file} has rules: [], so every request is forwarded without limits (and the decision endpoint admits every request). Add a rule to limit, e.g. rules: [{ name: all, policies: ["100/1m"] }].`;
    const cli = await serveCli(['--config', file]);
    try {
      const line = await cli.waitForLog((l) => l.code === 'FLOODGATE_NO_RULES');
      assert.equal(line.msg, message);
      assert.equal(line.level, 40);
      for (let i = 0; i < 3; i += 1) assert.equal((await get(`${cli.url}/x`)).status, 200);
      assert.equal(cli.logs.filter((l) => l.code === 'FLOODGATE_NO_RULES').length, 1);
      assert.equal(cli.stderr().split('[FLOODGATE_NO_RULES]').length - 1, 1, cli.stderr());
      assert.ok(cli.stderr().includes(`[FLOODGATE_NO_RULES] Warning: ${message}`), cli.stderr());
    } finally {
      await stopCli(cli);
    }
    const checked = runCli(['check', '--config', file]);
    assert.equal(await checked.exited, 0);
    assert.equal(checked.stderr(), `floodgate: warning: ${message} [FLOODGATE_NO_RULES]\n`);
    assert.deepEqual(checked.text, [`${file}: valid; 0 rule(s): (none)`]);
  });
});

describe('reloads', () => {
  it('a reload that drops the rules section is refused and the last good rules keep limiting', async () => {
    const file = writeTemp('reload.yaml', `upstream: ${fixture.upstream.url}\nrules: [{ name: all, policies: ["2/1m"] }]\n`);
    const cli = await serveCli(['--config', file, '--no-watch']);
    try {
      const statuses = [];
      for (let i = 0; i < 2; i += 1) statuses.push((await get(`${cli.url}/x`)).status);
      writeFileSync(file, `upstream: ${fixture.upstream.url}\n`);
      cli.child.kill('SIGHUP');
      const failed = await cli.waitForLog((l) => l.msg === 'config reload failed; keeping the last good config');
      assert.equal(failed.code, 'FLOODGATE_INVALID_CONFIG');
      assert.match(String(failed.error), /rules: is missing, so every request would be forwarded without limits/);
      statuses.push((await get(`${cli.url}/x`)).status);
      assert.deepEqual(statuses, [200, 200, 429]);
      // A reload that makes a rule unreachable applies, and says so.
      writeFileSync(file, `upstream: ${fixture.upstream.url}\n${UNREACHABLE}`);
      cli.child.kill('SIGHUP');
      const line = await cli.waitForLog((l) => l.code === 'FLOODGATE_UNREACHABLE_RULE');
      assert.match(String(line.msg), /^rule "login" \(.*reload\.yaml:6\) can never match/);
    } finally {
      await stopCli(cli);
    }
  });
});

describe('a rule after a final catch-all', () => {
  it('check fails naming both rules and their lines', async () => {
    const file = writeTemp('unreachable.yaml', `upstream: ${fixture.upstream.url}\n${UNREACHABLE}`);
    const cli = runCli(['check', '--config', file]);
    assert.equal(await cli.exited, 2);
    assert.equal(
      cli.stderr(),
      `floodgate: rule "login" (${file}:6) can never match: rule "everyone" (${file}:3) is final and matches every request "login" matches, so the rules after it are not tried. Move "login" above "everyone", narrow the match of "everyone", or remove its final. [FLOODGATE_UNREACHABLE_RULE]\n`,
    );
    assert.deepEqual(cli.text, []);
  });

  it('serve starts, warns once, and the later rule indeed never limits', async () => {
    const file = writeTemp('unreachable.yaml', `upstream: ${fixture.upstream.url}\n${UNREACHABLE}`);
    const cli = await serveCli(['--config', file]);
    try {
      const line = await cli.waitForLog((l) => l.code === 'FLOODGATE_UNREACHABLE_RULE');
      assert.match(String(line.msg), /^rule "login" \(.*:6\) can never match: rule "everyone" \(.*:3\) is final/);
      const statuses = [];
      for (let i = 0; i < 4; i += 1) statuses.push((await get(`${cli.url}/login`, { method: 'POST' })).status);
      assert.deepEqual(statuses, [200, 200, 200, 200], 'the 2/1m login rule is never applied');
    } finally {
      await stopCli(cli);
    }
  });

  it('no false positives: narrower rules after broader non-final ones, broader after narrower final ones, different patterns', async () => {
    const file = writeTemp(
      'fine.yaml',
      `upstream: ${fixture.upstream.url}
rules:
  - name: api
    match: { path: /api/ }
    policies: ["100/1m"]
  - name: api-login
    match: { path: /api/login, methods: [POST] }
    policies: ["5/1m"]
  - name: login-final
    match: { path: /login, methods: [POST] }
    policies: ["5/1m"]
    final: true
  - name: login-any-method
    match: { path: /login }
    policies: ["50/1m"]
  - name: v2
    match: { pathPattern: "^/v2/" }
    policies: ["10/1s"]
    final: true
  - name: v2-users
    match: { pathPattern: "^/v2/users" }
    policies: ["1/1s"]
  - name: tenant
    match: { headers: { x-tenant: acme } }
    policies: ["1/1s"]
    final: true
  - name: any-tenant
    match: { headers: { x-tenant: true } }
    policies: ["1/1s"]
  - name: everyone
    policies: ["1000/1m"]
`,
    );
    const cli = runCli(['check', '--config', file]);
    assert.equal(await cli.exited, 0, cli.stderr());
    assert.equal(cli.stderr(), '');
  });

  it('covers() is exact about methods, prefixes, hosts, headers and patterns', async () => {
    const m = (match: Partial<MatchSettings>): MatchSettings => ({
      methods: undefined,
      pathPrefix: undefined,
      pathPattern: undefined,
      hosts: undefined,
      headers: undefined,
      ...match,
    });
    // A rule for GET matches HEAD too: GET covers HEAD, HEAD does not cover GET.
    assert.equal(covers(m({ methods: ['GET'] }), m({ methods: ['HEAD'] }), false), true);
    assert.equal(covers(m({ methods: ['HEAD'] }), m({ methods: ['GET'] }), false), false);
    assert.equal(covers(m({ methods: ['GET'] }), m({}), false), false);
    // Prefixes: case folds only where the match does.
    assert.equal(covers(m({ pathPrefix: '/api' }), m({ pathPrefix: '/API/x' }), false), true);
    assert.equal(covers(m({ pathPrefix: '/api' }), m({ pathPrefix: '/API/x' }), true), false);
    assert.equal(covers(m({ pathPrefix: '/api/' }), m({ pathPrefix: '/api' }), false), false);
    assert.equal(covers(m({ pathPrefix: '/api/' }), m({ pathPattern: /^\/api\/x/ }), false), false);
    assert.equal(covers(m({ pathPattern: /^\/a/ }), m({ pathPattern: /^\/a/ }), false), true);
    assert.equal(covers(m({ pathPattern: /^\/a/ }), m({ pathPattern: /^\/ab/ }), false), false);
    // Hosts: *.x matches subdomains, never x itself.
    assert.equal(covers(m({ hosts: ['*.example.com'] }), m({ hosts: ['a.example.com', '*.b.example.com'] }), false), true);
    assert.equal(covers(m({ hosts: ['*.example.com'] }), m({ hosts: ['example.com'] }), false), false);
    assert.equal(covers(m({ hosts: ['a.example.com'] }), m({ hosts: ['*.example.com'] }), false), false);
    // Headers: presence covers any value; a value covers only itself.
    assert.equal(covers(m({ headers: [['x-t', true]] }), m({ headers: [['x-t', 'a']] }), false), true);
    assert.equal(covers(m({ headers: [['x-t', 'a']] }), m({ headers: [['x-t', true]] }), false), false);
    assert.equal(covers(m({ headers: [['x-t', 'a']] }), m({ headers: [['x-t', 'b']] }), false), false);
    // The settings as parsed keep the line of each rule for the message.
    const settings = await parseConfigText(UNREACHABLE, 'gw.yaml');
    assert.deepEqual(
      settings.rules.map((r) => [r.name, r.line]),
      [
        ['everyone', 2],
        ['login', 5],
      ],
    );
  });
});
