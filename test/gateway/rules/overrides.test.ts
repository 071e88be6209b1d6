// Plans and per-key overrides in the gateway: from the config file, from a Redis hash changed live (redis-cli or the admin API), never resetting a key's counter; the admin endpoints and the config errors.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { adminBlock, adminJson } from '../support/admin.js';
import { sleep, untilReady } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const TOKEN = 'test-admin-token-overrides-0123456789';
const fixture = redisGatewayFixture();

const PLANS = 'plans:\n  pro: { per-minute: 6/1m, per-hour: { limit: 100 } }\n  trial: { per-minute: "1/1m" }\n';
const RULE =
  '  - name: api\n    key: "header:x-api-key"\n    policies: [{ name: per-minute, limit: 3, window: 1m }, { name: per-hour, limit: 50, window: 1h }]\n';

async function gateway(store: 'memory' | 'redis', overrides: string): Promise<Gateway> {
  const storeLine = store === 'redis' ? `store: { type: redis, url: "${fixture.redis.url}", timeout: 500ms }\n` : '';
  const g = await fixture.start(
    `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}${storeLine}${PLANS}rules:\n${RULE}    overrides:\n${overrides}`,
  );
  await untilReady(`${g.adminUrl}/readyz`, 100);
  return g;
}

/** Requests until one is refused: how many were admitted, and the last admitted one's RateLimit-Policy field. */
async function admitted(g: Gateway, key: string): Promise<number> {
  let n = 0;
  while ((await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status === 200) n++;
  return n;
}

/** An admin API call on `g` with the token; `body` is sent as JSON. */
const admin = (g: Gateway, method: string, path: string, body?: unknown) =>
  adminJson(g.adminUrl!, TOKEN, method, path, body === undefined ? undefined : JSON.stringify(body));

describe('overrides from the config file', () => {
  it('an exact key gets its plan, a pattern its numbers, other keys the rule policies; the headers show the numbers in force', async () => {
    const g = await gateway('memory', '      keys: { tenant-42: pro, "trial-*": trial, "big-*": { per-minute: { limit: 5 } } }\n');
    assert.equal(await admitted(g, 'tenant-42'), 6);
    assert.equal(await admitted(g, 'trial-abc'), 1);
    assert.equal(await admitted(g, 'big-1'), 5);
    assert.equal(await admitted(g, 'someone'), 3);
    const res = await get(`${g.url}/x`, { headers: { 'x-api-key': 'big-2' } });
    assert.match(String(res.headers['ratelimit-policy']), /"per-minute";q=5;w=60/);
    const inspected = await admin(g, 'GET', '/admin/rules/api/keys/trial-abc');
    assert.equal(inspected.json.override, 'trial-*');
    assert.equal(inspected.json.policies[0].limit, 1);
    assert.equal(inspected.json.policies[1].limit, 50, 'the plan leaves per-hour as the rule has it');
  });

  it('the admin API lists plans and entries, sets and removes one in this process (no Redis), and refuses bad values with 400', async () => {
    const g = await gateway('memory', '      keys: { tenant-42: pro }\n');
    assert.deepEqual((await admin(g, 'GET', '/admin/plans')).json.plans.trial, { 'per-minute': { limit: 1, window: 60_000 } });
    const list = await admin(g, 'GET', '/admin/rules/api/overrides');
    assert.deepEqual(list.json, { rule: 'api', redis: null, entries: [{ pattern: 'tenant-42', value: 'pro', source: 'config' }] });
    assert.equal(await admitted(g, 'cust'), 3);
    const put = await admin(g, 'PUT', '/admin/rules/api/overrides/cust', { value: { 'per-minute': '5/1m' } });
    assert.equal(put.status, 200);
    assert.equal(put.json.entry.source, 'admin');
    assert.equal(await admitted(g, 'cust'), 2, 'the 3 used before stay counted: 5 − 3');
    assert.equal((await admin(g, 'DELETE', '/admin/rules/api/overrides/cust')).status, 200);
    assert.equal(await admitted(g, 'cust'), 0);
    assert.equal((await admin(g, 'DELETE', '/admin/rules/api/overrides/cust')).status, 404);
    for (const value of [
      'gold',
      '7/1m',
      { 'per-day': '1/1d' },
      { 'per-minute': { limit: 0 } },
      { 'per-minute': { algorithm: 'token-bucket' } },
    ]) {
      const bad = await admin(g, 'PUT', '/admin/rules/api/overrides/cust', { value });
      assert.equal(bad.status, 400, JSON.stringify(value));
      assert.equal(bad.json.field, 'value');
    }
    assert.equal((await admin(g, 'PUT', '/admin/rules/api/overrides/cust', { plan: 'pro' })).status, 400);
    assert.equal((await admin(g, 'POST', '/admin/rules/api/overrides/cust', { value: 'pro' })).status, 405);
    const noToken = await fetch(`${g.adminUrl}/admin/rules/api/overrides/cust`, { method: 'PUT', body: '{"value":"pro"}' });
    assert.equal(noToken.status, 401);
    for (const [method, path] of [
      ['GET', '/admin/plans'],
      ['PUT', '/admin/rules/api/overrides/cust'],
      ['DELETE', '/admin/rules/api/overrides/cust'],
    ] as const) {
      const seen = fixture.upstream.seen.length;
      const headers = { authorization: `Bearer ${TOKEN}`, 'x-api-key': 'proxy-check' };
      await fetch(`${g.url}${path}`, { method, headers, body: method === 'PUT' ? '{"value":"pro"}' : null });
      assert.equal(fixture.upstream.seen.at(-1)?.url, path, `${method} ${path} on the proxy port is a request like any other, forwarded`);
      assert.equal(fixture.upstream.seen.length, seen + 1);
    }
    assert.equal((await admin(g, 'GET', '/admin/rules/api/overrides/cust')).json.entry, null, 'the PUT on the proxy port changed nothing');
  });

  it('config mistakes are refused with the place and what was meant', async () => {
    const parse = (yaml: string) => parseConfigText(`upstream: http://127.0.0.1:1\n${PLANS}rules:\n${RULE}${yaml}`, '/tmp/test.yaml');
    await assert.rejects(parse('    overrides: { keys: { a: gold } }\n'), /names no plan: "gold"; the plans are "pro", "trial"/);
    await assert.rejects(parse('    overrides: { keys: { a: "5/1m" } }\n'), /this rule has 2 policies, so say which one/);
    await assert.rejects(
      parse('    overrides: { keys: { a: { per-day: 5/1d } } }\n'),
      /changes policy "per-day", which this rule does not have/,
    );
    await assert.rejects(parse('    overrides: { redis: fg:o }\n'), /names a Redis hash, but the gateway has no Redis store/);
    await assert.rejects(parse('    overrides: { keys: { a: { per-minute: { limit: -1 } } } }\n'), /limit must be a positive whole number/);
    await assert.rejects(parse('    overrides: { kes: {} }\n'), /unknown field "kes"/);
  });
});

describe('overrides in a Redis hash', () => {
  const cli = (...args: string[]) => promisify(execFile)('redis-cli', ['-p', String(fixture.redis.port), ...args]);

  it('entries in the hash at start apply; redis-cli HSET + PUBLISH applies live; a value a rule refuses is logged and left out', async () => {
    await cli('HSET', 'fg:overrides:a', 'tenant-1', 'pro', 'tenant-2', '{"per-minute":"4/1m"}', 'bad', 'gold');
    const g = await gateway('redis', '      redis: "fg:overrides:a"\n');
    assert.equal(await admitted(g, 'tenant-1'), 6);
    assert.equal(await admitted(g, 'tenant-2'), 4);
    assert.equal(await admitted(g, 'bad'), 3);
    const list = await admin(g, 'GET', '/admin/rules/api/overrides');
    assert.deepEqual(list.json.entries.map((e: { pattern: string }) => e.pattern).sort(), ['tenant-1', 'tenant-2']);
    await cli('HSET', 'fg:overrides:a', 'tenant-3', 'trial');
    await cli('PUBLISH', 'fg:overrides:a:changed', 'tenant-3');
    for (let i = 0; i < 100 && (await admin(g, 'GET', '/admin/rules/api/keys/tenant-3')).json.override === undefined; i++) await sleep(10);
    assert.equal(await admitted(g, 'tenant-3'), 1);
  });

  it('a PUT through the admin API writes the hash; a restarted gateway reads it; DELETE removes it everywhere', async () => {
    const g = await gateway('redis', '      redis: "fg:overrides:b"\n');
    assert.equal((await admin(g, 'PUT', '/admin/rules/api/overrides/vip-*', { value: 'pro' })).status, 200);
    assert.equal((await cli('HGET', 'fg:overrides:b', 'vip-*')).stdout.trim(), '"pro"');
    assert.equal(await admitted(g, 'vip-9'), 6);
    const again = await gateway('redis', '      redis: "fg:overrides:b"\n');
    assert.equal((await admin(again, 'GET', '/admin/rules/api/keys/vip-9')).json.override, 'vip-*');
    assert.equal(await admitted(again, 'vip-9'), 0, 'the same counter in Redis: spent');
    assert.equal((await admin(g, 'DELETE', '/admin/rules/api/overrides/vip-*')).status, 200);
    assert.equal((await cli('HEXISTS', 'fg:overrides:b', 'vip-*')).stdout.trim(), '0');
  });
});
