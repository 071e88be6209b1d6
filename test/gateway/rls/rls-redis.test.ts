// The rate limit service on Redis: shared limits, failure policies and health, check-only descriptors, local-first.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { runCli, sleep, stopCli, writeTemp, type CliProcess } from '../support/harness.js';
import { rlsClient, type Descriptor } from '../support/rls-client.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';

const CONFIG = `
domain: api
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: internal
    rate_limit: { unlimited: true }
`;

/** Per org 1 000 a day (never reached here), per user 2: the user's block refuses while the org still has room. */
const ORG_AND_USER = `
domain: api
descriptors:
  - key: org
    rate_limit: { unit: day, requests_per_unit: 1000 }
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2 }
`;

const user = (value: string): Descriptor => ({ entries: [{ key: 'user', value }] });

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

async function serveRls(file: string, extra: string[] = []): Promise<{ cli: CliProcess; address: string }> {
  const cli = runCli(['serve', '--grpc', '127.0.0.1:0', '--rls-config', file, '--redis', redis.url, ...extra]);
  const line = await cli.waitForLog((l) => l.msg === 'floodgate rls listening');
  return { cli, address: String(line.grpc) };
}

test('two floodgate processes on one Redis share each limit exactly', async () => {
  const file = writeTemp('ratelimit.yaml', CONFIG);
  const [a, b] = await Promise.all([serveRls(file), serveRls(file)]);
  const ca = rlsClient(a.address);
  const cb = rlsClient(b.address);
  try {
    const codes: string[] = [];
    const remaining: number[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await (i % 2 === 0 ? ca : cb).should('api', [user('shared')]);
      codes.push(r.overall_code);
      remaining.push(r.statuses[0]!.limit_remaining);
    }
    assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    assert.deepEqual(remaining, [4, 3, 2, 1, 0, 0, 0]);
    assert.equal(await ca.health(), 'SERVING');
  } finally {
    ca.close();
    cb.close();
    await Promise.all([stopCli(a.cli), stopCli(b.cli)]);
  }
});

test('--local-first: the service answers from a lease of the shared Redis quota', async () => {
  const file = writeTemp('ratelimit.yaml', CONFIG);
  const a = await serveRls(file, ['--local-first']);
  const c = rlsClient(a.address);
  try {
    const codes: string[] = [];
    for (let i = 0; i < 6; i++) codes.push((await c.should('api', [user('local-first')])).overall_code);
    assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
  } finally {
    c.close();
    await stopCli(a.cli);
  }
});

test("regression: --local-first, a request one descriptor's in-memory block refused peeked each other descriptor on Redis; now read from its lease", async () => {
  const file = writeTemp('ratelimit.yaml', ORG_AND_USER);
  const a = await serveRls(file, ['--local-first']);
  const c = rlsClient(a.address);
  const admin = new Redis(redis.url);
  const both = (name: string): Descriptor[] => [{ entries: [{ key: 'org', value: 'acme' }] }, user(name)];
  try {
    for (let i = 0; i < 6; i++) {
      await c.should('api', both('ana'));
      await sleep(5);
    }
    // Another user of the org is admitted: the org holds a lease again.
    for (let i = 0; i < 2; i++) {
      assert.equal((await c.should('api', both('bob'))).overall_code, 'OK');
      await sleep(5);
    }
    await admin.config('RESETSTAT');
    const r = await c.should('api', both('ana'));
    assert.equal(r.overall_code, 'OVER_LIMIT');
    assert.equal(r.statuses[0]!.code, 'OK');
    assert.ok(r.statuses[0]!.limit_remaining > 0 && r.statuses[0]!.limit_remaining < 1000, `${r.statuses[0]!.limit_remaining} left`);
    assert.doesNotMatch(await admin.info('commandstats'), /cmdstat_(evalsha|eval):/);
  } finally {
    admin.disconnect();
    c.close();
    await stopCli(a.cli);
  }
});

test("regression: on Redis, a request one descriptor's in-memory block refused peeked each other descriptor on Redis; now from the count seen under a second ago", async () => {
  const file = writeTemp('ratelimit.yaml', ORG_AND_USER);
  const a = await serveRls(file);
  const c = rlsClient(a.address);
  const admin = new Redis(redis.url);
  const both = (name: string): Descriptor[] => [{ entries: [{ key: 'org', value: 'globex' }] }, user(name)];
  try {
    // cyd spends her 2 and is blocked in memory; dee's admitted request counts the org: 3 spent of 1000.
    for (let i = 0; i < 3; i++) await c.should('api', both('cyd'));
    assert.equal((await c.should('api', both('dee'))).statuses[0]!.limit_remaining, 997);
    await admin.config('RESETSTAT');
    const r = await c.should('api', both('cyd'));
    assert.equal(r.overall_code, 'OVER_LIMIT');
    assert.deepEqual([r.statuses[0]!.code, r.statuses[0]!.limit_remaining], ['OK', 997]);
    assert.doesNotMatch(await admin.info('commandstats'), /cmdstat_(evalsha|eval):/);
    // Past a second the org's count is read again (once), and is exact.
    await sleep(1_100);
    const later = await c.should('api', both('cyd'));
    assert.equal(later.statuses[0]!.limit_remaining, 997);
    assert.match(await admin.info('commandstats'), /cmdstat_evalsha:calls=1,/);
  } finally {
    admin.disconnect();
    c.close();
    await stopCli(a.cli);
  }
});

