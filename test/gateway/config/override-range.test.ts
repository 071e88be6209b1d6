// Overrides whose limit × window passes 2^50 are refused where they enter (admin PUT 400 with its code, a config error, a Redis entry left out with a throttled log line that shows no pattern in clear), never at request time as a 500. Real gateways, real redis-server, real sockets.
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

const TOKEN = 'test-admin-token-override-range-0123';
const fixture = redisGatewayFixture();
const RULE =
  '  - name: api\n    key: { header: x-api-key }\n    policies: [{ name: per-minute, limit: 3, window: 1m }, { name: per-hour, limit: 50, window: 1h }]\n';
/** 2^40 a minute: 2^40 × 60 000 ms is far past 2^50. */
const HUGE = { 'per-minute': { limit: 2 ** 40 } };

async function gateway(store: 'memory' | 'redis', overrides: string, logLines?: Array<Record<string, unknown>>): Promise<Gateway> {
  const storeLine = store === 'redis' ? `store: { type: redis, url: "${fixture.redis.url}", timeout: 500ms }\n` : '';
  const g = await fixture.start(
    `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}${storeLine}rules:\n${RULE}    overrides:\n${overrides}`,
    {},
    logLines,
  );
  await untilReady(`${g.adminUrl}/readyz`, 100);
  return g;
}

/** The statuses of `n` requests with `key`. */
async function statuses(g: Gateway, key: string, n: number): Promise<number[]> {
  const out = [];
  for (let i = 0; i < n; i++) out.push((await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status);
  return out;
}

describe('F11: overrides out of range', () => {
  it('F11: an admin PUT of an override with limit × window over 2^50 answers 400 FLOODGATE_LIMIT_TOO_LARGE, and "*" does not take the rule down', async () => {
    const g = await gateway('memory', '      keys: {}\n');
    for (const value of [HUGE, { 'per-hour': '1000000000/1d' }, { 'per-minute': { window: '3650d' }, 'per-hour': { limit: 2 ** 45 } }]) {
      const r = await adminJson(g.adminUrl!, TOKEN, 'PUT', '/admin/rules/api/overrides/*', JSON.stringify({ value }));
      assert.equal(r.status, 400, JSON.stringify(value));
      assert.equal(r.json.code, 'FLOODGATE_LIMIT_TOO_LARGE');
      assert.equal(r.json.field, 'value');
      assert.match(r.json.error, /policy "per-(minute|hour)": .*2\^50/);
    }
    assert.deepEqual((await adminJson(g.adminUrl!, TOKEN, 'GET', '/admin/rules/api/overrides')).json.entries, []);
    assert.deepEqual(await statuses(g, 'anyone', 4), [200, 200, 200, 429], "the rule's own limit, no 500");
  });

  it("F11: an out-of-range entry already in the Redis hash is left out with a throttled log line that shows no pattern in clear; the rule's own limit applies", async () => {
    const cli = (...args: string[]) => promisify(execFile)('redis-cli', ['-p', String(fixture.redis.port), ...args]);
    await cli(
      'HSET',
      'fg:range',
      '*',
      JSON.stringify(HUGE),
      'sk-live-secret-tenant',
      JSON.stringify(HUGE),
      'fine',
      '{"per-minute":"5/1m"}',
    );
    const logs: Array<Record<string, unknown>> = [];
    const g = await gateway('redis', '      redis: "fg:range"\n', logs);
    // Each change of the hash reads the bad entries again; the log line stays one per 10 s.
    for (let i = 0; i < 5; i++) await cli('PUBLISH', 'fg:range:changed', '*');
    await sleep(200);
    assert.deepEqual(await statuses(g, 'sk-live-secret-tenant', 4), [200, 200, 200, 429], "the rule's own limit, no 500");
    assert.deepEqual(await statuses(g, 'someone', 4), [200, 200, 200, 429]);
    assert.deepEqual(await statuses(g, 'fine', 6), [200, 200, 200, 200, 200, 429], 'the good entry applies');
    const refused = logs.filter((l) => String(l.msg).startsWith('override entry refused'));
    assert.equal(refused.length, 1, JSON.stringify(refused));
    assert.match(String(refused[0]!.pattern), /^key#[0-9a-f]{12}$/);
    assert.match(String(refused[0]!.msg), /2\^50/);
    assert.doesNotMatch(JSON.stringify(logs), /sk-live-secret-tenant/, 'no pattern in clear');
  });

  it('F11: an out-of-range entry in the config file is a config error naming its place', async () => {
    const yaml = `upstream: http://127.0.0.1:1\nrules:\n${RULE}    overrides:\n      keys: { "*": { per-minute: { limit: ${2 ** 40} } } }\n`;
    await assert.rejects(parseConfigText(yaml, 'f.yaml', {}), /overrides\.keys\.\*.*per-minute.*2\^50/s);
  });
});

describe('the "override entry refused" log line shows the pattern in clear', () => {
  it('the "override entry refused" log line shows the pattern in clear: it shows key# and 12 hex digits of its SHA-256 instead', async () => {
    const cli = (...args: string[]) => promisify(execFile)('redis-cli', ['-p', String(fixture.redis.port), ...args]);
    await cli('HSET', 'fg:names', 'sk-live-another-secret', 'no-such-plan');
    const logs: Array<Record<string, unknown>> = [];
    await gateway('redis', '      redis: "fg:names"\n', logs);
    for (let i = 0; i < 100 && !logs.some((l) => String(l.msg).startsWith('override entry refused')); i++) await sleep(10);
    const line = logs.find((l) => String(l.msg).startsWith('override entry refused'));
    assert.ok(line !== undefined, JSON.stringify(logs));
    assert.match(String(line.pattern), /^key#[0-9a-f]{12}$/);
    assert.doesNotMatch(JSON.stringify(logs), /sk-live-another-secret/);
  });
});
