// Conformance of the Envoy rate limit service with a real @grpc/grpc-js client on a real socket: every request and response field, hits_addend, shadow_mode, unlimited, replaces, all-or-nothing descriptors, errors, health, metrics and reloads.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startRls, type RlsFixture } from '../support/rls-harness.js';
import type { Descriptor } from '../support/rls-client.js';
import { sleep } from '../support/harness.js';

// Day windows (aligned to midnight UTC) keep counts from resetting mid-test; the per-test values keep tests apart.
const CONFIG = `
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: user
    value: vip
    rate_limit: { unlimited: true }
  - key: org
    rate_limit: { unit: hour, requests_per_unit: 3, name: org }
    descriptors:
      - key: path
        value: /upload
        rate_limit: { unit: day, requests_per_unit: 2 }
  - key: plan
    value: trial
    shadow_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: region
    rate_limit: { unit: day, requests_per_unit: 100, name: slow }
  - key: region_fast
    detailed_metric: true
    rate_limit:
      unit: day
      requests_per_unit: 1
      name: fast
      replaces: [{ name: slow }]
  - key: bucket
    rate_limit: { unit: minute, requests_per_unit: 2, algorithm: token-bucket }
  - key: zero
    rate_limit: { unit: second, requests_per_unit: 0 }
`;

let f: RlsFixture;
before(async () => {
  f = await startRls(CONFIG);
});
after(async () => {
  await f.stop();
});

const d = (key: string, value: string, extra: Partial<Descriptor> = {}): Descriptor => ({ entries: [{ key, value }], ...extra });

test('every response field: codes, current_limit, limit_remaining, duration_until_reset aligned to the unit; no header fields or metadata by default', async () => {
  const r = await f.client.should('edge', [d('user', 'fields'), d('org', 'fields-org')]);
  assert.equal(r.overall_code, 'OK');
  const [user, org] = r.statuses;
  assert.deepEqual(user!.current_limit, { name: '', requests_per_unit: 5, unit: 'DAY' });
  assert.equal(user!.code, 'OK');
  assert.equal(user!.limit_remaining, 4);
  const nowS = Math.floor(Date.now() / 1000);
  // The window ends at the next midnight UTC, as envoyproxy/ratelimit's: whole seconds, at most a day.
  assert.equal(user!.duration_until_reset!.nanos, 0);
  assert.ok(user!.duration_until_reset!.seconds >= 1 && user!.duration_until_reset!.seconds <= 86_400);
  assert.ok(Math.abs(user!.duration_until_reset!.seconds - (86_400 - (nowS % 86_400))) <= 2);
  assert.deepEqual(org!.current_limit, { name: 'org', requests_per_unit: 3, unit: 'HOUR' });
  assert.equal(org!.limit_remaining, 2);
  assert.ok(org!.duration_until_reset!.seconds <= 3_600);
  // No header fields unless grpc.headers asks (as envoyproxy/ratelimit adds none by default): rls-reference-diffs.test.ts.
  assert.deepEqual(r.response_headers_to_add, []);
  assert.deepEqual(r.request_headers_to_add, []);
  assert.equal(r.dynamic_metadata, null);
});

test('over the limit: OVER_LIMIT with 0 remaining, and overall_code OVER_LIMIT', async () => {
  for (let i = 0; i < 5; i++) assert.equal((await f.client.should('edge', [d('user', 'over')])).overall_code, 'OK');
  const r = await f.client.should('edge', [d('user', 'over')]);
  assert.equal(r.overall_code, 'OVER_LIMIT');
  assert.equal(r.statuses[0]!.code, 'OVER_LIMIT');
  assert.equal(r.statuses[0]!.limit_remaining, 0);
  assert.ok(r.statuses[0]!.duration_until_reset!.seconds >= 1);
});

test('descriptors of one request are one decision: one over refuses the request and the others spend nothing', async () => {
  await f.client.should('edge', [
    d('org', 'aon'),
    {
      entries: [
        { key: 'org', value: 'aon' },
        { key: 'path', value: '/upload' },
      ],
    },
  ]);
  await f.client.should('edge', [
    {
      entries: [
        { key: 'org', value: 'aon' },
        { key: 'path', value: '/upload' },
      ],
    },
  ]);
  // The upload limit (2/day) is spent; the org limit (3/hour) has 2 used.
  const r = await f.client.should('edge', [
    d('org', 'aon'),
    {
      entries: [
        { key: 'org', value: 'aon' },
        { key: 'path', value: '/upload' },
      ],
    },
  ]);
  assert.equal(r.overall_code, 'OVER_LIMIT');
  assert.deepEqual(
    r.statuses.map((s) => [s.code, s.limit_remaining]),
    [
      ['OK', 2],
      ['OVER_LIMIT', 0],
    ],
  );
  // Nothing was spent on the org limit by the refused request.
  const again = await f.client.should('edge', [d('org', 'aon')]);
  assert.equal(again.statuses[0]!.limit_remaining, 1);
});

