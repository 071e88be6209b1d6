// One gateway rule whose policies count by different keys (the rule's API key, the client address, one global counter), decided all or nothing, on memory and on a real Redis; and the config checks of a policy's key.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { parseConfigText } from '../../src/gateway/config/config-file.js';
import { FloodgateError } from '../../src/errors.js';
import { get } from '../http/support/http.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { gatewayFixture } from './support/harness.js';

const fixture = gatewayFixture();

/** A request from client address `ip` (the gateway trusts loopback's X-Forwarded-For), with API key `key` when given. */
function from(ip: string, key: string | undefined, extra: Record<string, string> = {}): { headers: Record<string, string> } {
  return { headers: { 'x-forwarded-for': ip, ...(key === undefined ? {} : { 'x-api-key': key }), ...extra } };
}

const RULE = `
trustProxy: [loopback]
rules:
  - name: combined
    key: header:x-api-key
    policies:
      - "2/1m"
      - { name: per-address, limit: 3, window: 1m, key: ip }
      - { name: everyone, limit: 5, window: 1m, key: global }
`;

/** Runs the combined rule's checks against a gateway started with `store` YAML. */
async function combinedRule(store: string): Promise<void> {
  const g = await fixture.start(`upstream: ${fixture.upstream.url}\n${store}\n${RULE}`);
  const status = async (ip: string, key: string | undefined): Promise<[number, unknown]> => {
    const reply = await get(`${g.url}/x`, from(ip, key));
    return [reply.status, reply.status === 429 ? JSON.parse(reply.body)['violated-policies'] : undefined];
  };
  assert.deepEqual(await status('10.0.0.1', 'k1'), [200, undefined]);
  assert.deepEqual(await status('10.0.0.1', 'k1'), [200, undefined]);
  assert.deepEqual(await status('10.0.0.1', 'k1'), [429, ['2-per-1m']], 'the per-key policy refuses');
  // The refusal spent nothing of the address or the global counter: the address still has one request left.
  assert.deepEqual(await status('10.0.0.1', 'k2'), [200, undefined]);
  assert.deepEqual(await status('10.0.0.1', 'k3'), [429, ['per-address']], 'a new API key does not get around the per-address policy');
  assert.deepEqual(await status('10.0.0.2', 'k3'), [200, undefined]);
  const fields = (await get(`${g.url}/x`, from('10.0.0.3', 'k4'))).headers;
  assert.match(String(fields['ratelimit-policy']), /^"2-per-1m";q=2;w=60, "per-address";q=3;w=60, "everyone";q=5;w=60$/);
  const refused = await get(`${g.url}/x`, from('10.0.0.4', 'k5'));
  assert.equal(refused.status, 429);
  assert.deepEqual(JSON.parse(refused.body)['violated-policies'], ['everyone'], 'the global counter refuses everyone at 5');
  assert.match(String(refused.headers['ratelimit']), /"everyone";r=0/);
  // Attacker's view: headers cannot pick another global counter, a repeated key header is still 400, a missing one 401.
  assert.equal((await get(`${g.url}/x`, from('10.0.0.5', 'k6', { 'x-global': 'mine' }))).status, 429);
  const twice = await get(`${g.url}/x`, { headers: { 'x-forwarded-for': '10.0.0.6', 'x-api-key': ['a', 'b'] as unknown as string } });
  assert.equal(twice.status, 400);
  assert.equal((await get(`${g.url}/x`, from('10.0.0.7', undefined))).status, 401);
  assert.equal(fixture.upstream.seen.length > 0, true);
}

describe('gateway: one rule combines keys in one decision', () => {
  it('per key, per address and global on the memory store: a refusal by one spends nothing of the others', async () => {
    await combinedRule('');
  });

  describe('on a real Redis (single node)', () => {
    let redis: RedisServer;
    before(async () => {
      redis = await startRedis();
    });
    after(async () => {
      await redis.stop();
    });

    it('per key, per address and global: the same decisions, the rule name as the keys hash tag', async () => {
      await combinedRule(`store: { type: redis, url: "${redis.url}", timeout: 500ms }`);
      const client = new Redis(redis.url);
      try {
        // Redis hashes a key by its {tag}: every key of the rule in one slot, so one script can decide them on a cluster.
        const keys = await client.keys('*');
        assert.ok(keys.length > 0);
        assert.ok(
          keys.every((k) => k.startsWith('{combined}')),
          `every key of the rule hashes by the rule's name: ${keys.join(' ')}`,
        );
      } finally {
        client.disconnect();
      }
    });
  });
});

describe('gateway: key: global on a rule', () => {
  it('one counter for every client, whatever address or headers they send', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\ntrustProxy: [loopback]\nrules:\n  - name: all\n    key: global\n    policies: ["2/1m"]\n`,
    );
    assert.equal((await get(`${g.url}/x`, from('10.0.1.1', 'a'))).status, 200);
    assert.equal((await get(`${g.url}/x`, from('10.0.1.2', 'b', { 'x-global': 'other' }))).status, 200);
    assert.equal((await get(`${g.url}/x`, from('10.0.1.3', 'c'))).status, 429);
  });
});

describe('gateway config: a policy key', () => {
  const rule = (policy: string, key = 'header:x-api-key'): string =>
    `rules:\n  - name: r\n    key: ${key}\n    policies:\n      - "1/1m"\n      - ${policy}\n`;

  it('accepts ip, global and the rule own header key', async () => {
    const s = await parseConfigText(
      rule('{ name: a, limit: 2, window: 1m, key: ip }').replace(
        '      - "1/1m"\n',
        '      - "1/1m"\n      - { name: g, limit: 9, window: 1s, key: global }\n',
      ),
      'f.yaml',
    );
    assert.deepEqual(
      s.rules[0]!.policies.map((p) => p.key),
      [undefined, 'global', 'ip'],
    );
    const same = await parseConfigText(rule('{ name: h, limit: 2, window: 1m, key: "header:x-api-key" }'), 'f.yaml');
    assert.equal(same.rules[0]!.policies[1]!.key, undefined, "the rule's own key is the default");
  });

  it('refuses another header, an unknown form and a bad type, naming file, line and field', async () => {
    await assert.rejects(
      parseConfigText(rule('{ limit: 2, window: 1m, key: "header:x-user" }'), 'f.yaml'),
      (e: unknown) =>
        e instanceof FloodgateError &&
        /^f\.yaml:6:\d+: rules\[0\]\.policies\[1\]\.key: a policy may count by "ip" or "global", or by the rule's own key; "header:x-user" is another header\. Key the rule by that header \(key: header:x-user\) and give its other policies key: ip or key: global\.$/.test(
          e.message,
        ),
    );
    await assert.rejects(
      parseConfigText(rule('{ limit: 2, window: 1m, key: everyone }'), 'f.yaml'),
      (e: unknown) =>
        e instanceof FloodgateError &&
        /f\.yaml:6:\d+: rules\[0\]\.policies\[1\]\.key: must be "ip" \(the client address\), "global" \(one counter for every request the rule matches\) or the rule's own header key; got "everyone"\. Leave it out to count by the rule's key\./.test(
          e.message,
        ),
    );
    await assert.rejects(
      parseConfigText(rule('{ limit: 2, window: 1m, key: 7 }'), 'f.yaml'),
      /rules\[0\]\.policies\[1\]\.key: must be "ip" .*; got 7\./,
    );
  });
});
