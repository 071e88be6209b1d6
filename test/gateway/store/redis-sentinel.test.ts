// The gateway through Redis Sentinel (1 master, 1 replica, 3 sentinels): `floodgate serve --redis-sentinel` admits exactly one key's
// limit across two processes, and after the master is killed it counts on the promoted replica, found through the sentinels again.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { get } from '../../http/support/http.js';
import { startRedisSentinel, type RedisSentinel } from '../../support/redis-server.js';
import { parseMetrics, serveCli, sleep, startUpstream, stopCli, type Upstream } from '../support/harness.js';

let sentinel: RedisSentinel;
let upstream: Upstream;
before(async () => {
  [sentinel, upstream] = await Promise.all([startRedisSentinel({ replicas: 1, sentinels: 3 }), startUpstream()]);
});
after(async () => {
  await upstream.close();
  await sentinel.stop();
});

const statusOf = async (url: string, key: string): Promise<number> => (await get(`${url}/x`, { headers: { 'x-api-key': key } })).status;

describe('floodgate serve through Redis Sentinel', () => {
  it('two processes admit exactly 40 of 60 requests of one key (40 per hour), round-robin, on the master the sentinels name', async () => {
    const args = ['--upstream', upstream.url, '--redis-sentinel', sentinel.spec, '--limit', '40/1h', '--key', 'header:x-api-key'];
    const gateways = await Promise.all([serveCli(args), serveCli(args)]);
    try {
      const listening = gateways[0]!.logs.find((l) => l.msg === 'floodgate gateway listening')!;
      assert.equal(listening.store, `redis-sentinel ${sentinel.spec}`);
      let admitted = 0;
      for (let i = 0; i < 60; i++) if ((await statusOf(gateways[i % 2]!.url, 'sentinel-key')) === 200) admitted++;
      assert.equal(admitted, 40);
      const master = new Redis({ host: sentinel.master.host, port: sentinel.master.port });
      try {
        assert.ok((await master.keys('*sentinel-key*')).length > 0, 'the counter is on the master');
      } finally {
        master.disconnect();
      }
    } finally {
      await Promise.all(gateways.map((g) => stopCli(g)));
    }
  });

  it('after the master is killed, the gateway counts on the promoted replica (store calls succeed again)', async (t) => {
    const g = await serveCli([
      '--upstream',
      upstream.url,
      '--redis-sentinel',
      sentinel.spec,
      '--limit',
      '1000/1h',
      '--key',
      'header:x-api-key',
    ]);
    const storeOk = async (): Promise<number> =>
      parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body).get(
        'floodgate_store_duration_seconds_count{store="redis",result="ok"}',
      ) ?? 0;
    try {
      assert.equal(await statusOf(g.url, 'failover'), 200);
      await sentinel.master.kill();
      const killed = Date.now();
      // Every request is answered meanwhile (by the insurance limiter while no master is known).
      let before = await storeOk();
      let back = false;
      while (Date.now() - killed < 30_000) {
        assert.equal(await statusOf(g.url, 'failover'), 200);
        const now = await storeOk();
        if (now > before) {
          back = true;
          break;
        }
        before = now;
        await sleep(100);
      }
      assert.ok(back, 'store calls succeed again within 30 s of the kill');
      t.diagnostic(`back on Redis ${Date.now() - killed} ms after the master was killed`);
      const promoted = new Redis({ host: sentinel.replicas[0]!.host, port: sentinel.replicas[0]!.port });
      try {
        assert.equal((await promoted.info('replication')).match(/role:(\w+)/)?.[1], 'master', 'the replica was promoted');
      } finally {
        promoted.disconnect();
      }
    } finally {
      await stopCli(g);
    }
  });
});
