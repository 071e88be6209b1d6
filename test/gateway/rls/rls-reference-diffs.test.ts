// The differences from envoyproxy/ratelimit that its own integration tests found, each pinned as a regression test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { RlsServer } from '../../../src/gateway/rls/rls-server.js';
import { writeTemp } from '../support/harness.js';
import { structToJson, type Descriptor, type RlsClient } from '../support/rls-client.js';
import { startRls, type RlsFixture, type RlsOptions } from '../support/rls-harness.js';

// Day windows (aligned to midnight UTC) keep counts from resetting mid-test; every test has its own gateway, so its own counts.
const CONFIG = `
domain: rl
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
    metadata:
      service_with_quota: { name: service_1 }
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 2 }
    metadata:
      service_with_quota: { name: service_2, region: eu }
      tier: [gold, 2, true, null]
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2 }
  - key: org
    rate_limit: { unit: day, requests_per_unit: 100 }
`;

const service = (name: string, hits: number): Descriptor => ({ entries: [{ key: 'service', value: name }], hits_addend: { value: hits } });
const d = (key: string, value: string, hits?: number): Descriptor => ({
  entries: [{ key, value }],
  ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
});

async function withRls(options: RlsOptions, run: (f: RlsFixture) => Promise<void>, config = CONFIG): Promise<void> {
  const f = await startRls(config, 'rules: []\n', undefined, options);
  try {
    await run(f);
  } finally {
    await f.stop();
  }
}

/** envoyproxy/ratelimit's token-quota flow: each request checks with 0 hits, and its response is debited 1 (apply_on_stream_done). */
async function tokenQuotaRequest(c: RlsClient, name: string): Promise<{ code: string; remaining: number }> {
  const r = await c.should('rl', [service(name, 0)]);
  await c.should('rl', [service(name, 1)]);
  return { code: r.overall_code, remaining: r.statuses[0]!.limit_remaining };
}

test('regression: a check-only (hits_addend 0) quota descriptor at exactly its limit was OVER_LIMIT, so token quota admitted one request fewer than envoyproxy/ratelimit; now OK, and over once the debits pass the limit', async () => {
  await withRls({}, async (f) => {
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await tokenQuotaRequest(f.client, 'service_2'));
    // 2 a day: the third request checks at a count of 2 (OK, as there); its debit takes the count to 3, so the fourth is refused.
    assert.deepEqual(answers, [
      { code: 'OK', remaining: 2 },
      { code: 'OK', remaining: 1 },
      { code: 'OK', remaining: 0 },
      { code: 'OVER_LIMIT', remaining: 0 },
    ]);
    // The debit itself is answered as there: over once past the limit (Envoy ignores the answer of a debit on stream done).
    const debit = await f.client.should('rl', [service('service_2', 1)]);
    assert.equal(debit.statuses[0]!.code, 'OVER_LIMIT');
  });
});

test('regression: an enforced check-only descriptor at exactly its limit is OK; past it (counted with countRefused) it is OVER_LIMIT, as there', async () => {
  await withRls({}, async (f) => {
    for (let i = 0; i < 3; i++) await f.client.should('rl', [d('user', 'ana')]);
    // The third was refused and counted nothing: the count is 2, the limit.
    const r = await f.client.should('rl', [d('user', 'ana', 0)]);
    assert.deepEqual([r.overall_code, r.statuses[0]!.code, r.statuses[0]!.limit_remaining], ['OK', 'OK', 0]);
  });
  await withRls({ countRefused: true }, async (f) => {
    for (let i = 0; i < 3; i++) await f.client.should('rl', [d('user', 'ana')]);
    const r = await f.client.should('rl', [d('user', 'ana', 0)]);
    assert.deepEqual([r.overall_code, r.statuses[0]!.code, r.statuses[0]!.limit_remaining], ['OVER_LIMIT', 'OVER_LIMIT', 0]);
  });
});

test('regression: refused requests counted nothing, unlike envoyproxy/ratelimit by default; grpc.countRefused counts every descriptor of a refused request', async () => {
  const refusedTwice = async (f: RlsFixture): Promise<Array<[string, number]>> => {
    for (let i = 0; i < 2; i++) await f.client.should('rl', [d('user', 'bob')]);
    const refused = await f.client.should('rl', [d('org', 'acme'), d('user', 'bob')]);
    assert.equal(refused.overall_code, 'OVER_LIMIT');
    const again = await f.client.should('rl', [d('org', 'acme'), d('user', 'bob')]);
    return again.statuses.map((s) => [s.code, s.limit_remaining]);
  };
  // floodgate's default: the refused requests spent nothing on org.
  await withRls({}, async (f) => {
    assert.deepEqual(await refusedTwice(f), [
      ['OK', 100],
      ['OVER_LIMIT', 0],
    ]);
  });
  // The reference's default: org counted by both refused requests (the one answered here included), user past its limit.
  await withRls({ countRefused: true }, async (f) => {
    assert.deepEqual(await refusedTwice(f), [
      ['OK', 98],
      ['OVER_LIMIT', 0],
    ]);
    // A client that keeps retrying stays over: the count is past the limit, so even a check is refused.
    assert.equal((await f.client.should('rl', [d('user', 'bob', 0)])).overall_code, 'OVER_LIMIT');
  });
});

