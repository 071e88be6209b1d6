// Rules whose API keys must be listed in a Redis set, on a real redis-server: known and unknown keys, SADD/SREM taking effect within
// the cache times, a flood of made-up keys costing few Redis calls and bounded memory, and each failure policy while Redis is down.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { get } from '../../http/support/http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { sleep, untilReady } from '../support/harness.js';
import { floodKeys } from '../support/key-flood.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const fixture = redisGatewayFixture();
let admin: Redis;
const rejections: unknown[] = [];
const onRejection = (reason: unknown): void => void rejections.push(reason);
before(async () => {
  await fixture.ready();
  admin = new Redis(fixture.redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  admin.on('error', () => {});
  process.on('unhandledRejection', onRejection);
});
after(() => {
  process.off('unhandledRejection', onRejection);
  admin.disconnect();
});

const SET = 'fg:known-keys';
const h = (key: string) => ({ headers: { 'x-api-key': key } });

async function gateway(allowList: string, onFailure = 'fail-closed'): Promise<Gateway> {
  const g = await fixture.start(`upstream: ${fixture.upstream.url}
store: { type: redis, url: "${fixture.redis.url}", timeout: 200ms, onFailure: ${onFailure} }
rules:
  - name: api
    key: { header: x-api-key, maxLength: 64, allowList: ${allowList} }
    policies: ["1000/1m"]`);
  await untilReady(`${g.url}/_floodgate/readyz`);
  return g;
}

const rulesOf = (g: Gateway): RuleSet => (g as unknown as { rules: RuleSet }).rules;
/** Keys the rule's limiter wrote in Redis (under its prefix fg:gw:api:..., inside a hash tag). */
const counterKeys = async (): Promise<string[]> => (await admin.keys('*fg:gw:api:*')).sort();

async function commandCalls(name: string): Promise<number> {
  const info = await admin.info('commandstats');
  const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info);
  return m === null ? 0 : Number(m[1]);
}

/** Polls until `key` gets `status`; returns the ms it took from `since`. */
async function within(g: Gateway, key: string, status: number, since: number, limitMs: number): Promise<number> {
  for (;;) {
    const got = (await get(`${g.url}/`, h(key))).status;
    const took = Date.now() - since;
    if (got === status) return took;
    assert.ok(took < limitMs, `${key} still answered ${got} after ${took} ms (wanted ${status} within ${limitMs} ms)`);
    await sleep(20);
  }
}

