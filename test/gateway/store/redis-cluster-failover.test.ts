// The gateway on a 3-master + 3-replica Redis Cluster: when the master holding a key's slot is killed, every request is still
// answered (by the failure policy) and, once its replica is promoted, the gateway counts there again, local-first too.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Cluster } from 'ioredis';
import { get } from '../../http/support/http.js';
import { startRedisCluster, type RedisCluster } from '../../support/redis-server.js';
import { parseMetrics, serveCli, sleep, startUpstream, stopCli, type Upstream } from '../support/harness.js';

let cluster: RedisCluster;
let upstream: Upstream;
before(async () => {
  // A master away for 1 s is failed over.
  [cluster, upstream] = await Promise.all([startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 }), startUpstream()]);
});
after(async () => {
  await upstream.close();
  await cluster.stop();
});

/** The process of the master that holds `key`'s slot now. */
async function masterOf(key: string): Promise<number> {
  const io = new Cluster(cluster.nodes.slice(0, 3));
  io.on('error', () => {});
  try {
    await new Promise<void>((resolve) => io.once('ready', resolve));
    const slot = Number(await io.cluster('KEYSLOT', key));
    const ranges = (await io.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
    const owner = ranges.find(([from, to]) => slot >= from && slot <= to)![2][1];
    return cluster.servers.findIndex((s) => s.port === owner);
  } finally {
    io.disconnect();
  }
}

for (const localFirst of [false, true]) {
  test(`${localFirst ? 'local-first: ' : ''}after the master of a key's slot is killed, the gateway counts on its promoted replica`, async (t) => {
    const key = localFirst ? 'failover-lf' : 'failover';
    const g = await serveCli([
      '--upstream',
      upstream.url,
      '--redis-cluster',
      cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','),
      ...(localFirst ? ['--local-first'] : []),
      '--limit',
      '100000/1h',
      '--key',
      'header:x-api-key',
    ]);
    const name = localFirst ? 'redis-local-first' : 'redis';
    const storeOk = async (): Promise<number> =>
      parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body).get(
        `floodgate_store_duration_seconds_count{store="${name}",result="ok"}`,
      ) ?? 0;
    try {
      assert.equal((await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status, 200);
      // The gateway's key for it ends with the API key; its slot is the one the whole name hashes to (no hash tag in a one-policy rule's key).
      const keys = await (async () => {
        const io = new Cluster(cluster.nodes.slice(0, 3));
        io.on('error', () => {});
        await new Promise<void>((resolve) => io.once('ready', resolve));
        const found: string[] = [];
        for (const node of io.nodes('master')) found.push(...(await node.keys(`*${key}*`)));
        io.disconnect();
        return found;
      })();
      assert.ok(keys.length > 0, 'the key is counted on the Cluster');
      const victim = await masterOf(keys[0]!);
      await cluster.servers[victim]!.kill();
      const killed = Date.now();
      let before = await storeOk();
      let back = false;
      while (Date.now() - killed < 30_000) {
        assert.equal((await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status, 200, 'answered meanwhile');
        const now = await storeOk();
        if (now > before) {
          back = true;
          break;
        }
        before = now;
        await sleep(100);
      }
      assert.ok(back, 'store calls succeed again within 30 s of the kill');
      t.diagnostic(`back on the Cluster ${Date.now() - killed} ms after the master was killed`);
      // The cluster now has a master on another node for that slot.
      assert.notEqual(await masterOf(keys[0]!), victim);
    } finally {
      await stopCli(g);
    }
  });
}