test('regression: no response dynamic metadata, so Envoy could not route by quota; grpc.dynamicMetadata sets it as envoyproxy/ratelimit does (multiservice token quota)', async () => {
  await withRls({ dynamicMetadata: true }, async (f) => {
    // Each request checks both services with 0 hits; the service named in the metadata serves it and is debited 1.
    const served: string[] = [];
    let first: unknown;
    for (let i = 0; i < 6; i++) {
      const r = await f.client.should('rl', [service('service_1', 0), service('service_2', 0)]);
      const meta = structToJson(r.dynamic_metadata) as { metadata?: { service_with_quota: { name: string } } };
      first ??= meta;
      if (r.overall_code !== 'OK') {
        served.push('429');
        assert.equal(meta.metadata, undefined);
        continue;
      }
      const name = meta.metadata!.service_with_quota.name;
      served.push(name);
      await f.client.should('rl', [service(name, 1)]);
    }
    // service_1 has 1 a day, service_2 2: each serves one more than its limit (a check at the limit passes), then both are over.
    assert.deepEqual(served, ['service_1', 'service_1', 'service_2', 'service_2', 'service_2', '429']);
    // Both passed: the first descriptor's fields win, mappings merge, the second's other fields are added.
    assert.deepEqual(first, {
      domain: 'rl',
      descriptors: [
        { entries: ['service=service_1'], hitsAddend: 0 },
        { entries: ['service=service_2'], hitsAddend: 0 },
      ],
      metadata: { service_with_quota: { name: 'service_1', region: 'eu' }, tier: ['gold', 2, true, null] },
    });
    // The request's hits_addend when not 0, and a limit Envoy sent, as text.
    const r = await f.client.should(
      'rl',
      [{ entries: [{ key: 'org', value: 'x' }], limit: { requests_per_unit: 7, unit: 'HOUR' } }, { entries: [{ key: 'none', value: '' }] }],
      3,
    );
    assert.deepEqual(structToJson(r.dynamic_metadata), {
      domain: 'rl',
      descriptors: [{ entries: ['org=x'], limit: 'requests_per_unit:7 unit:HOUR' }, { entries: ['none='] }],
      hitsAddend: 3,
    });
  });
  await withRls({}, async (f) => {
    const r = await f.client.should('rl', [service('service_1', 0)]);
    assert.equal(r.dynamic_metadata, null);
  });
});

test('regression: response headers were on by default and named limits by their internal domain.key; now off unless grpc.headers, positions unless grpc.exposeLimitNames', async () => {
  const both = [d('user', 'cy'), d('org', 'acme')];
  await withRls({}, async (f) => {
    assert.deepEqual((await f.client.should('rl', both)).response_headers_to_add, []);
  });
  await withRls({ headers: ['ietf'] }, async (f) => {
    const h = new Map((await f.client.should('rl', both)).response_headers_to_add.map((x) => [x.key, x.value]));
    assert.equal(h.get('RateLimit-Policy'), '"d0";q=2;w=86400, "d1";q=100;w=86400');
    assert.match(h.get('RateLimit')!, /^"d0";r=1;t=\d+, "d1";r=99;t=\d+$/);
    assert.doesNotMatch([...h.values()].join(' '), /user|org|rl\./);
  });
  await withRls({ headers: ['ietf'], exposeLimitNames: true }, async (f) => {
    const h = new Map((await f.client.should('rl', both)).response_headers_to_add.map((x) => [x.key, x.value]));
    assert.equal(h.get('RateLimit-Policy'), '"rl.user";q=2;w=86400, "rl.org";q=100;w=86400');
  });
});

test('regression: a bad config at start ended the start; still the default, and grpc.badConfigAtStart: serve answers UNKNOWN until a good config loads, as envoyproxy/ratelimit', async () => {
  const bad = 'domain: rl\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n';
  await assert.rejects(
    startRls(bad),
    (e: Error & { code?: string }) => e.code === 'FLOODGATE_INVALID_CONFIG' && /fortnight/.test(e.message),
  );
  await withRls(
    { badConfigAtStart: 'serve' },
    async (f) => {
      const line = f.logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('rate limit config failed to load'));
      assert.ok(line !== undefined, 'the error is logged');
      assert.match(String(line.error), /fortnight/);
      await assert.rejects(f.client.should('rl', [d('user', 'dee')]), (e: { code: number; details: string }) => {
        assert.equal(e.code, 2); // UNKNOWN
        assert.equal(e.details, 'no rate limit configuration loaded');
        return true;
      });
      assert.equal(await f.client.health(), 'SERVING');
      assert.equal((await f.metrics()).get('floodgate_rls_requests_total{code="no_config"}'), 1);
      f.write(CONFIG);
      await f.rls.reload();
      assert.equal((await f.client.should('rl', [d('user', 'dee')])).statuses[0]!.limit_remaining, 1);
      // floodgate check still refuses the file serve started without.
      await assert.rejects(
        RlsServer.prepare(
          { listen: { host: '127.0.0.1', port: 0 }, config: writeTemp('ratelimit.yaml', bad), badConfigAtStart: 'serve' },
          true,
        ),
        /fortnight/,
      );
    },
    bad,
  );
});