test('hits_addend: the request-wide one (0 counts 1), a descriptor’s own (0 only checks), and one larger than the limit', async () => {
  assert.equal((await f.client.should('edge', [d('user', 'hits-a')], 0)).statuses[0]!.limit_remaining, 4);
  assert.equal((await f.client.should('edge', [d('user', 'hits-a')], 3)).statuses[0]!.limit_remaining, 1);
  // A descriptor's own addend wins over the request's.
  const own = await f.client.should('edge', [d('user', 'hits-b', { hits_addend: { value: 2 } }), d('user', 'hits-c')], 4);
  assert.deepEqual(
    own.statuses.map((s) => s.limit_remaining),
    [3, 1],
  );
  // 0 on a descriptor: looked at, not counted.
  const check = await f.client.should('edge', [d('user', 'hits-b', { hits_addend: { value: 0 } })]);
  assert.equal(check.statuses[0]!.code, 'OK');
  assert.equal(check.statuses[0]!.limit_remaining, 3);
  assert.equal((await f.client.should('edge', [d('user', 'hits-b')])).statuses[0]!.limit_remaining, 2);
  // More than the limit: over, and nothing counted.
  const big = await f.client.should('edge', [d('user', 'hits-d')], 6);
  assert.equal(big.overall_code, 'OVER_LIMIT');
  assert.equal((await f.client.should('edge', [d('user', 'hits-d')])).statuses[0]!.limit_remaining, 4);
});

test('shadow_mode: decided and counted, answered OK; unlimited: OK with the largest remaining and no limit', async () => {
  assert.equal((await f.client.should('edge', [d('plan', 'trial')])).statuses[0]!.limit_remaining, 0);
  const shadow = await f.client.should('edge', [d('plan', 'trial'), d('user', 'shadow')]);
  assert.equal(shadow.overall_code, 'OK');
  assert.equal(shadow.statuses[0]!.code, 'OK');
  assert.equal(shadow.statuses[0]!.limit_remaining, 0);
  assert.equal(shadow.statuses[0]!.current_limit!.requests_per_unit, 1);
  // The enforced descriptor beside it counted as usual.
  assert.equal(shadow.statuses[1]!.limit_remaining, 4);
  const vip = await f.client.should('edge', [d('user', 'vip')]);
  assert.deepEqual(vip.statuses[0], { code: 'OK', current_limit: null, limit_remaining: 4_294_967_295, duration_until_reset: null });
  const m = await f.metrics();
  assert.ok((m.get('floodgate_rls_decisions_total{domain="edge",descriptor="plan_trial",outcome="shadow_over_limit"}') ?? 0) >= 1);
  assert.ok((m.get('floodgate_rls_decisions_total{domain="edge",descriptor="user_vip",outcome="unlimited"}') ?? 0) >= 1);
});

test('replaces: a named limit is dropped when another descriptor of the request replaces it', async () => {
  const both = await f.client.should('edge', [d('region', 'eu'), d('region_fast', 'eu')]);
  assert.equal(both.statuses[0]!.current_limit, null, 'slow is replaced by fast');
  assert.equal(both.statuses[1]!.current_limit!.name, 'fast');
  const over = await f.client.should('edge', [d('region', 'eu'), d('region_fast', 'eu')]);
  assert.equal(over.overall_code, 'OVER_LIMIT');
  // Alone, the slow limit applies.
  const alone = await f.client.should('edge', [d('region', 'eu')]);
  assert.equal(alone.statuses[0]!.current_limit!.name, 'slow');
  assert.equal(alone.statuses[0]!.limit_remaining, 99);
  // detailed_metric: the full descriptor is the metric's label.
  const m = await f.metrics();
  assert.equal(m.get('floodgate_rls_decisions_total{domain="edge",descriptor="region_fast_eu",outcome="over_limit"}'), 1);
});

test('no limit: unknown domains, keys and depths answer OK without current_limit; a limit Envoy sends is used', async () => {
  const r = await f.client.should('nowhere', [d('user', 'x')]);
  assert.equal(r.overall_code, 'OK');
  assert.deepEqual(r.statuses[0], { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null });
  assert.deepEqual(r.response_headers_to_add, []);
  assert.equal((await f.client.should('edge', [d('unknown', 'x')])).statuses[0]!.current_limit, null);
  const override = { limit: { requests_per_unit: 1, unit: 'DAY' } };
  // In a domain the config does not have, Envoy's own limit applies no more than the config's would (as envoyproxy/ratelimit).
  assert.equal((await f.client.should('nowhere', [d('k', 'override', override)])).statuses[0]!.current_limit, null);
  assert.equal((await f.client.should('edge', [d('k', 'override', override)])).statuses[0]!.limit_remaining, 0);
  const refused = await f.client.should('edge', [d('k', 'override', override)]);
  assert.equal(refused.overall_code, 'OVER_LIMIT');
  assert.deepEqual(refused.statuses[0]!.current_limit, { name: '', requests_per_unit: 1, unit: 'DAY' });
  // requests_per_unit 0 refuses everything, as there.
  assert.equal((await f.client.should('edge', [d('zero', 'z')])).overall_code, 'OVER_LIMIT');
});

