// Floods of long made-up keys, through the proxy port on real sockets, against the tables kept of client keys: the most-limited keys and the cache of a Redis allow list. Each must stay bounded in characters, not only in entries.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { UNKNOWN_CHARS_PER_ENTRY } from '../../../src/gateway/rules/known-keys.js';
import { HASHED_KEY_PREFIX } from '../../../src/http/client-keys.js';
import { LIMITED_MINUTES, LIMITED_TABLE_SIZE, type LimitedKeys } from '../../../src/gateway/admin/limited-keys.js';
import { get } from '../../http/support/http.js';
import { adminBlock } from '../support/admin.js';
import { untilReady } from '../support/harness.js';
import { floodKeys } from '../support/key-flood.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const TOKEN = 'attack-admin-token-0123456789abcdef';
/** Near the default proxy.maxHeaderSize (16 KiB): as long as a key can be. */
const LONG = 15_000;

const fixture = redisGatewayFixture();

const longKeys = (n: number): string[] => Array.from({ length: n }, () => randomBytes(LONG / 2).toString('hex'));

/** Characters of the keys an allow list caches as unknown, read from the table itself. */
const unknownChars = (known: object): number =>
  [...(known as { unknown: Map<string, number> }).unknown.keys()].reduce((n, k) => n + k.length, 0);

describe('attack: long made-up keys against the admin-side tables', { timeout: 120_000 }, () => {
  it('holds: refusals of 1 500 keys of 15 000 characters keep the most-limited table small, since the rules count a long key by its 50-character hash', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}` +
        'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { limit: 1, window: 1h }\n',
    );
    const keys = longKeys(1_500);
    const statuses = await floodKeys(g.url, keys, 2);
    assert.equal(statuses.get(429), keys.length, 'each key refused once');
    const limited = (g as unknown as { limited: LimitedKeys }).limited;
    const listed = limited.top('api', LIMITED_MINUTES, Number.MAX_SAFE_INTEGER);
    assert.ok(listed.length > 0 && listed.length <= 2 * LIMITED_TABLE_SIZE, `${listed.length} keys listed`);
    assert.ok(
      listed.every((k) => k.key.startsWith(HASHED_KEY_PREFIX) && k.key.length === 50),
      'only hashes are held',
    );
  });

  it('regression: 2 000 made-up keys of 15 000 characters keep the unknown cache of a Redis allow list under cacheSize × UNKNOWN_CHARS_PER_ENTRY characters (it held 10 000 × 16 KiB)', async () => {
    const admin = new Redis(fixture.redis.url);
    await admin.del('fg:attack-known');
    await admin.sadd('fg:attack-known', 'key-real');
    admin.disconnect();
    const cacheSize = 1_000;
    const g = await fixture.start(`upstream: ${fixture.upstream.url}
store: { type: redis, url: "${fixture.redis.url}" }
rules:
  - name: api
    key: { header: x-api-key, allowList: { redis: "fg:attack-known", cacheSize: ${cacheSize}, unknownFor: 30s } }
    policies: ["1000/1m"]`);
    await untilReady(`${g.url}/_floodgate/readyz`);
    assert.equal((await get(`${g.url}/`, { headers: { 'x-api-key': 'key-real' } })).status, 200);
    const statuses = await floodKeys(g.url, longKeys(2_000));
    assert.equal(statuses.get(200), undefined, 'no made-up key admitted');
    const known = (g as unknown as { rules: RuleSet }).rules.rules[0]!.knownKeys!;
    const budget = cacheSize * UNKNOWN_CHARS_PER_ENTRY;
    assert.ok(unknownChars(known) <= budget, `${unknownChars(known)} characters cached`);
    assert.equal(known.cachedUnknownChars, unknownChars(known), 'the cache counts what it holds');
    assert.ok(known.cached.unknown > 0, 'long unknown keys are still cached, fewer of them');
    // Short made-up keys fill the table by count as before.
    await floodKeys(
      g.url,
      Array.from({ length: 1_500 }, (_, i) => `short-${i}`),
    );
    assert.ok(known.cached.unknown <= cacheSize && unknownChars(known) <= budget, JSON.stringify(known.cached));
    assert.equal(known.cachedUnknownChars, unknownChars(known));
    assert.equal((await get(`${g.url}/`, { headers: { 'x-api-key': 'key-real' } })).status, 200, 'the known key still passes');
  });
});
