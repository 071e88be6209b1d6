// Gateway rules whose policies count under their own keys (per API key + per address + global) in one decision: the config syntax and its
// errors, the decision on memory and on a real Redis, and what a client can and cannot do about it with its headers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { forgetWarnings } from '../../../src/core/warnings.js';
import { get, readIetf } from '../../http/support/http.js';
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { rejectsConfig } from '../support/config-errors.js';
import { startGateway, startUpstream, untilReady, type Upstream } from '../support/harness.js';
import { requestBytes, sendRaw } from '../support/raw.js';

const COMBINED = `rules:
  - name: combined
    key: "header:x-api-key"
    policies:
      - { name: per-key, limit: 3, window: 1m }
      - { name: per-address, limit: 4, window: 1m, key: ip }
      - { name: everyone, limit: 6, window: 1m, key: global }
`;

describe('config: a policy with its own key', () => {
  it('takes ip, header:NAME, header:NAME,ip and global; the rule key stays the default, and may be global too', async () => {
    const settings = await parseConfigText(
      `${COMBINED}  - name: tenants
    key: global
    policies: ["100/1s", { name: per-tenant, limit: 100, window: 1s, key: "header:X-Tenant" }, { limit: 5, window: 1s, key: "header:x-user,ip" }]
`,
      'gw.yaml',
    );
    assert.deepEqual(
      settings.rules[0]!.policies.map((p) => p.key),
      [undefined, { kind: 'ip' }, { kind: 'global' }],
    );
    assert.deepEqual(settings.rules[1]!.key, { kind: 'global' });
    assert.deepEqual(
      settings.rules[1]!.policies.map((p) => p.key),
      [undefined, { kind: 'header', header: 'x-tenant', fallbackToIp: false }, { kind: 'header', header: 'x-user', fallbackToIp: true }],
    );
  });

  it('rejects other keys with the file, line, column and field', async () => {
    await rejectsConfig(
      'rules:\n  - name: a\n    policies:\n      - { limit: 3, window: 1m, key: cookie }\n',
      /^gw\.yaml:4:38: rules\[0\]\.policies\[0\]\.key: must be "ip", "header:NAME" \(e\.g\. "header:x-api-key"\), "header:NAME,ip" \(the header, else the client address\), "cookie:NAME", .*"global" \(one counter for every client\), or several joined by " \+ " \(e\.g\. "header:x-api-key \+ path"\); got "cookie"\.$/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    policies:\n      - limit: 3\n        window: 1m\n        key: { header: x-org, maxLength: 8 }\n',
      /^gw\.yaml:6:14: rules\[0\]\.policies\[0\]\.key: a policy key is a string form \(ip, header:NAME, cookie:NAME, query:NAME, path, method, jwt:CLAIM, global, or parts joined by " \+ "\); checks on the key \(maxLength, pattern, allowList\) go in the rule key mapping\.$/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    policies:\n      - { limit: 3, window: 1m, key: "header:" }\n',
      /rules\[0\]\.policies\[0\]\.key: must be "ip"/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    policies:\n      - { limit: 3, window: 1m, key: 7 }\n',
      /rules\[0\]\.policies\[0\]\.key: must be "ip".*got 7\./,
    );
    // The same numbers under another key are another policy, but unnamed both go by one name in the headers ("3-per-1m"),
    // which serve refuses: so does the config, and a name tells them apart.
    await parseConfigText('rules:\n  - name: a\n    policies: ["3/1m", { name: per-address, limit: 3, window: 1m, key: ip }]\n', 'gw.yaml');
    await rejectsConfig(
      'rules:\n  - name: a\n    policies: ["3/1m", { limit: 3, window: 1m, key: ip }]\n',
      /^gw\.yaml:3:24: rules\[0\]\.policies\[1\]: has the name "3-per-1m" of another policy of this rule/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    policies: [{ limit: 3, window: 1m, key: ip }, { limit: 3, window: 1m, key: ip }]\n',
      /^gw\.yaml:3:51: rules\[0\]\.policies\[1\]: has the name "3-per-1m" of another policy of this rule/,
    );
  });
});

/** The three policies' remaining units in a response's RateLimit field. */
function remaining(headers: Parameters<typeof readIetf>[0]): number[] {
  const ietf = readIetf(headers);
  return ['per-key', 'per-address', 'everyone'].map((name) => ietf.get(name)!.r);
}

