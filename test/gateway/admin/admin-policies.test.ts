// The admin API acts on a key under the policy it means: a rule-level action leaves `global` policies alone and answers 409 where a KEY could be two clients, /admin/rules/R/policies/P/keys/K names the policy, and /admin/limited says which policy refused. Real gateways, real sockets, several loopback addresses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adminBlock, adminJson } from '../support/admin.js';
import { statusFrom } from '../support/from-address.js';
import { gatewayFixture } from '../support/harness.js';
import { requestBytes, sendRaw } from '../support/raw.js';

const fixture = gatewayFixture();
const TOKEN = 'admin-policies-token-0123456789abcdef';

const config = (policies: string) =>
  `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n${policies}`;

const PER_KEY_AND_GLOBAL = '      - { name: per-key, limit: 3, window: 1h }\n      - { name: all, limit: 1000, window: 1h, key: global }\n';
const PER_KEY_AND_IP = '      - { name: per-key, limit: 3, window: 1h }\n      - { name: per-ip, limit: 2, window: 1h, key: ip }\n';

describe('F8: admin actions on a key act on the policies it names', () => {
  it('F8: a rule-level block of the API key "global" leaves the global policy alone, so no other client is refused', async () => {
    const g = await fixture.start(config(PER_KEY_AND_GLOBAL));
    const r = await adminJson(g.adminUrl!, TOKEN, 'POST', '/admin/rules/api/keys/global/block', '{"duration":"1h"}');
    assert.equal(r.status, 200);
    assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': 'victim' }), 200, 'another client is not refused');
    assert.equal(await statusFrom(g.url, '127.0.0.3', { 'x-api-key': 'global' }), 429, 'the abuser whose API key is "global" is');
    assert.deepEqual(
      r.json.policies.map((p: { policy: string; keyedBy: string }) => [p.policy, p.keyedBy]),
      [['per-key', 'header:x-api-key']],
      'only the policy counted by API key was acted on',
    );
  });

  it("F8: an API key equal to another client's address: the rule-level action answers 409 naming the policies, and the policy-named one touches only that policy", async () => {
    const g = await fixture.start(config(PER_KEY_AND_IP));
    const ambiguous = await adminJson(g.adminUrl!, TOKEN, 'POST', '/admin/rules/api/keys/127.0.0.2/block', '{"duration":"1h"}');
    assert.equal(ambiguous.status, 409);
    assert.equal(ambiguous.json.code, 'FLOODGATE_ADMIN_POLICY_AMBIGUOUS');
    assert.equal(ambiguous.json.field, 'policy');
    assert.deepEqual(ambiguous.json.policies, [
      { policy: 'per-key', key: 'header:x-api-key' },
      { policy: 'per-ip', key: 'ip' },
    ]);
    assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': 'victim' }), 200, 'nothing was blocked by the 409');

    const blocked = await adminJson(
      g.adminUrl!,
      TOKEN,
      'POST',
      '/admin/rules/api/policies/per-key/keys/127.0.0.2/block',
      '{"duration":"1h"}',
    );
    assert.equal(blocked.status, 200);
    // refusedForMs counts down from the block: a millisecond or two pass between setting it and reading it back.
    const refused = blocked.json.policies.map((p: { policy: string; refusedForMs: number }) => [p.policy, p.refusedForMs]);
    assert.deepEqual(
      refused.map(([policy]: [string, number]) => policy),
      ['per-key'],
    );
    assert.ok(refused[0][1] > 3_590_000 && refused[0][1] <= 3_600_000, `refusedForMs ${refused[0][1]}`);
    assert.equal(await statusFrom(g.url, '127.0.0.3', { 'x-api-key': '127.0.0.2' }), 429, 'the API key is blocked');
    assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': 'victim' }), 200, 'the address of the same name is not');

    // A GET of the rule-level path names no client by itself: it shows every policy, each with what it counts by
    // (the API key is blocked; the address spent its 2 on the two requests above).
    const seen = await adminJson(g.adminUrl!, TOKEN, 'GET', '/admin/rules/api/keys/127.0.0.2');
    assert.equal(seen.status, 200);
    assert.deepEqual(
      seen.json.policies.map((p: { policy: string; keyedBy: string; remaining: number }) => [p.policy, p.keyedBy, p.remaining]),
      [
        ['per-key', 'header:x-api-key', 0],
        ['per-ip', 'ip', 0],
      ],
    );
    const unknown = await adminJson(g.adminUrl!, TOKEN, 'POST', '/admin/rules/api/policies/nope/keys/x/reset');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.field, 'policy');
  });

  it('F8: a rule whose policies all count by one key still acts on every policy from the rule-level path', async () => {
    const g = await fixture.start(config('      - { name: burst, limit: 3, window: 1h }\n      - { limit: 100, window: 1d }\n'));
    const r = await adminJson(g.adminUrl!, TOKEN, 'POST', '/admin/rules/api/keys/tenant/block', '{"duration":"forever"}');
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.json.policies.map((p: { policy: string; refusedForMs: unknown }) => [p.policy, p.refusedForMs]),
      [
        ['burst', 'forever'],
        ['100-per-1d', 'forever'],
      ],
    );
    // An unnamed policy goes by the name its RateLimit headers give it.
    const one = await adminJson(g.adminUrl!, TOKEN, 'POST', '/admin/rules/api/policies/100-per-1d/keys/tenant/unblock');
    assert.deepEqual(
      one.json.policies.map((p: { policy: string; refusedForMs: unknown }) => [p.policy, p.refusedForMs]),
      [['100-per-1d', 0]],
    );
  });

  it('F8: /admin/limited names the policy that refused, with the key that policy counts', async () => {
    const g = await fixture.start(config(PER_KEY_AND_IP));
    const statuses = [];
    for (const key of ['k1', 'k2', 'k3', 'k4']) statuses.push(await statusFrom(g.url, '127.0.0.3', { 'x-api-key': key }));
    assert.deepEqual(statuses, [200, 200, 429, 429]);
    const r = await adminJson(g.adminUrl!, TOKEN, 'GET', '/admin/limited');
    assert.deepEqual(r.json.rules, [{ rule: 'api', keys: [{ policy: 'per-ip', key: '127.0.0.3', refusals: 2 }] }]);
    const stats = await adminJson(g.adminUrl!, TOKEN, 'GET', '/admin/stats');
    assert.deepEqual(stats.json.limited.rules, [{ rule: 'api', keys: [{ policy: 'per-ip', key: '127.0.0.3', refusals: 2 }] }]);
    // Acting on the row as listed frees the address, and only it.
    const reset = await adminJson(g.adminUrl!, TOKEN, 'POST', '/admin/rules/api/policies/per-ip/keys/127.0.0.3/reset');
    assert.equal(reset.status, 200);
    assert.equal(await statusFrom(g.url, '127.0.0.3', { 'x-api-key': 'k5' }), 200);
  });
});

