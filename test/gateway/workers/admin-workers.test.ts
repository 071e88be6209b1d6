// The admin API and the dashboard under --workers 2 (real processes): the primary asks every worker, and its answers match
// one process's for the same traffic on the cluster store and on Redis; a worker killed or hung during admin requests is
// named in the answer, which never waits past its timeout, and the worker started in its place takes the admin state.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { freePort, startRedis, type RedisServer } from '../../support/redis-server.js';
import { adminJson } from '../support/admin.js';
import { readiness, serveCli, sleep, startUpstream, stopCli, writeTemp, type CliProcess, type Upstream } from '../support/harness.js';

const TOKEN = 'workers-admin-token-0123456789ab';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

/** A rule of two policies keyed by API key (3 per hour, and 100 a day blocking for an hour past it) with live overrides. */
const config = (adminPort: number, overrides = 'overrides: { keys: {} }') =>
  `upstream: ${upstream.url}\nadmin:\n  listen: 127.0.0.1:${adminPort}\n  token: ${TOKEN}\nrules:\n` +
  `  - name: api\n    key: { header: x-api-key }\n    ${overrides}\n    policies:\n` +
  `      - { name: burst, limit: 3, window: 1h }\n      - { name: daily, limit: 100, window: 1d, blockDuration: 1h }\n`;

interface Running {
  cli: CliProcess;
  proxy: string;
  admin: string;
  /** The workers' pids, in the order they first listened (empty for one process). */
  pids: number[];
}

/** `floodgate serve --config` with `args`, once every process listens and the admin listener says ready. */
async function start(yaml: string, args: readonly string[] = []): Promise<Running> {
  const port = await freePort();
  const adminPort = Number(/listen: 127\.0\.0\.1:(\d+)/.exec(yaml)![1]);
  const cli = await serveCli(['--config', writeTemp('floodgate.yaml', yaml), '--listen', `127.0.0.1:${port}`, ...args]);
  const workers = args.includes('--workers') ? Number(args[args.indexOf('--workers') + 1]) : 0;
  const listening = () => cli.logs.filter((l) => l.msg === 'floodgate gateway listening');
  await cli.waitForLog(() => listening().length >= Math.max(1, workers), 60_000);
  const admin = `http://127.0.0.1:${adminPort}`;
  for (let i = 0; i < 200 && (await readiness(`${admin}/readyz`)).status !== 200; i += 1) await sleep(50);
  return { cli, proxy: `http://127.0.0.1:${port}`, admin, pids: workers === 0 ? [] : listening().map((l) => Number(l.pid)) };
}

/** Statuses of `n` requests with API key `key`, each on a fresh connection: node:cluster hands them to the workers in turn. */
async function send(g: Running, key: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i += 1) out.push((await get(`${g.proxy}/`, { headers: { 'x-api-key': key } })).status);
  return out;
}

const api = (g: Running, method: string, path: string, body?: string) => adminJson(g.admin, TOKEN, method, path, body);

/** An answer with its clock readings (which differ from run to run) replaced by whether they are running. */
function steady(answer: { status: number; json: unknown }): unknown {
  return JSON.parse(JSON.stringify(answer), (name, v: unknown) =>
    // `tracked` counts the entries each process holds: under --workers, every worker's table.
    ['resetMs', 'refusedForMs', 'memoryBlockMs', 'blockedForMs', 'tracked'].includes(name) && typeof v === 'number' ? v > 0 : v,
  );
}

/**
 * One script of traffic and admin requests, and every admin answer along it: run on one process and on --workers 2, the
 * answers must be equal. Each step's requests go on fresh connections, so under --workers they alternate workers.
 */
