// /readyz and the store, per failure policy, on a real Redis that is killed and started again: only `reject` (or readiness.store: true) leaves the load balancer while the fallback could answer; a starting gateway waits for its first connection attempt.
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { storeCountsForReadiness } from '../../../src/gateway/store/store-readiness.js';
import { get, statuses } from '../../http/support/http.js';
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { parseMetrics, readiness, sleep, startGateway, startUpstream, type Upstream } from '../support/harness.js';

let upstream: Upstream;
let redis: RedisServer;
const gateways: Gateway[] = [];
before(async () => {
  [upstream, redis] = await Promise.all([startUpstream(), startRedis()]);
});
after(async () => {
  await Promise.all(gateways.map((g) => g.shutdown()));
  await upstream.close();
  await redis.stop();
});

const RULES = 'rules: [{ name: r, key: "header:x-api-key", policies: ["2/1m"] }]\n';

async function gateway(onFailure: string, readinessYaml = '', url = redis.url): Promise<Gateway> {
  const g = await startGateway(
    `upstream: ${upstream.url}\nstore: { type: redis, url: "${url}", timeout: 200ms, onFailure: ${onFailure} }\n${readinessYaml}${RULES}`,
  );
  gateways.push(g);
  return g;
}

const readyz = (g: Gateway) => readiness(`${g.url}/_floodgate/readyz`);

/** Polls /readyz until its status is `status` (the Redis client notices a dead or revived server within its reconnect step). */
async function until(g: Gateway, status: number): Promise<{ status: number; reason: string | undefined }> {
  let r = await readyz(g);
  for (let i = 0; i < 250 && r.status !== status; i += 1) {
    await sleep(20);
    r = await readyz(g);
  }
  return r;
}

const h = (key: string) => ({ headers: { 'x-api-key': key } });

test('Redis killed and started again: only reject and readiness.store: true turn /readyz 503; the others stay ready and their fallback answers', async () => {
  const insured = await gateway('insurance');
  const open = await gateway('fail-open');
  const closed = await gateway('fail-closed');
  const reject = await gateway('reject');
  const strict = await gateway('insurance', 'readiness: { store: true }\n');
  const lenient = await gateway('reject', 'readiness: { store: false }\n');
  const all = [insured, open, closed, reject, strict, lenient];
  for (const g of all) assert.deepEqual(await until(g, 200), { status: 200, reason: undefined });

  await redis.kill();
  try {
    assert.deepEqual(await until(reject, 503), { status: 503, reason: 'store not connected' });
    assert.deepEqual(await until(strict, 503), { status: 503, reason: 'store not connected' });

    // Enough failed calls to open the insurance limiter's breaker: it still answers, so it stays ready.
    assert.deepEqual(await statuses(`${insured.url}/`, 7, h('down')), [200, 200, 429, 429, 429, 429, 429]);
    assert.deepEqual(await statuses(`${open.url}/`, 3, h('down')), [200, 200, 200]);
    assert.deepEqual(await statuses(`${closed.url}/`, 1, h('down')), [429]);
    assert.deepEqual(await statuses(`${lenient.url}/`, 1, h('down')), [503], 'reject answers 503 itself');
    for (const g of [insured, open, closed, lenient]) assert.deepEqual(await readyz(g), { status: 200, reason: undefined });
    assert.equal((await get(`${strict.url}/_floodgate/healthz`)).status, 200, 'not ready, but alive');

    // Started during the outage: the refused connection ends the first attempt, and the policy decides as above.
    const late = await gateway('insurance');
    const lateReject = await gateway('reject');
    assert.deepEqual(await until(late, 200), { status: 200, reason: undefined });
    assert.deepEqual(await statuses(`${late.url}/`, 3, h('late')), [200, 200, 429], 'insurance decides');
    assert.deepEqual(await readyz(lateReject), { status: 503, reason: 'store not connected' });
    all.push(late, lateReject);
  } finally {
    await redis.restart();
  }

  for (const g of all) assert.deepEqual(await until(g, 200), { status: 200, reason: undefined });
  // Back on Redis: once the breaker's cooldown has passed, a request is decided there again.
  const ok = async (): Promise<number> =>
    parseMetrics((await get(`${insured.url}/_floodgate/metrics`)).body).get(
      'floodgate_store_duration_seconds_count{store="redis",result="ok"}',
    ) ?? 0;
  const before = await ok();
  for (let i = 0; i < 100 && (await ok()) === before; i += 1) {
    await get(`${insured.url}/`, h(`back-${i}`));
    await sleep(50);
  }
  assert.ok((await ok()) > before, 'decided by Redis again');
});

test('a starting gateway is not ready while its first connection attempt is under way, and is once it ends', async () => {
  // A server that accepts and never answers: ioredis's ready check waits on it.
  const sockets = new Set<Socket>();
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const url = `redis://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  try {
    const g = await gateway('insurance', '', url);
    assert.deepEqual(await readyz(g), { status: 503, reason: 'store connecting' });
    // The attempt ends (the connection drops): the fallback can answer now, so the gateway is ready.
    silent.close();
    for (let i = 0; i < 250 && sockets.size === 0; i += 1) await sleep(20);
    for (const s of sockets) s.destroy();
    assert.deepEqual(await until(g, 200), { status: 200, reason: undefined });
    assert.deepEqual(await statuses(`${g.url}/`, 3, h('starting')), [200, 200, 429]);
  } finally {
    silent.close();
  }
});

test('readiness.store: a boolean, checked at its line; unset, it follows store.onFailure; --ready-upstream keeps it', async () => {
  const base = 'upstream: http://127.0.0.1:1\nstore: { type: redis, url: "redis://127.0.0.1:6379", onFailure: POLICY }\n';
  const counts = async (policy: string, extra = ''): Promise<boolean> =>
    storeCountsForReadiness(await parseConfigText(`${base.replace('POLICY', policy)}${extra}`, 'f.yaml'));
  assert.deepEqual(await Promise.all(['insurance', 'fail-open', 'fail-closed', 'reject'].map((p) => counts(p))), [
    false,
    false,
    false,
    true,
  ]);
  assert.equal(await counts('insurance', 'readiness: { store: true }\n'), true);
  assert.equal(await counts('reject', 'readiness: { store: false }\n'), false);
  await assert.rejects(
    parseConfigText(`${base.replace('POLICY', 'reject')}readiness:\n  store: sometimes\n`, 'f.yaml'),
    /f\.yaml:4:10: readiness\.store: must be true or false/,
  );
  const flagged = await parseConfigText(`${base.replace('POLICY', 'insurance')}readiness: { store: true }\n`, 'f.yaml', {
    readiness: { upstream: true },
  });
  assert.deepEqual(flagged.readiness, { upstream: true, store: true });
});