test('the algorithm extension: a token bucket refills continuously instead of at the unit boundary', async () => {
  const first = await f.client.should('edge', [d('bucket', 'tb')]);
  assert.equal(first.statuses[0]!.limit_remaining, 1);
  await f.client.should('edge', [d('bucket', 'tb')]);
  const refused = await f.client.should('edge', [d('bucket', 'tb')]);
  assert.equal(refused.overall_code, 'OVER_LIMIT');
  // A bucket of 2 per minute is whole again within a minute, and not at a clock boundary.
  assert.ok(refused.statuses[0]!.duration_until_reset!.seconds <= 60);
});

test('bad requests are answered UNKNOWN, as envoyproxy/ratelimit answers them; a descriptor without entries matches no limit', async () => {
  await assert.rejects(f.client.should('', [d('user', 'x')]), (e: { code?: number }) => e.code === 2);
  await assert.rejects(f.client.should('edge', []), (e: { code?: number }) => e.code === 2);
  await assert.rejects(f.client.should('edge', [{ entries: [{ key: '', value: 'v' }] }]), (e: { code?: number }) => e.code === 2);
  const empty = await f.client.should('edge', [{ entries: [] }]);
  assert.equal(empty.overall_code, 'OK');
  assert.equal(empty.statuses[0]!.current_limit ?? null, null);
  const m = await f.metrics();
  assert.ok((m.get('floodgate_rls_requests_total{code="invalid_request"}') ?? 0) >= 3);
});

test('health: SERVING for the service and for "", NOT_FOUND for another service', async () => {
  assert.equal(await f.client.health(), 'SERVING');
  assert.equal(await f.client.health('envoy.service.ratelimit.v3.RateLimitService'), 'SERVING');
  await assert.rejects(f.client.health('other.Service'), (e: { code?: number }) => e.code === 5);
});

test('reload: a changed file applies (its unchanged limits keep their counts), a broken one is logged and the last good config stays', async () => {
  await f.client.should('edge', [d('user', 'reload')]);
  f.write(`${CONFIG}\n  - key: added\n    rate_limit: { unit: day, requests_per_unit: 9 }\n`);
  await f.rls.reload();
  assert.equal((await f.client.should('edge', [d('added', 'a')])).statuses[0]!.limit_remaining, 8);
  assert.equal((await f.client.should('edge', [d('user', 'reload')])).statuses[0]!.limit_remaining, 3, 'kept its count');
  f.write('domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight }\n');
  await f.rls.reload();
  assert.ok(
    f.logs.some((l) => l.msg === 'rate limit config reload failed; keeping the last good config' && /fortnight/.test(String(l.error))),
  );
  assert.equal((await f.client.should('edge', [d('added', 'a')])).statuses[0]!.limit_remaining, 7);
  // The file watch reloads by itself.
  f.write(`${CONFIG}\n  - key: watched\n    rate_limit: { unit: day, requests_per_unit: 4 }\n`);
  for (let i = 0; i < 100; i++) {
    if ((await f.client.should('edge', [d('watched', 'w')])).statuses[0]!.current_limit !== null) break;
    await sleep(50);
  }
  assert.equal((await f.client.should('edge', [d('watched', 'w')])).statuses[0]!.current_limit?.requests_per_unit, 4);
  const m = await f.metrics();
  assert.ok((m.get('floodgate_config_reloads_total{result="failure"}') ?? 0) >= 1);
});

test('a reload of the gateway config leaves the service counting where it was (its counters belong to no rule)', async () => {
  assert.equal((await f.client.should('edge', [d('user', 'gateway-reload')])).statuses[0]!.limit_remaining, 4);
  f.gateway.apply({ ...f.gateway.current, rules: [] });
  assert.equal((await f.client.should('edge', [d('user', 'gateway-reload')])).statuses[0]!.limit_remaining, 3);
});

test('quota_mode: a quota descriptor over its limit refuses only when every quota descriptor of the request is over, as envoyproxy/ratelimit decides', async () => {
  f.write(
    `${CONFIG}\n  - key: q1\n    quota_mode: true\n    rate_limit: { unit: day, requests_per_unit: 1 }\n  - key: q2\n    quota_mode: true\n    rate_limit: { unit: day, requests_per_unit: 5 }\n`,
  );
  await f.rls.reload();
  try {
    assert.equal((await f.client.should('edge', [d('q1', 'a'), d('q2', 'a')])).overall_code, 'OK');
    const one = await f.client.should('edge', [d('q1', 'a'), d('q2', 'a')]);
    assert.equal(one.statuses[0]!.code, 'OVER_LIMIT', 'the spent quota reports itself');
    assert.equal(one.overall_code, 'OK', 'another quota descriptor still has room');
    assert.equal(one.statuses[1]!.limit_remaining, 3, 'counted on its own');
    assert.equal(
      (await f.client.should('edge', [d('q1', 'a')])).overall_code,
      'OVER_LIMIT',
      'every quota descriptor of this request is over',
    );
  } finally {
    f.write(CONFIG);
    await f.rls.reload();
  }
});
