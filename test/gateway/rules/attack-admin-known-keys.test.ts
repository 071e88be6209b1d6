// Attacks on a rule whose keys must be listed in a Redis set, on a real redis-server: keys of odd bytes, padded or repeated key headers, made-up keys repeated to make each a Redis call, and Redis gone under each failure policy.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { get } from '../../http/support/http.js';
import { untilReady } from '../support/harness.js';
import { requestBytes, sendRaw } from '../support/raw.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const SET = 'fg:attack-known-keys';
const fixture = redisGatewayFixture();
let admin: Redis;
before(async () => {
  await fixture.ready();
  admin = new Redis(fixture.redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  admin.on('error', () => {});
});
after(() => {
  admin.disconnect();
});

async function gateway(onFailure: string, extra = ''): Promise<Gateway> {
  const g = await fixture.start(`upstream: ${fixture.upstream.url}
store: { type: redis, url: "${fixture.redis.url}", timeout: 200ms, onFailure: ${onFailure} }
rules:
  - name: api
    key: { header: x-api-key, allowList: { redis: "${SET}"${extra} } }
    policies: ["1000/1m"]`);
  await untilReady(`${g.url}/_floodgate/readyz`);
  return g;
}

/** The status of one request with the header lines given, sent as latin1 bytes. */
async function statusOf(base: string, headers: readonly string[]): Promise<number> {
  return (await sendRaw(base, requestBytes('GET /x HTTP/1.1', headers))).statuses[0] ?? 0;
}

async function smismemberCalls(): Promise<number> {
  const m = /cmdstat_smismember:calls=(\d+)/.exec(await admin.info('commandstats'));
  return m === null ? 0 : Number(m[1]);
}

describe('attack: keys that must be listed in Redis', { timeout: 60_000 }, () => {
  it('holds: odd bytes, padding and a second header admit nothing the set does not hold as read', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'real-key', 'é');
    const g = await gateway('fail-closed');
    assert.equal(await statusOf(g.url, ['X-Api-Key: real-key']), 200);
    // Spaces and tabs around the value are not part of it, for the check and the count alike.
    assert.equal(await statusOf(g.url, ['X-Api-Key: \t real-key \t ']), 200);
    // So is a no-break space (0xA0), which the check and the count both trim: the same key, the same quota.
    assert.equal(await statusOf(g.url, ['X-Api-Key: real-key\xa0']), 200);
    for (const headers of [
      ['X-Api-Key: real-key', 'X-Api-Key: made-up'],
      ['X-Api-Key: made-up', 'X-Api-Key: real-key'],
      ['X-Api-Key: real-key, made-up'],
      ['X-Api-Key: REAL-KEY'],
      ['X-Api-Key: real-key\x7f'],
      ['X-Api-Key: real\x00key'],
      // é as UTF-8 bytes reads as two latin1 characters, another key than the member é.
      ['X-Api-Key: \xc3\xa9'],
      ['X-Api-Key: real-key', 'X-API-KEY: real-key'],
    ])
      assert.notEqual(await statusOf(g.url, headers), 200, JSON.stringify(headers));
  });

  it('holds: a made-up key sent again and again costs one Redis call per unknownFor, not one per request', async () => {
    await admin.del(SET);
    const g = await gateway('fail-closed', ', unknownFor: 30s');
    await admin.config('RESETSTAT');
    const statuses = await Promise.all(Array.from({ length: 200 }, () => get(`${g.url}/x`, { headers: { 'x-api-key': 'same-made-up' } })));
    for (let i = 0; i < 200; i += 1) assert.equal((await get(`${g.url}/x`, { headers: { 'x-api-key': 'same-made-up' } })).status, 401);
    assert.ok(
      statuses.every((r) => r.status === 401),
      statuses.map((r) => r.status).join(' '),
    );
    assert.ok((await smismemberCalls()) <= 2, `${await smismemberCalls()} calls`);
  });

  it('holds: with Redis stopped, fail-closed and insurance refuse uncached keys with 503 and fail-open admits them; a cached known key passes under all three', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'cached-key', 'uncached-key');
    const gs = {
      'fail-closed': await gateway('fail-closed'),
      insurance: await gateway('insurance'),
      'fail-open': await gateway('fail-open'),
    };
    for (const g of Object.values(gs)) assert.equal(await statusOf(g.url, ['X-Api-Key: cached-key']), 200);
    fixture.redis.pause();
    try {
      const got: Record<string, number[]> = {};
      for (const [policy, g] of Object.entries(gs))
        got[policy] = [
          await statusOf(g.url, ['X-Api-Key: cached-key']),
          await statusOf(g.url, ['X-Api-Key: uncached-key']),
          await statusOf(g.url, ['X-Api-Key: made-up-while-down']),
        ];
      assert.deepEqual(got['fail-closed']!.slice(1), [503, 503]);
      assert.deepEqual(got.insurance!.slice(1), [503, 503]);
      // Fail-open admits what it cannot check: a made-up key too, by design of that policy.
      assert.deepEqual(got['fail-open']!.slice(1), [200, 200]);
      for (const [policy, g] of Object.entries(gs)) {
        assert.notEqual(got[policy]![0], 401, `${policy}: the cached known key is not refused as unknown`);
        assert.equal((g as unknown as { rules: RuleSet }).rules.rules[0]!.knownKeys!.lookups, 0, `${policy}: nothing left waiting`);
      }
    } finally {
      fixture.redis.resume();
    }
  });
});