describe('allowList in a Redis set', () => {
  it('admits a key in the set; refuses one not in it with 401 and writes no counter for it', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'key-alpha');
    const g = await gateway(`{ redis: "${SET}" }`);
    assert.equal((await get(`${g.url}/`, h('key-alpha'))).status, 200);
    const before = await counterKeys();
    assert.ok(
      before.some((k) => k.includes('key-alpha')),
      `the known key was counted: ${before.join(' ')}`,
    );
    const refused = await get(`${g.url}/`, h('key-made-up'));
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['www-authenticate'], 'ApiKey header="x-api-key"');
    assert.match(refused.body, /The API key in x-api-key is not valid/);
    assert.deepEqual(await counterKeys(), before, 'the unknown key touched no counter');
    // A missing key is the limiter's answer, as without an allow list; a key too long never costs a lookup.
    assert.equal((await get(`${g.url}/`)).status, 401);
    const calls = await commandCalls('smismember');
    assert.equal((await get(`${g.url}/`, h('x'.repeat(65)))).status, 401);
    assert.equal(await commandCalls('smismember'), calls);
  });

  it('a key added with SADD is admitted within unknownFor, a key removed with SREM refused within knownFor', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'key-stays');
    const g = await gateway(`{ redis: "${SET}", knownFor: 800ms, unknownFor: 300ms }`);
    assert.equal((await get(`${g.url}/`, h('key-new'))).status, 401, 'not listed yet (and now cached as unknown)');
    let since = Date.now();
    await admin.sadd(SET, 'key-new');
    const added = await within(g, 'key-new', 200, since, 300 + 250);
    assert.equal((await get(`${g.url}/`, h('key-new'))).status, 200, 'cached as known now');
    since = Date.now();
    await admin.srem(SET, 'key-new');
    const removed = await within(g, 'key-new', 401, since, 800 + 250);
    assert.equal((await get(`${g.url}/`, h('key-stays'))).status, 200);
    console.log(`known keys: added admitted after ${added} ms (unknownFor 300 ms), removed refused after ${removed} ms (knownFor 800 ms)`);
  });

  it('a flood of 10 000 made-up keys costs a bounded number of Redis calls and a bounded cache, and known keys pass meanwhile', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'key-real');
    const g = await gateway(`{ redis: "${SET}", cacheSize: 1000, maxLookups: 2000 }`);
    assert.equal((await get(`${g.url}/`, h('key-real'))).status, 200);
    await admin.config('RESETSTAT');
    const counters = await counterKeys();
    const n = 10_000;
    const started = Date.now();
    const flood = floodKeys(
      g.url,
      Array.from({ length: n }, () => randomBytes(12).toString('hex')),
      1,
      100,
    );
    const realDuring = (await get(`${g.url}/`, h('key-real'))).status;
    const statuses = await flood;
    const tookMs = Date.now() - started;
    const calls = await commandCalls('smismember');
    const known = rulesOf(g).rules[0]!.knownKeys!;
    console.log(
      `flood: ${n} made-up keys in ${tookMs} ms → ${calls} SMISMEMBER calls; statuses ${JSON.stringify([...statuses])}; cache ${JSON.stringify(known.cached)}`,
    );
    assert.equal(realDuring, 200, 'the known key, cached, passes during the flood');
    assert.equal(statuses.get(200), undefined, 'no made-up key was admitted');
    assert.equal((statuses.get(401) ?? 0) + (statuses.get(503) ?? 0), n);
    // Keys asked while both calls are out go together in the next one: far fewer calls than keys.
    assert.ok(calls <= n / 5, `${calls} calls for ${n} keys`);
    assert.ok(known.cached.unknown <= 1000 && known.cached.known <= 1000, `cache bounded: ${JSON.stringify(known.cached)}`);
    assert.equal(known.lookups, 0, 'nothing left under way');
    assert.deepEqual(await counterKeys(), counters, 'no made-up key touched a counter');
  });

  it('concurrent requests with one uncached key share one lookup', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'key-shared');
    const g = await gateway(`{ redis: "${SET}" }`);
    await admin.config('RESETSTAT');
    const got = await Promise.all(Array.from({ length: 40 }, async () => (await get(`${g.url}/`, h('key-shared'))).status));
    assert.deepEqual(new Set(got), new Set([200]));
    assert.ok((await commandCalls('smismember')) <= 2, 'one lookup (two if the requests spanned two turns)');
  });

  it('a stalled Redis holds at most maxLookups keys: the rest are answered 503 at once, none waits past store.timeout', async () => {
    await admin.del(SET);
    const g = await gateway(`{ redis: "${SET}", maxLookups: 5 }`);
    fixture.redis.pause();
    let replies;
    try {
      replies = await Promise.all(Array.from({ length: 20 }, (_, i) => get(`${g.url}/`, h(`key-stalled-${i}`))));
    } finally {
      fixture.redis.resume();
    }
    const busy = replies.filter((r) => r.status === 503 && /Too many API keys/.test(r.body));
    const unavailable = replies.filter((r) => r.status === 503 && /cannot be read right now/.test(r.body));
    assert.equal(busy.length + unavailable.length, 20, `all 503: ${replies.map((r) => r.status).join(' ')}`);
    assert.ok(unavailable.length >= 5 && busy.length >= 1, `${unavailable.length} looked up, ${busy.length} turned away`);
    assert.ok(
      replies.every((r) => r.elapsedMs < 1500),
      `none left hanging: ${replies.map((r) => r.elapsedMs).join(' ')} ms`,
    );
    assert.equal(rulesOf(g).rules[0]!.knownKeys!.lookups, 0);
  });

  it('Redis down: fail-closed answers 503 for keys not cached, fail-open admits them; recovers after restart; no unhandled rejection', async () => {
    await admin.del(SET);
    await admin.sadd(SET, 'key-cached', 'key-later');
    const closed = await gateway(`{ redis: "${SET}" }`, 'fail-closed');
    const open = await gateway(`{ redis: "${SET}" }`, 'fail-open');
    assert.equal((await get(`${closed.url}/`, h('key-cached'))).status, 200);

    fixture.redis.pause();
    try {
      const stalled = await get(`${closed.url}/`, h('key-later'));
      assert.equal(stalled.status, 503, 'stalled Redis, fail-closed');
      assert.equal(stalled.headers['retry-after'], '1');
      assert.match(stalled.body, /cannot be read right now/);
      assert.ok(stalled.elapsedMs < 1000, `answered after the store timeout, not left hanging (${stalled.elapsedMs} ms)`);
      assert.equal((await get(`${open.url}/`, h('key-unlisted'))).status, 200, 'stalled Redis, fail-open admits');
    } finally {
      fixture.redis.resume();
    }
    await fixture.redis.kill();
    const down = await get(`${closed.url}/`, h('key-later'));
    assert.equal(down.status, 503, 'Redis killed, fail-closed');
    assert.ok(down.elapsedMs < 1000, `answered at once (${down.elapsedMs} ms)`);
    // A key cached as known stays known for knownFor; fail-closed then refuses it at the counter (the store is down).
    assert.equal((await get(`${open.url}/`, h('another-unlisted'))).status, 200, 'Redis killed, fail-open');

    await fixture.redis.restart();
    // The restarted Redis starts empty: list the key again, as an operator restoring it would.
    for (let i = 0; i < 100 && admin.status !== 'ready'; i += 1) await sleep(20);
    await admin.sadd(SET, 'key-later');
    await within(closed, 'key-later', 200, Date.now(), 3000);
    assert.equal((await get(`${closed.url}/`, h('still-unlisted'))).status, 401, 'answers from Redis again');
    assert.equal((await get(`${open.url}/`, h('still-unlisted'))).status, 401, 'fail-open refuses unknown keys again');
    // The change subscription came back with the connection: an announced change is applied at once again.
    for (let i = 0; i < 100; i += 1) {
      const [, subscribers] = (await admin.pubsub('NUMSUB', `${SET}:changed`)) as [string, number];
      if (Number(subscribers) >= 2) break;
      await sleep(20);
    }
    const since = Date.now();
    await admin.sadd(SET, 'still-unlisted');
    await admin.publish(`${SET}:changed`, 'still-unlisted');
    await within(closed, 'still-unlisted', 200, since, 500);
    await sleep(300);
    assert.deepEqual(rejections, []);
  });

  it('SADD/SREM announced with PUBLISH <set>:changed, or seen as keyspace events, take effect on every host at once', async () => {
    const set = 'fg:known-keys-live';
    await admin.del(set);
    const [a, b] = [await gateway(`{ redis: "${set}", knownFor: 30s, unknownFor: 30s }`), await gateway(`{ redis: "${set}" }`)];
    for (let i = 0; i < 100; i += 1) {
      const [, subscribers] = (await admin.pubsub('NUMSUB', `${set}:changed`)) as [string, number];
      if (Number(subscribers) >= 2) break;
      await sleep(20);
    }
    const both = async (key: string): Promise<number[]> => [
      (await get(`${a.url}/`, h(key))).status,
      (await get(`${b.url}/`, h(key))).status,
    ];
    assert.deepEqual(await both('key-live'), [401, 401], 'not listed, and now cached as unknown on both hosts');
    let since = Date.now();
    await admin.sadd(set, 'key-live');
    await admin.publish(`${set}:changed`, 'key-live');
    const addedA = await within(a, 'key-live', 200, since, 500);
    const addedB = await within(b, 'key-live', 200, since, 500);
    since = Date.now();
    await admin.srem(set, 'key-live');
    await admin.publish(`${set}:changed`, 'key-live');
    const removedA = await within(a, 'key-live', 401, since, 500);
    const removedB = await within(b, 'key-live', 401, since, 500);
    // With keyspace events for sets on, a bare SADD is heard too (it names the set, not the key: the whole cache is asked again).
    await admin.config('SET', 'notify-keyspace-events', 'Ks');
    try {
      assert.deepEqual(await both('key-bare'), [401, 401]);
      since = Date.now();
      await admin.sadd(set, 'key-bare');
      const bare = await within(a, 'key-bare', 200, since, 500);
      assert.equal((await get(`${b.url}/`, h('key-bare'))).status, 200);
      console.log(
        `published change: added ${addedA}/${addedB} ms, removed ${removedA}/${removedB} ms; keyspace event: added ${bare} ms (cache times 30 s)`,
      );
    } finally {
      await admin.config('SET', 'notify-keyspace-events', '');
    }
  });

  it('a Redis allow list without a Redis store: a clear error at start', async () => {
    await assert.rejects(
      parseConfigText(
        'rules: [{ name: api, key: { header: x-api-key, allowList: { redis: "fg:known-keys" } }, policies: ["5/1m"] }]',
        'test.yaml',
      ),
      /rules\[0\]\.key\.allowList.*names a Redis set, but the gateway has no Redis store: set store: \{ type: redis/s,
    );
    await assert.rejects(
      parseConfigText(
        `store: { type: redis, url: "redis://127.0.0.1:1" }\nrules: [{ name: api, key: { header: x-api-key, allowList: { redis: "s", knownFor: 1s, unknownFor: 2s } }, policies: ["5/1m"] }]`,
        'test.yaml',
      ),
      /unknownFor.*must not be longer than knownFor \(1000 ms\)/s,
    );
  });
});
