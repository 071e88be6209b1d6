// Failover under load on a 3-master + 3-replica Redis Cluster: a planned CLUSTER FAILOVER and a master SIGKILLed mid-run,
// with two `floodgate serve` processes (insurance, fail-closed) answering every request in time and coming back to Redis.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startRedisCluster, type RedisCluster } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../support/harness.js';
import { clusterReplicaOf, command, gatewayCounts, replicaLagBytes, whenMaster, type Node } from '../support/failover-redis.js';
import { assertGuarantees, failoverUnderLoad } from '../support/failover-run.js';

let cluster: RedisCluster;
let upstream: Upstream;
before(async () => {
  // cluster-node-timeout 1 s: a replica takes over about 2 s after its master is gone (the default 5 s would be 6 s or so).
  [cluster, upstream] = await Promise.all([startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 }), startUpstream()]);
});
after(async () => {
  await upstream?.close();
  await cluster?.stop();
});

const seeds = (): string => cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
/** The master `i` (of the first three, which redis-cli made masters), its replica, and the API keys counted on it now. */
async function pair(i: number, prefix: string): Promise<{ master: Node; replica: Node; moved: Set<string> }> {
  const master = cluster.nodes[i]!;
  const replica = await clusterReplicaOf(master, cluster.nodes.slice(3));
  const moved = new Set([...(await gatewayCounts(master, { cluster: true })).keys()].filter((k) => k.startsWith(`${prefix}-`)));
  return { master, replica, moved };
}

describe('failover under load on a Redis Cluster (3 masters, 3 replicas)', () => {
  it('CLUSTER FAILOVER on a replica under load: every request answered in time, nothing lost, back on Redis at once', async () => {
    const run = await failoverUnderLoad({
      title: 'Cluster: CLUSTER FAILOVER (planned)',
      upstream: upstream.url,
      storeArgs: ['--redis-cluster', seeds()],
      prefix: 'planned',
      fail: async () => {
        const { master, replica, moved } = await pair(1, 'planned');
        const lagBytes = await replicaLagBytes(master, replica);
        const failedAt = Date.now();
        assert.equal(await command(replica, 'CLUSTER', 'FAILOVER'), 'OK');
        return { failedAt, promotedAt: await whenMaster(replica), moved, lagBytes };
      },
    });
    assertGuarantees(run, 10_000);
    // A planned failover waits for the replica to catch up before it takes over: nothing to lose, so no key past its limit.
    const failClosed = run.rows[1]!;
    assert.equal(failClosed.sumOver, 0, 'fail-closed: no key admitted past its limit');
  });

  it('a master SIGKILLed under load: the fallback answers in time, Redis again after the promotion, over-admission within lag + fallback', async () => {
    const run = await failoverUnderLoad({
      title: 'Cluster: master SIGKILL',
      upstream: upstream.url,
      storeArgs: ['--redis-cluster', seeds()],
      prefix: 'kill',
      fail: async () => {
        const { master, replica, moved } = await pair(0, 'kill');
        const lagBytes = await replicaLagBytes(master, replica);
        const failedAt = Date.now();
        await cluster.servers[0]!.kill();
        // The replica holds what it received until it is promoted; read it meanwhile (no write can reach it before).
        const promoted = whenMaster(replica);
        const counts = await gatewayCounts(replica, { cluster: true, replica: true });
        const role = (await command(replica, 'ROLE')) as string[];
        assert.equal(role[0], 'slave', 'the replica was read before its promotion');
        return { failedAt, promotedAt: await promoted, moved, replicaCount: counts, lagBytes };
      },
    });
    assertGuarantees(run, 10_000);
    for (const f of run.rows) assert.ok(f.fallback > 0, `${f.gateway}: the fallback answered while the slots moved`);
  });
});