async function script(g: Running, key: string): Promise<unknown[]> {
  const seen: unknown[] = [];
  const step = async (what: string, answer: Promise<{ status: number; json: unknown }>, then?: () => Promise<number[]>) => {
    seen.push({ what, answer: steady(await answer), after: then === undefined ? undefined : await then() });
  };
  await step('5 requests, then inspect', (async () => (await send(g, key, 5), api(g, 'GET', `/admin/rules/api/keys/${key}`)))());
  // The 4th and 5th requests went to different workers: the key is listed once, with both refusals.
  await step('limited: the key once, its refusals of both workers summed', api(g, 'GET', '/admin/limited?rule=api'));
  await step('reset; the next 2 requests (one per worker) pass', api(g, 'POST', `/admin/rules/api/keys/${key}/reset`), () =>
    send(g, key, 2),
  );
  await step('block 10m; refused in every worker', api(g, 'POST', `/admin/rules/api/keys/${key}/block`, '{"duration":"10m"}'), () =>
    send(g, key, 4),
  );
  await step('inspect while blocked', api(g, 'GET', `/admin/rules/api/keys/${key}`));
  await step('unblock; the count is kept (2 of 3 spent)', api(g, 'POST', `/admin/rules/api/keys/${key}/unblock`), () => send(g, key, 3));
  await step('one policy inspected by name', api(g, 'GET', `/admin/rules/api/policies/daily/keys/${key}`));
  await step(
    'override PUT: 1 per hour for a fresh key, in every worker',
    api(g, 'PUT', `/admin/rules/api/overrides/${key}-vip`, '{"value":{"burst":"1/1h"}}'),
    () => send(g, `${key}-vip`, 4),
  );
  await step('overrides listed', api(g, 'GET', '/admin/rules/api/overrides'));
  await step("override DELETE: the rule's 3 per hour again", api(g, 'DELETE', `/admin/rules/api/overrides/${key}-vip`), () =>
    send(g, `${key}-vip2`, 4),
  );
  await step('bad body: the same 400', api(g, 'POST', `/admin/rules/api/keys/${key}/block`, '{"duration":'));
  await step('unknown rule: the same 404', api(g, 'GET', `/admin/rules/nope/keys/${key}`));
  return seen;
}

