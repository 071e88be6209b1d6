// Floods of long made-up keys, through the proxy port on real sockets, against the tables kept of client keys: the most-limited keys and the cache of a Redis allow list. Each must stay bounded in characters, not only in entries.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { Gateway } from '../../src/gateway/serve/gateway.js';
import type { RuleSet } from '../../src/gateway/rules/rule-set.js';
import { UNKNOWN_CHARS_PER_ENTRY } from '../../src/gateway/rules/known-keys.js';
import { HASHED_KEY_PREFIX } from '../../src/http/client-keys.js';
import { LIMITED_MINUTES, LIMITED_TABLE_SIZE, type LimitedKeys } from '../../src/gateway/serve/limited-keys.js';
import { get } from '../http/support/http.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { sleep, startGateway, startUpstream, type Upstream } from './support/harness.js';

const TOKEN = 'attack-admin-token-0123456789abcdef';
/** Near the default proxy.maxHeaderSize (16 KiB): as long as a key can be. */
const LONG = 15_000;

let upstream: Upstream;
let redis: RedisServer;
const gateways: Gateway[] = [];
before(async () => {
  [upstream, redis] = await Promise.all([startUpstream(), startRedis()]);
});
after(async () => {
  await Promise.all(gateways.map((g) => g.shutdown()));
  await upstream.close();
  await redis.stop();
});

/** Sends one request per key (`times` each) over `sockets` kept-alive connections; returns the count of each status. */
async function flood(base: string, keys: readonly string[], times = 1, sockets = 16): Promise<Map<number, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets });
  const statuses = new Map<number, number>();
  const one = (key: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request(`${base}/`, { agent, headers: { 'x-api-key': key } }, (res) => {
        res.resume();
        res.on('end', () => {
          statuses.set(res.statusCode!, (statuses.get(res.statusCode!) ?? 0) + 1);
          resolve();
        });
      });
      req.on('error', reject);
      req.end();
    });
  let next = 0;
  const jobs = keys.flatMap((k) => Array.from({ length: times }, () => k));
  const worker = async (): Promise<void> => {
    while (next < jobs.length) await one(jobs[next++]!);
  };
  await Promise.all(Array.from({ length: sockets }, worker));
  agent.destroy();
  return statuses;
}

const longKeys = (n: number): string[] => Array.from({ length: n }, () => randomBytes(LONG / 2).toString('hex'));

/** Characters of the keys an allow list caches as unknown, read from the table itself. */
const unknownChars = (known: object): number =>
  [...(known as { unknown: Map<string, number> }).unknown.keys()].reduce((n, k) => n + k.length, 0);

describe('attack: long made-up keys against the admin-side tables', { timeout: 120_000 }, () => {
  it('holds: refusals of 1 500 keys of 15 000 characters keep the most-limited table small, since the rules count a long key by its 50-character hash', async () => {
    const g = await startGateway(
      `upstream: ${upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  token: ${TOKEN}\n` +
        'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { limit: 1, window: 1h }\n',
    );
    gateways.push(g);
    const keys = longKeys(1_500);
    const statuses = await flood(g.url, keys, 2);
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
    const admin = new Redis(redis.url);
    await admin.del('fg:attack-known');
    await admin.sadd('fg:attack-known', 'key-real');
    admin.disconnect();
    const cacheSize = 1_000;
    const g = await startGateway(`upstream: ${upstream.url}
store: { type: redis, url: "${redis.url}" }
rules:
  - name: api
    key: { header: x-api-key, allowList: { redis: "fg:attack-known", cacheSize: ${cacheSize}, unknownFor: 30s } }
    policies: ["1000/1m"]`);
    gateways.push(g);
    for (let i = 0; i < 50 && (await get(`${g.url}/_floodgate/readyz`)).status !== 200; i += 1) await sleep(20);
    assert.equal((await get(`${g.url}/`, { headers: { 'x-api-key': 'key-real' } })).status, 200);
    const statuses = await flood(g.url, longKeys(2_000));
    assert.equal(statuses.get(200), undefined, 'no made-up key admitted');
    const known = (g as unknown as { rules: RuleSet }).rules.rules[0]!.knownKeys!;
    const budget = cacheSize * UNKNOWN_CHARS_PER_ENTRY;
    assert.ok(unknownChars(known) <= budget, `${unknownChars(known)} characters cached`);
    assert.equal(known.cachedUnknownChars, unknownChars(known), 'the cache counts what it holds');
    assert.ok(known.cached.unknown > 0, 'long unknown keys are still cached, fewer of them');
    // Short made-up keys fill the table by count as before.
    await flood(
      g.url,
      Array.from({ length: 1_500 }, (_, i) => `short-${i}`),
    );
    assert.ok(known.cached.unknown <= cacheSize && unknownChars(known) <= budget, JSON.stringify(known.cached));
    assert.equal(known.cachedUnknownChars, unknownChars(known));
    assert.equal((await get(`${g.url}/`, { headers: { 'x-api-key': 'key-real' } })).status, 200, 'the known key still passes');
  });
});
