// The gateway through Redis Sentinel (1 master, 1 replica, 3 sentinels): `floodgate serve --redis-sentinel` admits exactly one key's
// limit across two processes; overrides from a hash and an allow list in a set work there, and after the master is killed the
// gateway counts on the promoted replica and its subscriber connections hear the changes announced there.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { get } from '../../http/support/http.js';
import { startRedisSentinel, type RedisSentinel } from '../../support/redis-server.js';
import { adminJson } from '../support/admin.js';
import { parseMetrics, serveCli, sleep, startUpstream, stopCli, writeTemp, type Upstream } from '../support/harness.js';

const TOKEN = 'test-admin-token-sentinel-0123456789';
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

  it('with --local-first, two processes never admit more than the limit of one key', async (t) => {
    const args = [
      '--upstream',
      upstream.url,
      '--redis-sentinel',
      sentinel.spec,
      '--local-first',
      '--limit',
      '40/1h',
      '--key',
      'header:x-api-key',
    ];
    const gateways = await Promise.all([serveCli(args), serveCli(args)]);
    try {
      let admitted = 0;
      for (let i = 0; i < 60; i++) if ((await statusOf(gateways[i % 2]!.url, 'sentinel-lf')) === 200) admitted++;
      t.diagnostic(`local-first admitted ${admitted} of the limit of 40`);
      assert.ok(admitted <= 40 && admitted >= 20, `within the limit, most of it spent: ${admitted}`);
    } finally {
      await Promise.all(gateways.map((g) => stopCli(g)));
    }
  });

  it('overrides from a hash and an allow list in a set work through Sentinel, and still hear their channels after the master is killed', async (t) => {
    const writer = new Redis({ sentinels: sentinel.sentinels, name: sentinel.name });
    writer.on('error', () => {});
    await writer.sadd('fg:known:s', 'k-known');
    await writer.hset('fg:overrides:s', 'k-known', 'pro');
    const config = writeTemp(
      'gw.yaml',
      `upstream: ${upstream.url}\nadmin: { listen: 127.0.0.1:0, tokenFile: ${writeTemp('admin-token', TOKEN)} }\nstore: { sentinel: { name: ${sentinel.name}, sentinels: [${sentinel.sentinels.map((n) => `${n.host}:${n.port}`).join(', ')}] }, timeout: 300ms }\n` +
        'plans:\n  pro: { per-hour: 4/1h }\n' +
        'rules:\n' +
        '  - { name: open, match: { path: /open }, key: "header:x-api-key", policies: ["100000/1h"], final: true }\n' +
        '  - name: api\n    key: { header: x-api-key, allowList: { redis: "fg:known:s", knownFor: 1h, unknownFor: 1h } }\n' +
        '    policies: [{ name: per-hour, limit: 2, window: 1h }]\n    overrides: { redis: "fg:overrides:s" }\n',
    );
    const g = await serveCli(['--config', config]);
    const status = async (path: string, key: string): Promise<number> =>
      (await get(`${g.url}${path}`, { headers: { 'x-api-key': key } })).status;
    const admitted = async (key: string): Promise<number> => {
      let n = 0;
      while ((await status('/x', key)) === 200) n++;
      return n;
    };
    const until = async (what: string, check: () => Promise<boolean>): Promise<void> => {
      for (let i = 0; i < 300; i++)
        if (await check()) return;
        else await sleep(50);
      assert.fail(`${what} within 15 s`);
    };
    const adminUrl = String(g.logs.find((l) => l.msg === 'floodgate gateway listening')!.admin);
    const storeOk = async (): Promise<number> =>
      parseMetrics((await get(`${adminUrl}/metrics`)).body).get('floodgate_store_duration_seconds_count{store="redis",result="ok"}') ?? 0;
    try {
      assert.equal(await admitted('k-known'), 4, 'the override from the hash applies');
      assert.equal(await status('/x', 'k-new'), 401, 'not in the set');

      await sentinel.master.kill();
      const killed = Date.now();
      let before = await storeOk();
      let back = false;
      while (Date.now() - killed < 30_000) {
        // Every request is answered meanwhile (by the insurance limiter while no master is known).
        assert.equal(await status('/open', 'probe'), 200);
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

      // The subscriber connections found the new master too: changes announced there are heard.
      await writer.sadd('fg:known:s', 'k-new');
      await writer.hset('fg:overrides:s', 'k-new', 'pro');
      await until('the override change heard after the failover', async () => {
        await writer.publish('fg:overrides:s:changed', 'k-new');
        return (await adminJson(adminUrl, TOKEN, 'GET', '/admin/rules/api/keys/k-new')).json.override === 'k-new';
      });
      await until('the allow-list change heard after the failover', async () => {
        await writer.publish('fg:known:s:changed', 'k-new');
        return (await status('/x', 'k-new')) === 200;
      });
      assert.equal(await admitted('k-new'), 3, 'the override written after the failover applies (4 per hour, one spent above)');
    } finally {
      writer.disconnect();
      await stopCli(g);
    }
  });
});