describe('gateway --workers 2: the admin API and dashboard from the primary', { timeout: 300_000 }, () => {
  it('on the cluster store: inspect, reset, block, unblock, limited and overrides answer exactly as one process does for the same traffic', async () => {
    const one = await start(config(await freePort()));
    let single: unknown[];
    try {
      single = await script(one, 'k1');
    } finally {
      await stopCli(one.cli);
    }
    const two = await start(config(await freePort()), ['--workers', '2']);
    try {
      const workers = await script(two, 'k1');
      assert.deepEqual(workers, single);
      // The script's own expectations, so equal answers are also right ones.
      const [inspect, limited, reset, block, , unblock, , put] = single as Array<{ answer: { json: any }; after: number[] }>; // eslint-disable-line @typescript-eslint/no-explicit-any
      assert.deepEqual(
        inspect!.answer.json.policies.map((p: { remaining: number }) => p.remaining),
        [0, 97],
      );
      assert.deepEqual(reset!.after, [200, 200]);
      assert.deepEqual(block!.after, [429, 429, 429, 429]);
      assert.deepEqual(unblock!.after, [200, 429, 429]);
      assert.deepEqual(limited!.answer.json.rules[0].keys, [{ policy: 'burst', key: 'k1', refusals: 2 }]);
      assert.deepEqual(put!.after, [200, 429, 429, 429]);
    } finally {
      assert.equal(await stopCli(two.cli), 0);
    }
  });

  it('on Redis: the same answers as one process, the override written to its hash and applied in every worker at once', async () => {
    const redis: RedisServer = await startRedis();
    try {
      const yaml = (port: number) => config(port, 'overrides: { redis: "fg:test:overrides" }');
      const one = await start(yaml(await freePort()), ['--redis', redis.url]);
      let single: unknown[];
      try {
        single = await script(one, 'r1');
      } finally {
        await stopCli(one.cli);
      }
      const two = await start(yaml(await freePort()), ['--redis', redis.url, '--workers', '2']);
      try {
        // The one process's counts stay in Redis: this run counts another key.
        const workers = JSON.parse(JSON.stringify(await script(two, 'r2')).replaceAll('r2', 'r1')) as unknown[];
        assert.deepEqual(workers, JSON.parse(JSON.stringify(single)));
        const [inspect, , , block, , unblock] = single as Array<{ answer: { json: any }; after: number[] }>; // eslint-disable-line @typescript-eslint/no-explicit-any
        assert.deepEqual(
          inspect!.answer.json.policies.map((p: { remaining: number }) => p.remaining),
          [0, 97],
        );
        assert.deepEqual(block!.after, [429, 429, 429, 429]);
        assert.deepEqual(unblock!.after, [200, 429, 429]);
      } finally {
        assert.equal(await stopCli(two.cli), 0);
      }
    } finally {
      await redis.stop();
    }
  });

  it('with --lease: a reset revokes the quota leased to every worker, so the next requests pass in both; a block refuses in both', async () => {
    const g = await start(config(await freePort()), ['--workers', '2', '--lease', '200ms']);
    try {
      assert.deepEqual(await send(g, 'l1', 5), [200, 200, 200, 429, 429]);
      const seen = await api(g, 'GET', '/admin/rules/api/keys/l1');
      // Leased units count as spent: the limit is reached, so none is left whoever holds them.
      assert.equal(seen.json.policies[0].remaining, 0);
      assert.equal((await api(g, 'POST', '/admin/rules/api/keys/l1/reset')).json.policies[0].remaining, 3);
      assert.deepEqual(await send(g, 'l1', 4), [200, 200, 200, 429]);
      assert.equal((await api(g, 'POST', '/admin/rules/api/keys/l1/reset')).status, 200);
      assert.equal((await api(g, 'POST', '/admin/rules/api/keys/l1/block', '{"duration":"10m"}')).status, 200);
      assert.deepEqual(await send(g, 'l1', 4), [429, 429, 429, 429]);
    } finally {
      assert.equal(await stopCli(g.cli), 0);
    }
  });

  it('the dashboard page loads from the primary and its stats sum every worker, as /metrics does', async () => {
    const g = await start(config(await freePort()), ['--workers', '2']);
    try {
      const page = await get(`${g.admin}/admin/dashboard`);
      assert.equal(page.status, 200);
      assert.match(String(page.headers['content-type']), /text\/html/);
      assert.deepEqual(await send(g, 'd1', 6), [200, 200, 200, 429, 429, 429]);
      const stats = await api(g, 'GET', '/admin/stats');
      assert.equal(stats.status, 200);
      const count = (outcome: string) =>
        (stats.json.decisions as Array<{ rule: string; outcome: string; count: number }>)
          .filter((d) => d.rule === 'api' && d.outcome === outcome)
          .reduce((sum, d) => sum + d.count, 0);
      assert.equal(count('allowed'), 3);
      assert.equal(count('limited'), 3);
      assert.deepEqual(stats.json.limited.rules[0].keys, [{ policy: 'burst', key: 'd1', refusals: 3 }]);
      assert.equal(stats.json.store.connected, true);
      assert.equal(stats.json.missingWorkers, undefined);
      assert.equal((await get(`${g.admin}/admin/stats`)).status, 401, 'the stats still need the token');
    } finally {
      assert.equal(await stopCli(g.cli), 0);
    }
  });

  it('a worker killed (SIGKILL) during admin requests: every answer comes within its timeout, names the dead worker, and its replacement takes the override and the block', async (t) => {
    const g = await start(config(await freePort()), ['--workers', '2']);
    try {
      assert.equal((await api(g, 'PUT', '/admin/rules/api/overrides/vip', '{"value":{"burst":"1/1h"}}')).status, 200);
      assert.equal((await api(g, 'POST', '/admin/rules/api/keys/blocked/block', '{"duration":"1h"}')).status, 200);
      const victim = g.pids[0]!;
      const answers: Array<{ status: number; ms: number; missing: Array<{ pid: number; error: string }> | undefined }> = [];
      let killed = false;
      const asking = (async () => {
        const started = Date.now();
        while (Date.now() - started < 4_000) {
          const t = Date.now();
          const r = await api(g, 'GET', '/admin/rules/api/keys/someone');
          answers.push({ status: r.status, ms: Date.now() - t, missing: r.json.missingWorkers });
          if (!killed && answers.length === 5) {
            process.kill(victim, 'SIGKILL');
            killed = true;
          }
        }
      })();
      await asking;
      assert.ok(killed);
      assert.ok(
        answers.every((a) => a.status === 200),
        `every answer from the workers left: ${JSON.stringify(answers.map((a) => a.status))}`,
      );
      const slowest = Math.max(...answers.map((a) => a.ms));
      const sorted = answers.map((a) => a.ms).sort((x, y) => x - y);
      t.diagnostic(
        `${answers.length} admin answers in 4 s around the kill: median ${sorted[sorted.length >> 1]} ms, slowest ${slowest} ms`,
      );
      assert.ok(slowest < 3_000, `slowest admin answer ${slowest} ms, within the call timeout`);
      const named = answers.find((a) => a.missing !== undefined);
      assert.ok(named !== undefined, 'an answer names the missing worker');
      assert.equal(named.missing![0]!.pid, victim);
      assert.match(named.missing![0]!.error, /worker \d+ (was killed by SIGKILL|exited)/);

      // The replacement listens: answers are whole again, and it refuses as its sibling does.
      await g.cli.waitForLog(() => g.cli.logs.filter((l) => l.msg === 'floodgate gateway listening').length >= 3, 30_000);
      for (let i = 0; i < 100 && (await api(g, 'GET', '/admin/rules')).json.missingWorkers !== undefined; i += 1) await sleep(50);
      assert.equal((await api(g, 'GET', '/admin/rules')).json.missingWorkers, undefined);
      assert.ok(g.cli.logs.some((l) => l.msg === "took the admin API's overrides of the workers already serving" && l.overrides === 1));
      assert.deepEqual(await send(g, 'vip', 4), [200, 429, 429, 429], 'the override set before the kill holds in both workers');
      assert.deepEqual(await send(g, 'blocked', 4), [429, 429, 429, 429], 'the block set before the kill holds in both workers');
    } finally {
      assert.equal(await stopCli(g.cli), 0);
    }
  });

  it("keeps the admin listener's limits in the primary: 401 without the token, 421 for a Host not in admin.hosts, 413 for a body over 4 KB", async () => {
    const adminPort = await freePort();
    const yaml = config(adminPort).replace(`  token: ${TOKEN}\n`, `  token: ${TOKEN}\n  hosts: [floodgate-admin.internal]\n`);
    const g = await start(yaml, ['--workers', '2']);
    try {
      const none = await get(`${g.admin}/admin/rules`);
      assert.equal(none.status, 401);
      assert.equal(none.headers['www-authenticate'], 'Bearer realm="floodgate admin"');
      const rebound = await get(`${g.admin}/admin/rules`, { headers: { authorization: `Bearer ${TOKEN}`, host: 'evil.example' } });
      assert.equal(rebound.status, 421);
      assert.equal(
        (await get(`${g.admin}/admin/rules`, { headers: { authorization: `Bearer ${TOKEN}`, host: 'floodgate-admin.internal' } })).status,
        200,
      );
      const big = await api(g, 'POST', '/admin/rules/api/keys/k/block', JSON.stringify({ duration: '1m', pad: 'x'.repeat(5000) }));
      assert.deepEqual(big, { status: 413, json: { error: 'the body is over 4096 bytes.', field: 'body' } });
      // A reset reads no body, as in one process: the same oversized body does not stop it.
      assert.equal((await api(g, 'POST', '/admin/rules/api/keys/k/reset', 'x'.repeat(5000))).status, 200);
    } finally {
      assert.equal(await stopCli(g.cli), 0);
    }
  });

  it("a hung worker (SIGSTOP): the admin answer comes after the call timeout with the other worker's answer, naming the hung one", async (t) => {
    const g = await start(config(await freePort()), ['--workers', '2']);
    const hung = g.pids[1]!;
    try {
      process.kill(hung, 'SIGSTOP');
      const t0 = Date.now();
      const r = await api(g, 'GET', '/admin/rules/api/keys/someone');
      const ms = Date.now() - t0;
      t.diagnostic(`answered after ${ms} ms with one worker stopped`);
      assert.equal(r.status, 200);
      assert.equal(r.json.policies.length, 2);
      assert.equal(r.json.missingWorkers.length, 1);
      assert.equal(r.json.missingWorkers[0].pid, hung);
      assert.match(r.json.missingWorkers[0].error, /^worker \d+ did not answer within 2 s$/);
      assert.ok(ms >= 1_900 && ms < 4_000, `answered after ${ms} ms`);
    } finally {
      process.kill(hung, 'SIGCONT');
      assert.equal(await stopCli(g.cli), 0);
    }
  });
});