async function combinedRule(g: Gateway): Promise<void> {
  const as = (key: string, address: string) => ({ headers: { 'x-api-key': key, 'x-forwarded-for': address } });
  for (let i = 0; i < 3; i += 1) assert.equal((await get(`${g.url}/x`, as('key-a', '198.51.100.1'))).status, 200);
  const b1 = await get(`${g.url}/x`, as('key-b', '198.51.100.1'));
  assert.equal(b1.status, 200);
  assert.deepEqual(remaining(b1.headers), [2, 0, 2]);
  // The address is spent: key-b is refused by per-address alone, and nothing else keeps the refused request's units.
  const refused = await get(`${g.url}/x`, as('key-b', '198.51.100.1'));
  assert.equal(refused.status, 429);
  assert.deepEqual((JSON.parse(refused.body) as Record<string, unknown>)['violated-policies'], ['per-address']);
  // The gateway's in-memory block knew the address was spent and refused without asking the store about the other
  // policies, so the refusal lists the refusing one; the next admission shows the others kept nothing.
  assert.equal(readIetf(refused.headers).get('per-address')!.r, 0);
  const b2 = await get(`${g.url}/x`, as('key-b', '198.51.100.2'));
  assert.equal(b2.status, 200);
  assert.deepEqual(remaining(b2.headers), [1, 3, 1]);
  // One counter for everyone: a fresh key from a fresh address still meets the global limit.
  assert.equal((await get(`${g.url}/x`, as('key-c', '198.51.100.3'))).status, 200);
  const over = await get(`${g.url}/x`, as('key-d', '198.51.100.4'));
  assert.equal(over.status, 429);
  assert.deepEqual((JSON.parse(over.body) as Record<string, unknown>)['violated-policies'], ['everyone']);
}

describe('gateway: per key + per address + global in one rule', () => {
  let upstream: Upstream;
  const gateways: Gateway[] = [];
  before(async () => {
    upstream = await startUpstream();
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.shutdown()));
    await upstream.close();
  });
  const start = async (yaml: string): Promise<Gateway> => {
    const g = await startGateway(`upstream: ${upstream.url}\ntrustProxy: 1\n${yaml}`);
    gateways.push(g);
    return g;
  };

  it('memory store: a refusal by one policy spends nothing of the others; the refusal names it', async () => {
    await combinedRule(await start(COMBINED));
  });

  it('a client cannot get around it with headers: a repeated key header is 400, a missing one 401, none picks the global counter', async () => {
    const g = await start(`rules:
  - name: orgs
    key: ip
    policies:
      - { name: per-address, limit: 100, window: 1m }
      - { name: per-org, limit: 2, window: 1m, key: "header:x-org" }
      - { name: everyone, limit: 3, window: 1m, key: global }
`);
    const twice = await sendRaw(g.url, requestBytes('GET /x HTTP/1.1', ['X-Org: victim', 'X-Org: mine']));
    assert.equal(twice.statuses[0], 400);
    const missing = await get(`${g.url}/x`);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers['www-authenticate'], 'ApiKey header="x-org"');
    // Neither refusal counted: the global counter still has all three.
    const first = await get(`${g.url}/x`, { headers: { 'x-org': 'global' } });
    assert.equal(first.status, 200);
    assert.equal(readIetf(first.headers).get('everyone')!.r, 2, 'an org named "global" is not the global counter');
    assert.equal(readIetf(first.headers).get('per-org')!.r, 1);
    assert.equal((await get(`${g.url}/x`, { headers: { 'x-org': 'b', 'x-forwarded-for': '203.0.113.9' } })).status, 200);
    const third = await get(`${g.url}/x`, { headers: { 'x-org': 'c', 'x-api-key': 'global', 'x-forwarded-for': '203.0.113.10' } });
    assert.equal(third.status, 200);
    assert.equal(readIetf(third.headers).get('everyone')!.r, 0);
    assert.equal((await get(`${g.url}/x`, { headers: { 'x-org': 'd', 'x-forwarded-for': '203.0.113.11' } })).status, 429);
  });

  it('a key rule with a per-address policy behind an untrusted proxy: the forwarded-header warning names it', async () => {
    const logs: Array<Record<string, unknown>> = [];
    forgetWarnings();
    const g = await startGateway(
      `upstream: ${upstream.url}\nrules:\n  - { name: mixed, key: "header:x-api-key", policies: ["5/1m", { limit: 9, window: 1m, key: ip }] }\n`,
      {},
      logs,
    );
    gateways.push(g);
    assert.equal((await get(`${g.url}/x`, { headers: { 'x-api-key': 'k', 'x-forwarded-for': '203.0.113.1' } })).status, 200);
    const lines = logs.filter((l) => l.code === 'FLOODGATE_FORWARDED_HEADER_IGNORED');
    assert.equal(lines.length, 1, JSON.stringify(logs));
    assert.match(String(lines[0]!.msg), /so rule "mixed" counts every client behind the proxy/);
  });

  describe('on a real Redis', () => {
    let redis: RedisServer;
    before(async () => {
      redis = await startRedis();
    });
    after(async () => {
      await redis?.stop();
    });

    it('RedisStore: the same atomic decision over three keys', async () => {
      const g = await start(`store: { type: redis, url: "${redis.url}", timeout: 500ms }\n${COMBINED}`);
      await untilReady(`${g.url}/_floodgate/readyz`);
      await combinedRule(g);
    });
  });
});
