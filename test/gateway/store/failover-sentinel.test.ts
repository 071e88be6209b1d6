// Failover under load through Redis Sentinel (1 master, 1 replica, 3 sentinels): the master SIGKILLed mid-run while two
// `floodgate serve` processes (insurance, fail-closed) answer every request in time and count on the promoted replica after.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startRedisSentinel, type RedisSentinel } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../support/harness.js';
import { command, gatewayCounts, replicaLagBytes, whenMaster, whenSentinelNames } from '../support/failover-redis.js';
import { assertGuarantees, failoverUnderLoad } from '../support/failover-run.js';

let sentinel: RedisSentinel;
let upstream: Upstream;
before(async () => {
  // down-after-milliseconds 1 s (the fixture's default): the sentinels agree the master is gone about a second after it is.
  [sentinel, upstream] = await Promise.all([startRedisSentinel({ replicas: 1, sentinels: 3, downAfterMs: 1000 }), startUpstream()]);
});
after(async () => {
  await upstream?.close();
  await sentinel?.stop();
});

describe('failover under load through Redis Sentinel', () => {
  it('the master SIGKILLed under load: the fallback answers in time, Redis again after the promotion, over-admission within lag + fallback', async () => {
    const run = await failoverUnderLoad({
      title: 'Sentinel: master SIGKILL',
      upstream: upstream.url,
      storeArgs: ['--redis-sentinel', sentinel.spec],
      prefix: 'sentinel',
      fail: async () => {
        const replica = sentinel.replicas[0]!;
        const moved = new Set([...(await gatewayCounts(sentinel.master)).keys()]);
        const lagBytes = await replicaLagBytes(sentinel.master, replica);
        const failedAt = Date.now();
        await sentinel.master.kill();
        // The replica holds what it received until the sentinels promote it; read it meanwhile (no write reaches it before).
        const promoted = whenMaster(replica);
        const counts = await gatewayCounts(replica);
        const role = (await command(replica, 'ROLE')) as string[];
        assert.equal(role[0], 'slave', 'the replica was read before its promotion');
        const promotedAt = await promoted;
        // The gateway's client finds the new master by asking the sentinels, which name it a little after the promotion.
        const named = await whenSentinelNames(sentinel.sentinels[0]!, sentinel.name, replica);
        const notes = [`the sentinels named the new master ${named - promotedAt} ms after its promotion`];
        return { failedAt, promotedAt, moved, replicaCount: counts, lagBytes, notes };
      },
    });
    assert.equal(run.facts.moved.size, 80, 'every key of both gateways was on the master');
    assertGuarantees(run, 10_000);
    for (const f of run.rows) assert.ok(f.fallback > 0, `${f.gateway}: the fallback answered while no master was known`);
  });

  it('a master that hung (SIGSTOP, as behind a partition) kept the gateway on the fallback after the promotion: it follows +switch-master now', async () => {
    const paused = await startRedisSentinel({ replicas: 1, sentinels: 3, downAfterMs: 1000 });
    try {
      const run = await failoverUnderLoad({
        title: 'Sentinel: master SIGSTOP',
        upstream: upstream.url,
        storeArgs: ['--redis-sentinel', paused.spec],
        prefix: 'stopped',
        fail: async () => {
          const replica = paused.replicas[0]!;
          const moved = new Set([...(await gatewayCounts(paused.master)).keys()]);
          const lagBytes = await replicaLagBytes(paused.master, replica);
          const failedAt = Date.now();
          paused.master.pause();
          const promoted = whenMaster(replica);
          const counts = await gatewayCounts(replica);
          const promotedAt = await promoted;
          const named = await whenSentinelNames(paused.sentinels[0]!, paused.name, replica);
          const notes = [`the sentinels named the new master ${named - promotedAt} ms after its promotion`];
          return { failedAt, promotedAt, moved, replicaCount: counts, lagBytes, notes };
        },
      });
      assertGuarantees(run, 10_000);
    } finally {
      paused.master.resume();
      await paused.stop();
    }
  });
});
