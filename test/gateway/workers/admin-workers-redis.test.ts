// `floodgate serve --workers 2` on a real Redis Cluster (3 masters) and through Redis Sentinel: the primary's admin API
// and dashboard give the numbers one process on the same store gives; a reset, block and unblock act in both workers.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { freePort, startRedisCluster, startRedisSentinel, type RedisCluster, type RedisSentinel } from '../../support/redis-server.js';
import { adminJson } from '../support/admin.js';
import { readiness, serveCli, sleep, startUpstream, stopCli, writeTemp, type CliProcess, type Upstream } from '../support/harness.js';

const TOKEN = 'workers-admin-redis-token-0123456789';

let upstream: Upstream;
let cluster: RedisCluster;
let sentinel: RedisSentinel;
/** The upstream connections each API key's requests arrived on: a worker forwards on its own keep-alive connection. */
const connections = new Map<string, Set<number>>();

before(async () => {
  // Both Redis set-ups start once for the file, side by side (the sentinels take seconds to find each other).
  [upstream, cluster, sentinel] = await Promise.all([
    startUpstream(),
    startRedisCluster(),
    startRedisSentinel({ replicas: 1, sentinels: 3 }),
  ]);
  upstream.server.on('request', (req: IncomingMessage) => {
    const key = String(req.headers['x-api-key']);
    connections.set(key, (connections.get(key) ?? new Set()).add(req.socket.remotePort!));
  });
});
after(async () => {
  await Promise.all([upstream?.close(), cluster?.stop(), sentinel?.stop()]);
});

/** One rule keyed by API key, two policies counting in the store (30 per hour, 1000 a day), and the admin API on `adminPort`. */
const config = (adminPort: number): string =>
  `upstream: ${upstream.url}\nadmin:\n  listen: 127.0.0.1:${adminPort}\n  token: ${TOKEN}\nrules:\n` +
  '  - name: api\n    key: { header: x-api-key }\n    policies:\n' +
  '      - { name: burst, limit: 30, window: 1h }\n      - { name: daily, limit: 1000, window: 1d }\n';

interface Running {
  cli: CliProcess;
  proxy: string;
  admin: string;
}

/** `floodgate serve` on the store `storeArgs` name, once every process listens and the admin listener says ready. */
async function start(storeArgs: readonly string[], workers: number): Promise<Running> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const args = ['--config', writeTemp('floodgate.yaml', config(adminPort)), '--listen', `127.0.0.1:${port}`, ...storeArgs];
  const cli = await serveCli(workers === 0 ? args : [...args, '--workers', String(workers)]);
  await cli.waitForLog(() => cli.logs.filter((l) => l.msg === 'floodgate gateway listening').length >= Math.max(1, workers), 60_000);
  const admin = `http://127.0.0.1:${adminPort}`;
  for (let i = 0; i < 200 && (await readiness(`${admin}/readyz`)).status !== 200; i += 1) await sleep(50);
  return { cli, proxy: `http://127.0.0.1:${port}`, admin };
}

/**
 * Statuses of `n` requests with API key `key`, each on a fresh connection (node:cluster hands them to the workers in turn),
 * and how many upstream connections the admitted ones came on: one per process that forwarded any.
 */
async function send(g: Running, key: string, n: number): Promise<{ statuses: number[]; forwardedBy: number }> {
  connections.delete(key);
  const statuses: number[] = [];
  for (let i = 0; i < n; i += 1) statuses.push((await get(`${g.proxy}/`, { headers: { 'x-api-key': key } })).status);
  return { statuses, forwardedBy: connections.get(key)?.size ?? 0 };
}

const api = (g: Running, method: string, path: string, body?: string) => adminJson(g.admin, TOKEN, method, path, body);

/** An admin answer with its clock readings (which differ from run to run) replaced by whether they are running. */
function steady(answer: { status: number; json: unknown }): unknown {
  return JSON.parse(JSON.stringify(answer), (name, v: unknown) =>
    ['resetMs', 'refusedForMs', 'memoryBlockMs', 'blockedForMs'].includes(name) && typeof v === 'number' ? v > 0 : v,
  );
}

/** What the dashboard shows of rule `api`: its decisions by outcome, its most-limited keys, the store's connection. */
async function dashboard(g: Running): Promise<unknown> {
  const { status, json } = await api(g, 'GET', '/admin/stats');
  const decisions = (json.decisions as Array<{ rule: string; outcome: string; count: number }>)
    .filter((d) => d.rule === 'api' && d.count > 0)
    .map((d) => `${d.outcome}: ${d.count}`)
    .sort();
  return { status, decisions, limited: json.limited.rules, connected: json.store.connected, missingWorkers: json.missingWorkers };
}

/** One step of {@link script}: an admin answer, then the requests sent after it. */
interface Step {
  readonly what: string;
  readonly answer: unknown;
  readonly statuses: readonly number[] | undefined;
  /** Upstream connections the step's admitted requests came on (not compared: 1 for one process, one per worker). */
  readonly forwardedBy: number | undefined;
}