test("grpc.shadowMode and grpc.quotaMode: the reference's SHADOW_MODE (overall always OK) and QUOTA_MODE (every descriptor a quota one)", async () => {
  await withRls({ shadowMode: true }, async (f) => {
    for (let i = 0; i < 2; i++) await f.client.should('rl', [d('user', 'eve')]);
    const r = await f.client.should('rl', [d('user', 'eve')]);
    assert.deepEqual([r.overall_code, r.statuses[0]!.code], ['OK', 'OVER_LIMIT']);
  });
  await withRls({ quotaMode: true }, async (f) => {
    for (let i = 0; i < 2; i++) await f.client.should('rl', [d('user', 'fay'), d('org', 'acme')]);
    // user is over, org has room: OK, and both counted (quota descriptors count on their own).
    const r = await f.client.should('rl', [d('user', 'fay'), d('org', 'acme')]);
    assert.deepEqual([r.overall_code, ...r.statuses.map((s) => `${s.code}:${s.limit_remaining}`)], ['OK', 'OVER_LIMIT:0', 'OK:97']);
    // Alone, user is every quota descriptor of the request: refused.
    assert.equal((await f.client.should('rl', [d('user', 'fay')])).overall_code, 'OVER_LIMIT');
    // A descriptor without a limit counts as one with room, as there.
    assert.equal((await f.client.should('rl', [d('user', 'fay'), d('nothing', 'x')])).overall_code, 'OK');
  });
});

test('grpc options in a config file: each checked at its line', async () => {
  const file = writeTemp('floodgate.yaml', '');
  const settings = await parseConfigText(
    'grpc:\n  listen: 9001\n  config: ./r.yaml\n  countRefused: true\n  headers: draft-7\n  exposeLimitNames: true\n  dynamicMetadata: true\n  quotaMode: true\n  shadowMode: true\n  badConfigAtStart: serve\n',
    file,
  );
  assert.deepEqual(
    {
      countRefused: settings.grpc?.countRefused,
      headers: settings.grpc?.headers,
      exposeLimitNames: settings.grpc?.exposeLimitNames,
      dynamicMetadata: settings.grpc?.dynamicMetadata,
      quotaMode: settings.grpc?.quotaMode,
      shadowMode: settings.grpc?.shadowMode,
      badConfigAtStart: settings.grpc?.badConfigAtStart,
    },
    {
      countRefused: true,
      headers: ['draft-7'],
      exposeLimitNames: true,
      dynamicMetadata: true,
      quotaMode: true,
      shadowMode: true,
      badConfigAtStart: 'serve',
    },
  );
  const fails = async (line: string, pattern: RegExp): Promise<void> => {
    await assert.rejects(parseConfigText(`grpc:\n  listen: 9001\n  config: ./r.yaml\n  ${line}\n`, file), pattern);
  };
  await fails('countRefused: yes please', /:4:\d+: grpc\.countRefused: must be true or false/);
  await fails('badConfigAtStart: ignore', /:4:\d+: grpc\.badConfigAtStart: must be "exit"/);
  await fails('headers: x-ratelimit', /:4:\d+: grpc\.headers: headers must be one of/);
  await fails('server: grpcjs', /:4:\d+: grpc\.server: must be "http2" .* or "grpc-js"/);
  const server = await parseConfigText('grpc:\n  listen: 9001\n  config: ./r.yaml\n  server: grpc-js\n', file);
  assert.equal(server.grpc?.server, 'grpc-js');
  const aged = await parseConfigText(
    'grpc:\n  listen: 9001\n  config: ./r.yaml\n  maxConnectionAge: 30m\n  maxConnectionAgeGrace: 5s\n',
    file,
  );
  assert.deepEqual([aged.grpc?.maxConnectionAgeMs, aged.grpc?.maxConnectionAgeGraceMs], [1_800_000, 5_000]);
  await fails('maxConnectionAgeGrace: 5s', /:4:\d+: grpc\.maxConnectionAgeGrace: needs maxConnectionAge/);
  await fails('maxConnectionAge: soon', /:4:\d+: grpc\.maxConnectionAge: /);
});