describe('the dashboard cannot reset keys . and ..: a key segment "=" + base64url names any key', () => {
  it('the dashboard cannot reset keys . and ..: POST .../keys/=Lg/reset and .../keys/=Li4/reset reset the keys "." and ".."', async () => {
    const g = await fixture.start(config(PER_KEY_AND_GLOBAL));
    for (const [key, segment] of [
      ['.', '=Lg'],
      ['..', '=Li4'],
    ] as const) {
      for (let i = 0; i < 3; i++) assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': key }), 200);
      assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': key }), 429, `${key} spent`);
      const r = await adminJson(g.adminUrl!, TOKEN, 'POST', `/admin/rules/api/policies/per-key/keys/${segment}/reset`);
      assert.equal(r.status, 200, key);
      assert.equal(r.json.key, key);
      assert.equal(await statusFrom(g.url, '127.0.0.2', { 'x-api-key': key }), 200, `${key} reset`);
    }
    // Only the canonical base64url of UTF-8 text: anything else is a 400 naming the field, never another key.
    for (const bad of ['=Lg==', '=L', '=%2E', '=Lg.', '=_w'])
      assert.equal((await adminJson(g.adminUrl!, TOKEN, 'GET', `/admin/rules/api/keys/${bad}`)).status, 400, bad);
    // A key that starts with "=" travels percent-encoded, as encodeURIComponent writes it.
    assert.equal((await adminJson(g.adminUrl!, TOKEN, 'GET', `/admin/rules/api/keys/${encodeURIComponent('=Lg')}`)).json.key, '=Lg');
  });
});

describe('admin.hosts accepts Host: [::1]evil.com', () => {
  it('admin.hosts accepts Host: [::1]evil.com: a Host that is not an address, a name and a port is refused (421)', async () => {
    const g = await fixture.start(
      config(PER_KEY_AND_GLOBAL).replace(`  token: ${TOKEN}\n`, `  token: ${TOKEN}\n  hosts: [admin.internal]\n`),
    );
    const port = new URL(g.adminUrl!).port;
    for (const host of [
      '[::1]evil.com',
      `[::1]evil.com:${port}`,
      '[::1]:80evil',
      '[127.0.0.1]',
      '[evil.com]',
      'evil.com:80:80',
      'a b',
      '[::1',
      '::1',
    ])
      assert.deepEqual((await sendRaw(g.adminUrl!, requestBytes('GET /metrics HTTP/1.1', [], host))).statuses, [421], host);
    for (const host of [`[::1]:${port}`, '[::1]', `127.0.0.1:${port}`, 'admin.internal', `ADMIN.internal.:${port}`])
      assert.deepEqual((await sendRaw(g.adminUrl!, requestBytes('GET /metrics HTTP/1.1', [], host))).statuses, [200], host);
  });
});