/**
 * Traffic and admin requests on one key, with every admin answer along the way; run on one process and on --workers 2 on
 * the same store (each its own key, as counts stay in the store), the answers must be equal.
 */
async function script(g: Running, key: string): Promise<Step[]> {
  const steps: Step[] = [];
  const step = async (what: string, answer: () => Promise<unknown>, n = 0): Promise<void> => {
    const seen = await answer();
    const sent = n === 0 ? undefined : await send(g, key, n);
    // The key's name is the only difference the runs are allowed.
    const same = JSON.parse(JSON.stringify(seen ?? null).replaceAll(key, 'KEY')) as unknown;
    steps.push({ what, answer: same, statuses: sent?.statuses, forwardedBy: sent?.forwardedBy });
  };
  const inspect = async () => steady(await api(g, 'GET', `/admin/rules/api/keys/${key}`));
  await step('10 requests admitted', () => Promise.resolve(undefined), 10);
  await step('inspect: 20 and 990 remaining', inspect);
  await step('dashboard: 10 allowed', () => dashboard(g));
  await step(
    'block 10m; 20 requests, every one refused',
    async () => steady(await api(g, 'POST', `/admin/rules/api/keys/${key}/block`, '{"duration":"10m"}')),
    20,
  );
  await step('inspect while blocked', inspect);
  await step(
    'unblock; 20 requests, every one admitted',
    async () => steady(await api(g, 'POST', `/admin/rules/api/keys/${key}/unblock`)),
    20,
  );
  await step('6 requests over the burst limit, refused', () => Promise.resolve(undefined), 6);
  await step('inspect: over the limit, held by the in-memory block', inspect);
  await step('dashboard: 30 allowed, 26 limited', () => dashboard(g));
  await step('reset; 20 requests, every one admitted', async () => steady(await api(g, 'POST', `/admin/rules/api/keys/${key}/reset`)), 20);
  await step('inspect: 10 and 980 remaining', inspect);
  await step('dashboard: 50 allowed, 26 limited', () => dashboard(g));
  return steps;
}

/** Runs {@link script} on one process and on --workers 2, both on the store `storeArgs` name, and checks they agree. */
async function sameAsOneProcess(storeArgs: readonly string[], t: { diagnostic(message: string): void }): Promise<void> {
  const [one, two] = await Promise.all([start(storeArgs, 0), start(storeArgs, 2)]);
  try {
    const prefix = `k${Date.now().toString(36)}`;
    const [single, workers] = await Promise.all([script(one, `${prefix}-one`), script(two, `${prefix}-two`)]);
    const answers = (steps: Step[]) => steps.map(({ what, answer, statuses }) => ({ what, answer, statuses }));
    assert.deepEqual(answers(workers), answers(single));

    // The script's own expectations, so that equal answers are also right ones.
    const by = (what: string) => single.find((s) => s.what.startsWith(what))!;
    const remaining = (what: string) =>
      (by(what).answer as { json: { policies: Array<{ remaining: number }> } }).json.policies.map((p) => p.remaining);
    assert.deepEqual(by('10 requests').statuses, Array(10).fill(200));
    assert.deepEqual(remaining('inspect: 20'), [20, 990]);
    assert.deepEqual(by('block').statuses, Array(20).fill(429));
    assert.deepEqual(by('unblock').statuses, Array(20).fill(200));
    assert.deepEqual(by('6 requests').statuses, Array(6).fill(429));
    assert.deepEqual(by('reset').statuses, Array(20).fill(200));
    assert.deepEqual(remaining('inspect: 10'), [10, 980]);
    const final = by('dashboard: 50') as { answer: { decisions: string[]; connected: boolean; missingWorkers: unknown } };
    assert.deepEqual(final.answer.decisions, ['allowed: 50', 'limited: 26']);
    assert.equal(final.answer.connected, true);
    assert.equal(final.answer.missingWorkers, undefined);

    // Both workers forwarded after the unblock and after the reset: neither kept a block the admin API ended.
    for (const what of ['unblock', 'reset']) {
      const forwardedBy = workers.find((s) => s.what.startsWith(what))!.forwardedBy!;
      t.diagnostic(`after the ${what}: 20 requests admitted, forwarded on ${forwardedBy} upstream connections under --workers 2`);
      assert.ok(forwardedBy >= 2, `both workers admitted requests after the ${what}: ${forwardedBy} upstream connection(s)`);
    }
  } finally {
    const codes = await Promise.all([stopCli(one.cli), stopCli(two.cli)]);
    assert.deepEqual(codes, [0, 0]);
  }
}

describe('gateway --workers 2 on Redis Cluster and Sentinel: the admin API and dashboard from the primary', { timeout: 120_000 }, () => {
  it('on a 3-master Redis Cluster: inspect, block, unblock, reset and the dashboard answer as one process on the same Cluster, and act in both workers', async (t) => {
    await sameAsOneProcess(['--redis-cluster', cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')], t);
  });

  it('through Redis Sentinel (1 master, 1 replica, 3 sentinels): the same answers as one process, acting in both workers', async (t) => {
    await sameAsOneProcess(['--redis-sentinel', sentinel.spec], t);
  });
});
