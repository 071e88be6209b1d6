// The gateway on a real 3-master Redis Cluster: three `floodgate serve --redis-cluster` processes share one key's limit exactly
// in consecutive 10 s windows (and stay within the local-first bound), overrides from a Redis hash and an allow list in a
// Redis set follow their change channels, the rate limit service (--grpc) counts there, and a password given by file
// shows nowhere in the logs, the dashboard or the admin API.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { get } from '../../http/support/http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { startRedisCluster, type RedisCluster } from '../../support/redis-server.js';
import { connectCluster } from '../../support/redis-clients.js';
import { ErrorCode } from '../../../src/core/errors.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { ChangeSubscriber } from '../../../src/gateway/rules/change-channels.js';
import { OverrideSync } from '../../../src/gateway/rules/override-sync.js';
import { RuleOverrides } from '../../../src/gateway/rules/rule-overrides.js';
import { adminBlock, adminJson } from '../support/admin.js';
import { AdminBroadcast } from '../../../src/gateway/admin/admin-broadcast.js';
import {
  gatewayFixture,
  runCli,
  serveCli,
  sleep,
  startGateway,
  startUpstream,
  stopCli,
  untilReady,
  writeTemp,
  type CliProcess,
  type Upstream,
} from '../support/harness.js';
import { rlsClient, type Descriptor } from '../support/rls-client.js';

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
const seeds = (): string => cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
const TOKEN = 'test-admin-token-cluster-0123456789';

/** One window's tally of one key: admitted (200) and the other statuses seen. */
interface Tally {
  admitted: number;
  others: Set<number>;
}

/**
 * Sends `n` requests with one API key, round-robin over `urls`, `gapMs` apart (0: back to back), all inside one
 * window: the first request opens the key's fixed window, so the caller waits `windowMs` from `opened` before the next.
 */
async function roundRobin(urls: string[], n: number, key: string, gapMs = 0): Promise<Tally & { opened: number }> {
  let admitted = 0;
  const others = new Set<number>();
  const opened = Date.now();
  for (let i = 0; i < n; i++) {
    const status = (await get(`${urls[i % urls.length]}/x`, { headers: { 'x-api-key': key } })).status;
    if (status === 200) admitted++;
    else others.add(status);
    if (gapMs > 0) await sleep(gapMs);
  }
  return { admitted, others, opened };
}

const WINDOW_MS = 10_000;
/** Past a window's end, with room for the gateways' and Redis's clocks (one machine) and a late first request. */
const untilNextWindow = (opened: number): Promise<void> => sleep(Math.max(0, opened + WINDOW_MS + 300 - Date.now()));

describe('floodgate serve on a Redis Cluster', { concurrency: true }, () => {
  let upstream: Upstream;
  before(async () => {
    await fixture.ready();
    upstream = await startUpstream();
  });
  after(() => upstream.close());

  it('three processes on a 3-master Cluster admit exactly 100 of 150 requests of one key per 10 s window, round-robin, two windows running', async () => {
    const args = ['--upstream', upstream.url, '--redis-cluster', seeds(), '--limit', '100/10s', '--key', 'header:x-api-key'];
    const gateways = await Promise.all([serveCli(args), serveCli(args), serveCli(args)]);
    const urls = gateways.map((g) => g.url);
    try {
      assert.match(
        String(gateways[0]!.logs.find((l) => l.msg === 'floodgate gateway listening')?.store),
        /^redis-cluster 127\.0\.0\.1:\d+,/,
      );
      for (let window = 1; window <= 2; window++) {
        // Two keys in the same windows: their counters live on different masters (their slots differ).
        const [a, b] = await Promise.all(['tenant-a', 'tenant-b'].map((key) => roundRobin(urls, 150, key)));
        for (const [key, tally] of [
          ['tenant-a', a!],
          ['tenant-b', b!],
        ] as const) {
          assert.equal(tally.admitted, 100, `${key}, window ${window}: exactly the limit admitted`);
          assert.deepEqual([...tally.others], [429]);
        }
        if (window === 1) await untilNextWindow(Math.min(a!.opened, b!.opened));
      }
    } finally {
      await Promise.all(gateways.map((g) => stopCli(g)));
    }
  });

  it('with --local-first, three processes stay within the limit and the under-admission bound of one key per 10 s window, two windows running', async (t) => {
    const args = [
      '--upstream',
      upstream.url,
      '--redis-cluster',
      seeds(),
      '--local-first',
      '--limit',
      '100/10s',
      '--key',
      'header:x-api-key',
    ];
    const gateways = await Promise.all([serveCli(args), serveCli(args), serveCli(args)]);
    const urls = gateways.map((g) => g.url);
    // docs/local-first.md, "The under-admission bound": per window, under-admission ≤ Σ over gateways of 1.5 × G_p, with
    // G_p ≤ p's demand rate × max(leaseMs, 4 × RTT) + cost. Requests 30 ms apart round-robin give each gateway one request
    // per ≥ 90 ms (11 per s); leaseMs is 100 ms and a local round trip well under 25 ms, so G_p ≤ 11 × 0.1 + 1 = 2.1 and
    // the bound is 3 × 1.5 × 2.1 ≈ 10 units: at least 90 of the 100 are admitted.
    const GAP_MS = 30;
    const bound = Math.ceil(3 * 1.5 * ((1000 / (3 * GAP_MS)) * 0.1 + 1));
    try {
      for (let window = 1; window <= 2; window++) {
        const tally = await roundRobin(urls, 150, 'lf-key', GAP_MS);
        t.diagnostic(`local-first, window ${window}: admitted ${tally.admitted} of the limit of 100 (bound: ≥ ${100 - bound})`);
        assert.ok(Date.now() - tally.opened < WINDOW_MS, 'all 150 requests were sent inside one window');
        assert.ok(tally.admitted <= 100, `never above the limit: ${tally.admitted}`);
        assert.ok(tally.admitted >= 100 - bound, `under-admission within the stated bound of ${bound}: ${tally.admitted}`);
        assert.deepEqual([...tally.others], [429]);
        if (window === 1) await untilNextWindow(tally.opened);
      }
    } finally {
      await Promise.all(gateways.map((g) => stopCli(g)));
    }
  });
});

