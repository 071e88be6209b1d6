// The gateway on a real Redis: one quota shared by two gateway instances, local-first answering a hot key synchronously, what each
// failure policy does when Redis is SIGKILLed, and readiness (readiness.store) while Redis is stalled (SIGSTOP) and after it resumes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { get, statuses } from '../../http/support/http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { parseMetrics, readiness, sleep, untilReady } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const fixture = redisGatewayFixture();

async function gateway(store: string, rules: string, logLines?: Array<Record<string, unknown>>): Promise<Gateway> {
  const g = await fixture.start(
    `upstream: ${fixture.upstream.url}\nstore: { type: redis, url: "${fixture.redis.url}", timeout: 200ms ${store} }\n${rules}`,
    {},
    logLines,
  );
  // readyz turns 200 once the Redis client is connected.
  await untilReady(`${g.url}/_floodgate/readyz`);
  return g;
}

describe('gateway on Redis', () => {
  it('shares one quota per API key across two instances (and per IP)', async () => {
    const rules = `rules:
  - { name: keyed, match: { path: /api/ }, key: "header:x-api-key", policies: ["3/1m"], final: true }
  - { name: by-ip, key: ip, policies: ["2/1m"] }`;
    const [a, b] = [await gateway('', rules), await gateway('', rules)];
    const h = { headers: { 'x-api-key': 'shared-key' } };
    const seq = [
      (await get(`${a.url}/api/x`, h)).status,
      (await get(`${b.url}/api/x`, h)).status,
      (await get(`${a.url}/api/x`, h)).status,
      (await get(`${b.url}/api/x`, h)).status,
    ];
    assert.deepEqual(seq, [200, 200, 200, 429]);
    assert.equal((await get(`${b.url}/api/x`, { headers: { 'x-api-key': 'other' } })).status, 200);
    assert.deepEqual([...(await statuses(`${a.url}/home`, 1)), ...(await statuses(`${b.url}/home`, 2))], [200, 200, 429]);
    const m = parseMetrics((await get(`${a.url}/_floodgate/metrics`)).body);
    assert.ok((m.get('floodgate_store_duration_seconds_count{store="redis",result="ok"}') ?? 0) >= 3);
  });

  it('runs on the local-first store (localFirst: true) with the same limits', async () => {
    const rules = 'rules: [{ name: lf, key: "header:x-api-key", policies: ["3/1m"] }]';
    const [a, b] = [await gateway(', localFirst: true', rules), await gateway(', localFirst: true', rules)];
    const h = { headers: { 'x-api-key': 'lf-key' } };
    const seq = [...(await statuses(`${a.url}/`, 2, h)), ...(await statuses(`${b.url}/`, 3, h))];
    assert.deepEqual(seq.filter((s) => s === 200).length, 3, `3 admitted across both instances: ${seq}`);
  });

  it('local-first answers most requests of a hot key synchronously (applyNow through the timed store), not through a store call', async () => {
    const g = await gateway(', localFirst: true', 'rules: [{ name: hot, key: "header:x-api-key", policies: ["100000/1m"] }]');
    const h = { headers: { 'x-api-key': 'hot-key' } };
    const n = 300;
    for (let i = 0; i < n; i += 1) assert.equal((await get(`${g.url}/`, h)).status, 200);
    const m = parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body);
    // Every consume that reaches TimedStore.apply is timed, including those local-first decides from its lease
    // inside apply; only consumes answered by applyNow skip the histogram. Without applyNow forwarded, timed = n.
    const timed = m.get('floodgate_store_duration_seconds_count{store="redis-local-first",result="ok"}') ?? 0;
    const sync = m.get('floodgate_store_sync_answers_total{store="redis-local-first"}') ?? 0;
    assert.equal(timed + sync, n, `every request decided once: timed ${timed}, sync ${sync}`);
    assert.ok(sync >= n * 0.8, `most requests answered synchronously: timed ${timed}, sync ${sync}`);
  });

  it('with readiness.store, readyz turns 503 while a stalled Redis (SIGSTOP) keeps failing calls, and 200 again by itself after SIGCONT', async () => {
    const g = await gateway('', 'readiness: { store: true }\nrules: [{ name: r, key: "header:x-api-key", policies: ["1000/1m"] }]');
    const h = { headers: { 'x-api-key': 'stall' } };
    const readyz = () => readiness(`${g.url}/_floodgate/readyz`);
    const storeOk = async () =>
      parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body).get(
        'floodgate_store_duration_seconds_count{store="redis",result="ok"}',
      ) ?? 0;
    assert.equal((await get(`${g.url}/`, h)).status, 200);
    assert.deepEqual(await readyz(), { status: 200, reason: undefined });

    fixture.redis.pause();
    try {
      // The connection stays up, so the client still reports 'ready'; five timed-out calls (200 ms each) open the breaker.
      assert.deepEqual(await readyz(), { status: 200, reason: undefined }, 'nothing has failed yet');
      assert.deepEqual(
        await Promise.all(Array.from({ length: 5 }, async () => (await get(`${g.url}/`, h)).status)),
        [200, 200, 200, 200, 200],
        'insurance decides',
      );
      assert.deepEqual(await readyz(), { status: 503, reason: 'store failing (circuit breaker open)' });
      // With traffic, the breaker probes once per cooldown (2 s); a probe is the one request that waits for the
      // store timeout. Right after it failed, readiness is still off.
      const started = Date.now();
      for (;;) {
        const t = Date.now();
        assert.equal((await get(`${g.url}/`, h)).status, 200);
        if (Date.now() - t >= 150) break;
        assert.ok(Date.now() - started < 5000, 'a probe went out within the cooldown');
        await sleep(10);
      }
      assert.deepEqual(await readyz(), { status: 503, reason: 'store failing (circuit breaker open)' }, 'the failed probe keeps it open');
    } finally {
      fixture.redis.resume();
    }

    // No traffic at all (a load balancer has taken the instance out): readiness still comes back, once the cooldown passes.
    const resumed = Date.now();
    let ready = await readyz();
    while (ready.status !== 200 && Date.now() - resumed < 5000) {
      await sleep(50);
      ready = await readyz();
    }
    assert.deepEqual(ready, { status: 200, reason: undefined }, `ready again ${Date.now() - resumed} ms after SIGCONT`);
    // And the next request is the probe that gets its answer from Redis, which keeps it ready.
    const before = await storeOk();
    assert.equal((await get(`${g.url}/`, h)).status, 200);
    assert.equal(await storeOk(), before + 1, 'decided by Redis');
    assert.deepEqual(await readyz(), { status: 200, reason: undefined });
  });

  it('falls back per store.onFailure when Redis is SIGKILLed: insurance, fail-open, fail-closed, reject', async () => {
    const rules = 'rules: [{ name: r, key: "header:x-api-key", policies: ["2/1m"] }]';
    // Each logs the outage once (not once per request), whatever decides meanwhile.
    const logs = { insured: [], open: [], closed: [], reject: [] } as Record<string, Array<Record<string, unknown>>>;
    const insured = await gateway(', onFailure: insurance', rules, logs.insured);
    const open = await gateway(', onFailure: fail-open', rules, logs.open);
    const closed = await gateway(', onFailure: fail-closed', rules, logs.closed);
    const reject = await gateway(', onFailure: reject', rules, logs.reject);
    const h = (k: string) => ({ headers: { 'x-api-key': k } });
    assert.equal((await get(`${insured.url}/`, h('before'))).status, 200);

    await fixture.redis.kill();
    try {
      // Insurance: the per-instance memory limiter takes over with the same policy.
      assert.deepEqual(await statuses(`${insured.url}/`, 3, h('during')), [200, 200, 429]);
      assert.deepEqual(await statuses(`${open.url}/`, 3, h('during')), [200, 200, 200]);
      const refused = await get(`${closed.url}/`, h('during'));
      assert.equal(refused.status, 429);
      assert.match(JSON.parse(refused.body).type, /temporary-reduced-capacity/);
      assert.equal((await get(`${reject.url}/`, h('during'))).status, 503);
      assert.equal((await get(`${insured.url}/_floodgate/readyz`)).status, 200, 'ready: its fallback answers (readiness-store.test.ts)');
      for (const [mode, lines] of Object.entries(logs)) {
        assert.equal(lines.filter((l) => l.msg === 'rate-limit store problem').length, 1, `${mode}: ${JSON.stringify(lines)}`);
      }
    } finally {
      await fixture.redis.restart();
    }
  });
});
