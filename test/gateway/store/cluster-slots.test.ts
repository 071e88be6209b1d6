// Where a rule's counters live on a real 3-master Redis Cluster (one slot per rule and key: {RULE:KEY}), and what a request
// whose policies span slots (per-key, per-address, global) guarantees under 8 concurrent clients: never past a limit, and a
// refusal by one slot gives back what the others spent.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Cluster } from 'ioredis';
import { get } from '../../http/support/http.js';
import { clusterHashTag, keySlot } from '../../../src/stores/redis/key-slot.js';
import { startRedisCluster, type RedisCluster } from '../../support/redis-server.js';
import { connectCluster } from '../../support/redis-clients.js';
import { adminBlock, adminJson } from '../support/admin.js';
import { gatewayFixture, untilReady } from '../support/harness.js';

let cluster: RedisCluster;
let io: Cluster;
const fixture = gatewayFixture({
  start: async () => {
    cluster = await startRedisCluster();
    io = await connectCluster(cluster);
  },
  stop: async () => {
    io.disconnect();
    await cluster.stop();
  },
});
const TOKEN = 'test-admin-token-cluster-slots-0123';

/** Every key on every master, with the slot it is in. */
async function clusterKeys(): Promise<{ key: string; slot: number }[]> {
  const all: { key: string; slot: number }[] = [];
  for (const node of io.nodes('master')) for (const key of await node.keys('*')) all.push({ key, slot: keySlot(key) });
  return all;
}

describe("a rule's keys on a Redis Cluster", () => {
  before(() => fixture.ready());
  after(() => undefined);

  const config = (policies: string): string =>
    `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}` +
    `store: { cluster: { nodes: [${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(', ')}] }, timeout: 2s, prefix: slots }\n` +
    `rules:\n  - name: api\n    key: "header:x-api-key"\n    policies:\n${policies}`;

  it('policies counting by one key share the slot of {RULE:KEY}; per-address and global policies have their own', async () => {
    const g = await fixture.start(
      config(
        '      - { name: per-minute, limit: 50, window: 1m }\n' +
          '      - { name: per-hour, limit: 80, window: 1h }\n' +
          '      - { name: per-address, limit: 1000, window: 1m, key: ip }\n' +
          '      - { name: everyone, limit: 10000, window: 1m, key: global }\n',
      ),
    );
    await untilReady(`${g.adminUrl}/readyz`, 100);
    const clients = ['alice', 'bob', 'x}y{', 'tenant-42'];
    for (const key of clients) assert.equal((await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status, 200);
    const keys = (await clusterKeys()).filter((k) => k.key.includes('slots:api:'));
    const table = keys.map((k) => ({ tag: clusterHashTag(k.key), slot: k.slot, key: k.key }));
    console.log(table.map((r) => `${String(r.slot).padStart(5)}  ${r.tag}  ${r.key}`).join('\n'));
    for (const key of clients) {
      const tag = /^[^{}~]+$/.test(key) ? `api:${key}` : undefined;
      const mine = table
        .filter((r) => r.key.includes(':per-minute:') || r.key.includes(':per-hour:'))
        .filter((r) => r.key.endsWith(`}`) && (tag === undefined ? r.tag!.startsWith('api:') || r.tag!.startsWith('~') : r.tag === tag));
      if (tag !== undefined) {
        assert.equal(mine.length, 2, `${key}: a per-minute and a per-hour counter tagged {${tag}}`);
        assert.equal(mine[0]!.slot, mine[1]!.slot, `${key}: one slot`);
        assert.equal(mine[0]!.slot, keySlot(`{${tag}}`));
      }
    }
    // A key holding braces is encoded in its tag: it cannot end the tag early and pick its slot.
    const odd = table.filter((r) => r.tag!.startsWith('~'));
    assert.equal(odd.length, 2, 'the two counters of x}y{ carry an encoded tag');
    assert.equal(odd[0]!.slot, odd[1]!.slot);
    const global = table.filter((r) => r.key.includes(':everyone:'));
    assert.equal(global.length, 1, 'one global counter for every client');
    assert.equal(global[0]!.tag, 'api:global');
    const perAddress = table.filter((r) => r.key.includes(':per-address:'));
    assert.equal(perAddress.length, 1, 'one per-address counter (every client came from 127.0.0.1)');
    assert.match(perAddress[0]!.tag!, /^api:/);
  });

  it('a request whose policies span slots, 8 concurrent clients: never past any limit, and every refusal gives back what other slots spent', async () => {
    const g = await fixture.start(
      config('      - { name: per-key, limit: 5, window: 1h }\n' + '      - { name: everyone, limit: 24, window: 1h, key: global }\n'),
    );
    await untilReady(`${g.adminUrl}/readyz`, 100);
    const run = `r${Date.now()}`;
    const admittedOf = new Map<string, number>();
    await Promise.all(
      Array.from({ length: 8 }, async (_, c) => {
        const key = `${run}-client-${c}`;
        for (let i = 0; i < 10; i++) {
          const status = (await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status;
          assert.ok(status === 200 || status === 429, `status ${status}`);
          if (status === 200) admittedOf.set(key, (admittedOf.get(key) ?? 0) + 1);
        }
      }),
    );
    const total = [...admittedOf.values()].reduce((a, b) => a + b, 0);
    const everyone = await adminJson(g.adminUrl!, TOKEN, 'GET', '/admin/rules/api/policies/everyone/keys/global');
    const globalUsed = 24 - (everyone.json.policies[0].remaining as number);
    const rows: string[] = [];
    for (let c = 0; c < 8; c++) {
      const key = `${run}-client-${c}`;
      const seen = await adminJson(g.adminUrl!, TOKEN, 'GET', `/admin/rules/api/policies/per-key/keys/${encodeURIComponent(key)}`);
      const used = 5 - (seen.json.policies[0].remaining as number);
      const admitted = admittedOf.get(key) ?? 0;
      rows.push(`${key}: admitted ${admitted}, per-key counter ${used}`);
      assert.ok(admitted <= 5, `${key}: never past its limit`);
      assert.equal(
        used,
        admitted,
        `${key}: the per-key slot counts exactly what was admitted (refusals by the global slot gave theirs back)`,
      );
    }
    console.log(
      `8 clients × 10 requests, per-key 5/1h and global 24/1h in different slots: admitted ${total}, global counter ${globalUsed}\n${rows.join('\n')}`,
    );
    assert.ok(total <= 24, `never past the global limit: ${total}`);
    assert.equal(globalUsed, total, 'the global slot counts exactly what was admitted (refusals by a per-key slot gave theirs back)');
    // Units held for one round trip may refuse a request that would have fit; with 80 tries for 24 units that costs little.
    assert.ok(total >= 20, `most of the global limit is spent: ${total}`);
  });
});