describe('what rides on Redis, on a Cluster', () => {
  async function gateway(rule: string, extra = ''): Promise<Gateway> {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}store: { cluster: { nodes: [${seeds()}] }, timeout: 500ms${extra} }\n` +
        `plans:\n  pro: { per-minute: 6/1m }\n  trial: { per-minute: 1/1m }\nrules:\n${rule}`,
    );
    await untilReady(`${g.adminUrl}/readyz`, 100);
    return g;
  }
  const admitted = async (g: Gateway, key: string): Promise<number> => {
    let n = 0;
    while ((await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status === 200) n++;
    return n;
  };
  const admin = (g: Gateway, method: string, path: string, body?: unknown) =>
    adminJson(g.adminUrl!, TOKEN, method, path, body === undefined ? undefined : JSON.stringify(body));

  it('overrides from a Redis hash apply at start, live on HSET + PUBLISH, and through the admin API on another gateway', async () => {
    await io.hset('fg:overrides:c', 'tenant-1', 'pro');
    const rule =
      '  - name: api\n    key: "header:x-api-key"\n    policies: [{ name: per-minute, limit: 3, window: 1m }]\n    overrides: { redis: "fg:overrides:c" }\n';
    const [a, b] = [await gateway(rule), await gateway(rule)];
    assert.equal(await admitted(a, 'tenant-1'), 6);
    assert.equal(await admitted(b, 'tenant-other'), 3);
    await io.hset('fg:overrides:c', 'tenant-2', 'trial');
    await io.publish('fg:overrides:c:changed', 'tenant-2');
    for (let i = 0; i < 200 && (await admin(b, 'GET', '/admin/rules/api/keys/tenant-2')).json.override === undefined; i++) await sleep(10);
    assert.equal(await admitted(b, 'tenant-2'), 1);
    // A PUT on one gateway writes the hash and announces it: the other applies it without a restart.
    assert.equal((await admin(a, 'PUT', '/admin/rules/api/overrides/vip-*', { value: 'pro' })).status, 200);
    assert.equal(await io.hget('fg:overrides:c', 'vip-*'), '"pro"');
    for (let i = 0; i < 200 && (await admin(b, 'GET', '/admin/rules/api/keys/vip-1')).json.override === undefined; i++) await sleep(10);
    assert.equal(await admitted(b, 'vip-1'), 6);
  });

  it('an override change the Cluster subscriber missed (published while it moved to another node) is applied at the next periodic read', async () => {
    const settings = await parseConfigText(
      `store: { cluster: { nodes: [${seeds()}] } }\nplans:\n  pro: { per-minute: 6/1m }\n` +
        'rules:\n  - name: api\n    key: "header:x-api-key"\n    policies: [{ name: per-minute, limit: 3, window: 1m }]\n    overrides: { redis: "fg:overrides:missed" }\n',
      'gw.yaml',
    );
    const overrides = new RuleOverrides(settings.rules[0]!, settings.plans);
    const sync = new OverrideSync(
      io,
      () => io.duplicate() as unknown as ChangeSubscriber,
      () => {},
      200,
    );
    try {
      sync.follow('api', overrides);
      // Past the subscriber's connection and the whole read it makes then.
      await sleep(500);
      // Written with no announcement, as a PUBLISH lost in the gap is: only the periodic read can find it.
      await io.hset('fg:overrides:missed', 'tenant-9', 'pro');
      let seen: unknown[] = [];
      for (let i = 0; i < 100 && (seen = overrides.list().map((e) => e.pattern)).length === 0; i++) await sleep(20);
      assert.deepEqual(seen, ['tenant-9']);
    } finally {
      sync.close();
    }
  });

  it('an admin announcement the Cluster subscriber missed is found at the next read of the change counter, or at the next message', async () => {
    const pubsub = {
      publish: (channel: string, message: string) => io.publish(channel, message),
      incr: (key: string) => io.incr(key),
      get: (key: string) => io.get(key),
      subscriber: () => io.duplicate() as unknown as ChangeSubscriber,
    };
    const heard: string[] = [];
    let missed = 0;
    const a = new AdminBroadcast(pubsub, 'fg-missed', { heard: () => {}, missed: () => {} });
    const b = new AdminBroadcast(pubsub, 'fg-missed', { heard: (rule, key) => heard.push(`${rule}/${key}`), missed: () => missed++ }, 200);
    try {
      await sleep(500);
      await a.announce('api', 'k1');
      for (let i = 0; i < 100 && heard.length === 0; i++) await sleep(10);
      assert.deepEqual([heard, missed], [['api/k1'], 0], 'in step: heard, nothing missed');
      // An announcement whose PUBLISH never reached B (sent while its subscriber moved nodes): only the counter moved.
      await io.incr('fg-missed:admin:generation');
      for (let i = 0; i < 100 && missed === 0; i++) await sleep(10);
      assert.equal(missed, 1, 'the periodic read finds the counter ahead');
      // Lost once more, then a message arrives that skips the lost number: B knows at once.
      await io.incr('fg-missed:admin:generation');
      await a.announce('api', 'k2');
      for (let i = 0; i < 100 && heard.length < 2; i++) await sleep(5);
      assert.deepEqual(heard, ['api/k1', 'api/k2']);
      assert.ok(missed >= 2, `the skipped number was noticed: ${missed}`);
    } finally {
      a.close();
      b.close();
    }
  });

  it('an allow list in a Redis set admits its keys, refuses others, and hears SADD + PUBLISH at once', async () => {
    await io.sadd('fg:known', 'known-1');
    const g = await gateway(
      '  - name: api\n    key: { header: x-api-key, allowList: { redis: "fg:known", knownFor: 1h, unknownFor: 1h } }\n    policies: ["1000/1m"]\n',
      ', onFailure: fail-closed',
    );
    const status = async (key: string) => (await get(`${g.url}/x`, { headers: { 'x-api-key': key } })).status;
    assert.equal(await status('known-1'), 200);
    assert.equal(await status('late-1'), 401, 'not in the set (and the refusal is cached for an hour)');
    await io.sadd('fg:known', 'late-1');
    await io.publish('fg:known:changed', 'late-1');
    let got = 0;
    for (let i = 0; i < 200 && (got = await status('late-1')) !== 200; i++) await sleep(10);
    assert.equal(got, 200, 'the PUBLISH was heard on the Cluster: the cached refusal dropped');
  });

  it('an admin reset on one gateway is heard by another (admin broadcast over Cluster pub/sub)', async () => {
    const rule = '  - name: api\n    key: "header:x-api-key"\n    policies: ["2/1h"]\n';
    const [a, b] = [await gateway(rule), await gateway(rule)];
    assert.equal(await admitted(a, 'reset-me'), 2);
    // b learns the key is over its limit and keeps it blocked in memory, which only the broadcast can lift.
    assert.equal(await admitted(b, 'reset-me'), 0);
    assert.equal((await admin(a, 'POST', '/admin/rules/api/keys/reset-me/reset')).status, 200);
    let n = 0;
    for (let i = 0; i < 200 && (n = await admitted(b, 'reset-me')) === 0; i++) await sleep(10);
    assert.ok(n >= 1, 'the other gateway admits the key again after the reset');
  });

  it('the rate limit service (--grpc --redis-cluster) counts one limit across two processes', async () => {
    const file = writeTemp(
      'ratelimit.yaml',
      'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 5 }\n',
    );
    const serve = async (): Promise<{ cli: CliProcess; address: string }> => {
      const cli = runCli(['serve', '--grpc', '127.0.0.1:0', '--rls-config', file, '--redis-cluster', seeds()]);
      const line = await cli.waitForLog((l) => l.msg === 'floodgate rls listening', 60_000);
      return { cli, address: String(line.grpc) };
    };
    const [a, b] = await Promise.all([serve(), serve()]);
    const clients = [rlsClient(a.address), rlsClient(b.address)];
    const user: Descriptor = { entries: [{ key: 'user', value: 'shared' }] };
    try {
      const codes: string[] = [];
      for (let i = 0; i < 7; i++) codes.push((await clients[i % 2]!.should('api', [user])).overall_code);
      assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    } finally {
      for (const c of clients) c.close();
      await Promise.all([stopCli(a.cli), stopCli(b.cli)]);
    }
  });
});

describe('secrets on a Cluster', () => {
  const SECRET = 'cluster-pass-5f1e0c2a9b';
  after(async () => {
    // The other files' fixtures do not share this Cluster; put it back as found for any test after this one.
    for (const n of cluster.nodes) {
      const node = new Redis({ host: n.host, port: n.port, password: SECRET, lazyConnect: true });
      await node.connect();
      await node.config('SET', 'requirepass', '');
      node.disconnect();
    }
  });

  it('a password from --redis-password-file is used, and never appears in stdout, stderr, /admin/stats or the admin API', async () => {
    await fixture.ready();
    for (const n of cluster.nodes) {
      const node = new Redis({ host: n.host, port: n.port, lazyConnect: true });
      await node.connect();
      await node.config('SET', 'masterauth', SECRET);
      await node.config('SET', 'requirepass', SECRET);
      node.disconnect();
    }
    const passwordFile = writeTemp('redis-password', `${SECRET}\n`);
    const tokenFile = writeTemp('admin-token', TOKEN);
    const g = await serveCli([
      '--upstream',
      fixture.upstream.url,
      '--redis-cluster',
      seeds(),
      '--redis-password-file',
      passwordFile,
      '--limit',
      '3/1h',
      '--admin',
      '127.0.0.1:0',
      '--admin-token-file',
      tokenFile,
      '--log-level',
      'debug',
    ]);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await get(`${g.url}/x`)).status);
      assert.deepEqual(statuses, [200, 200, 200, 429], 'counted on the Cluster with the password');
      const listening = g.logs.find((l) => l.msg === 'floodgate gateway listening')!;
      assert.match(String(listening.store), /password \*\*\*/);
      const adminUrl = String(listening.admin);
      const answers = await Promise.all(
        ['/admin/stats', '/admin/rules', '/admin/limited'].map(async (path) =>
          JSON.stringify((await adminJson(adminUrl, TOKEN, 'GET', path)).json),
        ),
      );
      assert.match(answers[0]!, /redis-cluster/);
      const seen = [JSON.stringify(g.logs), g.text.join('\n'), g.stderr(), ...answers, (await get(`${adminUrl}/metrics`)).body];
      for (const text of seen) assert.ok(!text.includes(SECRET), `the password leaked: ${text.slice(0, 300)}`);
    } finally {
      await stopCli(g);
    }
  });

  it('a wrong password stops the start with FLOODGATE_STORE_UNREACHABLE saying the credentials were refused, without the password', async () => {
    const wrong = writeTemp('wrong-password', 'not-the-password-7c1d');
    await assert.rejects(
      startGateway(
        `upstream: ${fixture.upstream.url}\nstore: { cluster: { nodes: [${seeds()}] }, passwordFile: ${wrong}, connectTimeout: 1s }\nrules: []\n`,
      ),
      (e: unknown) => {
        assert.equal((e as { code?: string }).code, ErrorCode.STORE_UNREACHABLE);
        assert.match((e as Error).message, /^store\.cluster\.nodes: .*the credentials were refused/);
        assert.ok(!(e as Error).message.includes('not-the-password'));
        return true;
      },
    );
  });
});