test('Redis down: reject → UNAVAILABLE, fail-open → OK, fail-closed → OVER_LIMIT, insurance → counted per process; unlimited needs no store; health follows Redis under reject', async () => {
  const gatewayYaml = (policy: string): string =>
    `rules: []\nstore: { type: redis, url: "${redis.url}", onFailure: ${policy}, timeout: 200ms, prefix: "fg:${policy}" }\n`;
  const policies = ['reject', 'fail-open', 'fail-closed', 'insurance'] as const;
  const fixtures: RlsFixture[] = [];
  for (const policy of policies) fixtures.push(await startRls(CONFIG, gatewayYaml(policy)));
  const [reject, open, closed, insurance] = fixtures as [RlsFixture, RlsFixture, RlsFixture, RlsFixture];
  try {
    for (const f of fixtures) {
      assert.equal((await f.client.should('api', [user('down')])).overall_code, 'OK');
      assert.equal(await f.client.health(), 'SERVING');
    }
    await redis.kill();
    await assert.rejects(reject.client.should('api', [user('down')]), (e: { code?: number }) => e.code === 14);
    assert.equal((await open.client.should('api', [user('down')])).overall_code, 'OK');
    assert.equal((await closed.client.should('api', [user('down')])).overall_code, 'OVER_LIMIT');
    // The insurance limiter counts in this process from zero: the full limit, then over.
    const codes: string[] = [];
    for (let i = 0; i < 6; i++) codes.push((await insurance.client.should('api', [user('down')])).overall_code);
    assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
    // An unlimited descriptor never reaches the store.
    const internal = await reject.client.should('api', [{ entries: [{ key: 'internal', value: 'x' }] }]);
    assert.equal(internal.overall_code, 'OK');
    // Health follows the gateway's readiness: the store counts under reject only (docs/gateway.md, readiness.store); where
    // the fallback answers, the service stays in. (Insurance is left out here: its six failed calls opened its limiters'
    // breakers, which the health check reads apart from readiness.)
    assert.equal(await waitForHealth(reject, 'NOT_SERVING'), 'NOT_SERVING');
    for (const f of [open, closed]) assert.equal(await f.client.health(), 'SERVING');
    const m = await reject.metrics();
    assert.ok((m.get('floodgate_rls_requests_total{code="store_error"}') ?? 0) >= 1);
    await redis.restart();
    for (const f of fixtures) assert.equal(await waitForHealth(f, 'SERVING'), 'SERVING');
    assert.equal((await reject.client.should('api', [user('down')])).overall_code, 'OK');
  } finally {
    for (const f of fixtures) await f.stop();
  }
});

/** Polls health until it says `want` (Redis's client notices a dead or revived server within its reconnect delay). */
async function waitForHealth(f: RlsFixture, want: string): Promise<string> {
  let status = '';
  for (let i = 0; i < 100; i++) {
    status = await f.client.health();
    if (status === want) return status;
    await sleep(100);
  }
  return status;
}

test('regression: on Redis and --local-first, a check-only quota descriptor at exactly its limit was OVER_LIMIT; now OK, over once the debits pass it, and a check past a limit counted with countRefused is over', async () => {
  const quota = `
domain: rl
descriptors:
  - key: service
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 2 }
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2 }
`;
  const svc = (hits: number): Descriptor => ({ entries: [{ key: 'service', value: 's2' }], hits_addend: { value: hits } });
  const check = (value: string): Descriptor => ({ entries: [{ key: 'user', value }], hits_addend: { value: 0 } });
  for (const localFirst of [false, true]) {
    const f = await startRls(
      quota,
      `rules: []\nstore: { type: redis, url: "${redis.url}", timeout: 500ms, localFirst: ${localFirst}, prefix: "fg:quota:${localFirst}" }\n`,
      undefined,
      { countRefused: true },
    );
    try {
      const codes: string[] = [];
      for (let i = 0; i < 4; i++) {
        codes.push((await f.client.should('rl', [svc(0)])).overall_code);
        await f.client.should('rl', [svc(1)]);
      }
      assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT'], `localFirst: ${localFirst}`);
      for (let i = 0; i < 2; i++) assert.equal((await f.client.should('rl', [user('at')])).overall_code, 'OK');
      const at = await f.client.should('rl', [check('at')]);
      assert.deepEqual([at.overall_code, at.statuses[0]!.limit_remaining], ['OK', 0], `at the limit, localFirst: ${localFirst}`);
      assert.equal((await f.client.should('rl', [user('at')])).overall_code, 'OVER_LIMIT');
      // Refused and counted (countRefused): the count is past the limit, so a check is over too.
      assert.equal((await f.client.should('rl', [check('at')])).overall_code, 'OVER_LIMIT', `past the limit, localFirst: ${localFirst}`);
    } finally {
      await f.stop();
    }
  }
});
