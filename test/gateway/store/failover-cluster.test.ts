// Failover under load on a 3-master + 3-replica Redis Cluster: a planned CLUSTER FAILOVER, a master SIGKILLed (also after its
// replica link was cut), and a master that hangs, with two `floodgate serve` processes (insurance, fail-closed) under load.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startRedisCluster, type RedisCluster } from '../../support/redis-server.js';
import { sleep, startUpstream, type Upstream } from '../support/harness.js';
import { clusterReplicaOf, command, commands, gatewayCounts, replicaLagBytes, whenMaster, type Node } from '../support/failover-redis.js';
import { assertGuarantees, failoverUnderLoad, type Failure } from '../support/failover-run.js';

let cluster: RedisCluster;
let upstream: Upstream;
before(async () => {
  // cluster-require-full-coverage no: the masters that stay up keep answering while a lost one's slots move (see the SIGKILL test).
  // cluster-node-timeout 1 s: a replica takes over about 2 s after its master is gone (the default 5 s would be 6 s or so).
  [cluster, upstream] = await Promise.all([
    startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000, fullCoverage: false }),
    startUpstream(),
  ]);
});
after(async () => {
  await upstream?.close();
  await cluster?.stop();
});

const seeds = (): string => cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
/** The master `i`, its replica, and the API keys counted on it now. */
async function pair(i: number, prefix: string): Promise<{ master: Node; replica: Node; moved: Set<string> }> {
  const master = cluster.nodes[i]!;
  const replica = await clusterReplicaOf(master, cluster.nodes);
  const moved = new Set([...(await gatewayCounts(master, { cluster: true })).keys()].filter((k) => k.startsWith(`${prefix}-`)));
  return { master, replica, moved };
}

/** A master that has a replica now (after the failovers before), its index in `cluster.servers`, from CLUSTER NODES. */
async function masterWithReplica(): Promise<number> {
  const alive = cluster.nodes.find((_, i) => i !== 0 && i !== 2)!;
  const lines = String(await command(alive, 'CLUSTER', 'NODES'))
    .trim()
    .split('\n')
    .map((l) => l.split(' '));
  const ok = (l: string[]): boolean => !l[2]!.includes('fail');
  const master = lines.find((m) => m[2]!.includes('master') && ok(m) && lines.some((r) => r[3] === m[0] && ok(r)))!;
  const port = Number(/:(\d+)@/.exec(master[1]!)![1]);
  return cluster.nodes.findIndex((n) => n.port === port);
}

/**
 * SIGKILLs master `i` (`cutMs` after cutting its replica's link, when above 0: the writes meanwhile reach only the
 * master, as when a replica lags), reads its replica's counts before the promotion and waits for it.
 */
async function killMaster(i: number, prefix: string, cutMs: number): Promise<Failure> {
  const { master, replica, moved } = await pair(i, prefix);
  const lagBytes = await replicaLagBytes(master, replica);
  if (cutMs > 0) {
    // A password the replica does not know keeps it from linking again (the gateways' connections are signed in already).
    const replies = await commands(master, [
      ['CONFIG', 'SET', 'requirepass', 'cut-the-replica-off'],
      ['CLIENT', 'KILL', 'TYPE', 'replica'],
    ]);
    assert.equal(replies[1], 1, 'the replica link was cut');
    await sleep(cutMs);
  }
  const failedAt = Date.now();
  await cluster.servers[i]!.kill();
  // The replica holds what it received until it is promoted; read it meanwhile (no write can reach it before).
  const promoted = whenMaster(replica);
  const counts = await gatewayCounts(replica, { cluster: true, replica: true });
  const role = (await command(replica, 'ROLE')) as string[];
  assert.equal(role[0], 'slave', 'the replica was read before its promotion');
  return { failedAt, promotedAt: await promoted, moved, replicaCount: counts, lagBytes };
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
        assert.equal(await command(replica, 'CLUSTER', 'FAILOVER'), 'OK');
        // A planned failover starts when the replica has it: until then the old master serves as ever, and a request it
        // admitted while this process waited for the OK (tens of ms on a loaded machine) was read as admitted by no master.
        const failedAt = Date.now();
        return { failedAt, promotedAt: await whenMaster(replica), moved, lagBytes };
      },
    });
    assertGuarantees(run, 10_000);
    // A planned failover waits for the replica to catch up before it takes over: nothing to lose, so no key past its limit.
    const failClosed = run.rows[1]!;
    assert.equal(failClosed.sumOver, 0, 'fail-closed: no key admitted past its limit');
  });

  it('a master SIGKILLed under load: the fallback answers in time, only for its keys (one master lost sent every key to the fallback), Redis again after the promotion, over-admission within lag + fallback', async () => {
    const run = await failoverUnderLoad({
      title: 'Cluster: master SIGKILL',
      upstream: upstream.url,
      storeArgs: ['--redis-cluster', seeds()],
      prefix: 'kill',
      fail: () => killMaster(0, 'kill', 0),
    });
    assertGuarantees(run, 10_000);
    for (const f of run.rows) assert.ok(f.fallback > 0, `${f.gateway}: the fallback answered while the slots moved`);
    // One breaker per Cluster node: the keys of the masters that stayed up never go to the fallback (132–159 such answers
    // per gateway when the breaker was the policy's). The Cluster runs with cluster-require-full-coverage no, so those
    // masters answer while the lost one's slots have none; with the default, Redis itself refuses every key until then.
    for (const f of run.rows) assert.equal(f.collateral, 0, `${f.gateway}: keys whose master stayed up were decided by Redis`);
  });

  it('a master SIGKILLed 500 ms after its replica link was cut: a key is over its limit by no more than its replica never received', async () => {
    const run = await failoverUnderLoad({
      title: 'Cluster: master SIGKILL 500 ms after its replica link was cut',
      upstream: upstream.url,
      storeArgs: ['--redis-cluster', seeds()],
      prefix: 'cut',
      fail: () => killMaster(2, 'cut', 500),
    });
    assertGuarantees(run, 10_000);
    // Admissions in the last 500 ms reached only the dead master: the promoted replica admits them again, and nothing more.
    assert.ok(run.rows[0]!.lost + run.rows[1]!.lost > 0, 'the replica missed the admissions of the last 500 ms');
    assert.ok(run.rows[1]!.sumOver <= run.rows[1]!.lost, 'fail-closed: over the limit by at most what the replica never received');
  });

  it('a master that hangs (SIGSTOP, as behind a partition): the gateway leaves it for the promoted replica', async () => {
    const i = await masterWithReplica();
    try {
      const run = await failoverUnderLoad({
        title: 'Cluster: master SIGSTOP',
        upstream: upstream.url,
        storeArgs: ['--redis-cluster', seeds()],
        prefix: 'hung',
        fail: async () => {
          const { master, replica, moved } = await pair(i, 'hung');
          const lagBytes = await replicaLagBytes(master, replica);
          const failedAt = Date.now();
          cluster.servers[i]!.pause();
          const promoted = whenMaster(replica);
          const counts = await gatewayCounts(replica, { cluster: true, replica: true });
          return { failedAt, promotedAt: await promoted, moved, replicaCount: counts, lagBytes };
        },
      });
      assertGuarantees(run, 10_000);
    } finally {
      cluster.servers[i]!.resume();
    }
  });
});
