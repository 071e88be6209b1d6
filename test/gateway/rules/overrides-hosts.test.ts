// Three gateway processes on one Redis: an override set through the admin API of one is applied by all three (time measured and printed), and no count is reset or lost, on the Redis store and on local-first with leases held on every host.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { adminFetch } from '../support/admin.js';
import { serveCli, stopCli, writeTemp, type CliProcess } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const TOKEN = 'test-admin-token-hosts-0123456789abcdef';
/** The stated bound: an override reaches every connected host within a pub/sub delivery and one HGET; 1 s allows a loaded CI machine. */
const APPLIED_WITHIN_MS = 1000;
const hosts: Array<CliProcess & { url: string; admin: string }> = [];
// Registered before the fixture's hooks, so that it runs first: the hosts stop while their upstream and Redis still answer.
after(async () => {
  await Promise.all(hosts.map((h) => stopCli(h)));
});
const fixture = redisGatewayFixture();

type Host = CliProcess & { url: string; admin: string };

async function threeHosts(localFirst: boolean, hash: string): Promise<[Host, Host, Host]> {
  const config = writeTemp(
    `hosts-${hash}.yaml`,
    `upstream: ${fixture.upstream.url}\nadmin: { listen: 127.0.0.1:0, token: ${TOKEN} }\n` +
      `store: { type: redis, url: "${fixture.redis.url}"${localFirst ? ', localFirst: true' : ''} }\n` +
      `rules:\n  - name: api\n    key: "header:x-api-key"\n    policies: ["100/1h"]\n    overrides: { redis: "${hash}" }\n`,
  );
  const started = await Promise.all([0, 1, 2].map(() => serveCli(['--config', config, '--no-watch'])));
  const out = started.map((cli) => {
    const line = cli.logs.find((l) => l.msg === 'floodgate gateway listening')!;
    return Object.assign(cli, { admin: String(line.admin) });
  });
  hosts.push(...out);
  return [out[0]!, out[1]!, out[2]!];
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the answer is read field by field
async function admin(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await adminFetch(base, TOKEN, method, path, body === undefined ? undefined : JSON.stringify(body));
  assert.equal(res.status, 200, `${method} ${path}`);
  return res.json();
}

const send = async (url: string, key: string) => (await get(`${url}/x`, { headers: { 'x-api-key': key } })).status;

/** Polls a host's view of `key` until its limit is `limit`; ms from `since`. */
async function appliedAfter(adminUrl: string, key: string, limit: number, since: number): Promise<number> {
  for (;;) {
    const seen = await admin(adminUrl, 'GET', `/admin/rules/api/keys/${key}`);
    if (seen.policies[0].limit === limit) return performance.now() - since;
    if (performance.now() - since > 10_000) throw new Error(`${adminUrl} never applied the override`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

for (const localFirst of [false, true]) {
  describe(`overrides across three gateways (${localFirst ? 'local-first' : 'Redis store'})`, () => {
    it('an override PUT on one host applies on all three within the stated time; the counts are kept exactly', async () => {
      const hash = `fg:overrides:hosts-${localFirst ? 'lf' : 'redis'}`;
      // A key of its own per store: both runs count in one Redis under the same rule.
      const key = localFirst ? 'cust-lf' : 'cust';
      const [a, b, c] = await threeHosts(localFirst, hash);
      // Five units of the key on each host: with local-first each host now holds a lease of the key's quota.
      for (const h of [a, b, c]) for (let i = 0; i < 5; i++) assert.equal(await send(h.url, key), 200);
      const t0 = performance.now();
      await admin(a.admin, 'PUT', `/admin/rules/api/overrides/${key}`, { value: '20/1h' });
      const times = await Promise.all([a, b, c].map((h) => appliedAfter(h.admin, key, 20, t0)));
      process.stdout.write(`# override applied after ${times.map((t) => `${t.toFixed(1)} ms`).join(', ')} (hosts A, B, C)\n`);
      for (const t of times) assert.ok(t <= APPLIED_WITHIN_MS, `applied after ${t} ms`);
      // 15 used before the change stay counted: exactly 5 more across the three hosts, none from a lease taken under 100.
      let more = 0;
      for (let round = 0; round < 10; round++) for (const h of [a, b, c]) if ((await send(h.url, key)) === 200) more++;
      assert.equal(more, 5);
      const seen = await admin(c.admin, 'GET', `/admin/rules/api/keys/${key}`);
      assert.equal(seen.policies[0].remaining, 0);
      assert.equal(seen.override, key);
      // Removed on B: every host is back at 100, with the 20 used still counted.
      const t1 = performance.now();
      await admin(b.admin, 'DELETE', `/admin/rules/api/overrides/${key}`);
      await Promise.all([a, b, c].map((h) => appliedAfter(h.admin, key, 100, t1)));
      assert.equal((await admin(a.admin, 'GET', `/admin/rules/api/keys/${key}`)).policies[0].remaining, 80);
    });
  });
}
