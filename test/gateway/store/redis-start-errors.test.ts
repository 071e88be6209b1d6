// Every bad Redis Cluster or Sentinel input gets its typed error naming the field: in the config file and the flags when they are
// read (floodgate check too, which connects to nothing), and for seeds or sentinels that do not answer, or a master name the
// sentinels do not know, at start, before the gateway listens. Likely mistakes (a redis:// URL as a node, one seed) warn once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ErrorCode } from '../../../src/core/errors.js';
import { WarningCode, forgetWarnings } from '../../../src/core/warnings.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { HELP } from '../../../src/gateway/cli/help.js';
import { freePort, startRedis, startRedisSentinel, type RedisServer, type RedisSentinel } from '../../support/redis-server.js';
import { rejectsConfig } from '../support/config-errors.js';
import { runCli, writeTemp } from '../support/harness.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const UNSET = 'FLOODGATE_TEST_REDIS_PASSWORD_NOT_SET';
const file = (name: string, text: string): string => writeTemp(name, text);
const config = (store: string): string => `upstream: http://127.0.0.1:1\nstore: ${store}\nrules: []\n`;

describe('Redis store sections refused when read, naming the field', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['a node without a numeric port', '{ cluster: { nodes: ["10.0.0.1:six"] } }', /store\.cluster\.nodes: entries need a port/],
    ['an empty node list', '{ cluster: { nodes: [] } }', /store\.cluster\.nodes: must list at least one HOST:PORT/],
    [
      'a node listed twice',
      '{ cluster: { nodes: ["10.0.0.1:7000", "10.0.0.1:7000"] } }',
      /store\.cluster\.nodes: lists 10\.0\.0\.1:7000 twice/,
    ],
    ['an IPv6 address without brackets', '{ cluster: { nodes: ["::1:7000"] } }', /store\.cluster\.nodes: .*in brackets/],
    ['cluster without nodes', '{ cluster: {} }', /store\.cluster: needs nodes/],
    ['an unknown cluster field', '{ cluster: { seeds: [a:1] } }', /store\.cluster\.seeds: unknown field/],
    ['sentinel without a name', '{ sentinel: { sentinels: ["10.0.0.1:26379"] } }', /store\.sentinel: needs name/],
    ['sentinel without sentinels', '{ sentinel: { name: m } }', /store\.sentinel: needs sentinels/],
    [
      'cluster and sentinel both',
      '{ cluster: { nodes: [a:1] }, sentinel: { name: m, sentinels: [a:2] } }',
      /store\.sentinel: and cluster are both set/,
    ],
    ['url and cluster both', '{ url: "redis://a:1", cluster: { nodes: [a:1] } }', /store\.url: and cluster are both set/],
    ['a password in the config text', '{ url: "redis://a:1", password: hunter2 }', /store\.password: is not read from the config file/],
    [
      'a password file that is missing',
      '{ cluster: { nodes: [a:1] }, passwordFile: /nonexistent/redis-pass }',
      /store\.passwordFile: cannot read the Redis password file/,
    ],
    [
      'an environment variable not set',
      `{ cluster: { nodes: [a:1] }, passwordEnv: ${UNSET} }`,
      new RegExp(`store\\.passwordEnv: names ${UNSET}, which is not set`),
    ],
    [
      'both a password file and variable',
      '{ url: "redis://a:1", passwordFile: x, passwordEnv: Y }',
      /store\.passwordEnv: and passwordFile are both set/,
    ],
    [
      'a TLS CA file that is missing',
      '{ cluster: { nodes: [a:1] }, tls: { ca: /nonexistent/ca.pem } }',
      /store\.tls\.ca: cannot read "\/nonexistent\/ca\.pem"/,
    ],
    [
      'a sentinel password file that is missing',
      '{ sentinel: { name: m, sentinels: [a:1], passwordFile: /nonexistent/sp } }',
      /store\.sentinel\.passwordFile: cannot read the sentinel password file/,
    ],
    ['credentials on the memory store', '{ type: memory, passwordFile: x }', /store\.passwordFile: is only used with the Redis store/],
    ['credentials without a server', '{ type: redis, username: floodgate }', /store: has username but no server/],
  ];
  for (const [what, store, where] of cases) it(`${what}`, () => rejectsConfig(config(store), where));

  it('a TLS file that is not PEM, and a client certificate without its key', async () => {
    await rejectsConfig(
      config(`{ cluster: { nodes: [a:1] }, tls: { ca: ${file('ca.txt', 'not pem')} } }`),
      /store\.tls\.ca: .* holds no PEM block/,
    );
    await rejectsConfig(config(`{ cluster: { nodes: [a:1] }, tls: { cert: ${file('c.pem', PEM)} } }`), /store\.tls\.cert: needs key too/);
  });

  it('good sections read their files and variables; the secrets are held, type: redis is implied', async () => {
    process.env.FLOODGATE_TEST_SENTINEL_PASS = 'sentinel-secret';
    try {
      const s = await parseConfigText(
        config(
          `{ sentinel: { name: mymaster, sentinels: ["10.0.0.1", "10.0.0.2:26380", "[::1]:26381"], passwordEnv: FLOODGATE_TEST_SENTINEL_PASS }, username: fg, passwordFile: ${file('p', 'redis-secret\n')}, tls: { ca: ${file('ca.pem', PEM)} }, connectTimeout: 2s }`,
        ),
        'gw.yaml',
      );
      assert.equal(s.store.kind, 'redis');
      const c = s.store.connection!;
      assert.deepEqual(
        {
          topology: c.topology,
          nodes: c.nodes,
          name: c.masterName,
          user: c.username,
          pass: c.password,
          sp: c.sentinelPassword,
          ms: c.connectTimeoutMs,
        },
        {
          topology: 'sentinel',
          nodes: [
            { host: '10.0.0.1', port: 26379 },
            { host: '10.0.0.2', port: 26380 },
            { host: '::1', port: 26381 },
          ],
          name: 'mymaster',
          user: 'fg',
          pass: 'redis-secret',
          sp: 'sentinel-secret',
          ms: 2000,
        },
      );
      assert.equal(c.tls?.ca, PEM);
    } finally {
      delete process.env.FLOODGATE_TEST_SENTINEL_PASS;
    }
  });

  it('a redis:// URL as a node, and a single seed, each warn once saying what was meant', async () => {
    forgetWarnings();
    const seen: Array<{ code: string; message: string }> = [];
    const listen = (w: Error & { code?: string }) => seen.push({ code: w.code ?? '', message: w.message });
    process.on('warning', listen);
    try {
      const s = await parseConfigText(config('{ cluster: { nodes: ["redis://user:pw@10.0.0.1:7000"] } }'), 'gw.yaml');
      assert.deepEqual(s.store.connection?.nodes, [{ host: '10.0.0.1', port: 7000 }]);
      await new Promise((r) => setImmediate(r));
      // Earlier tests' single-node sections may have warned too: only this section's warnings are looked at.
      const codes = seen.filter((w) => w.message.startsWith('store.cluster.nodes lists')).map((w) => w.code);
      assert.ok(codes.includes(WarningCode.ONE_SEED_NODE), JSON.stringify(seen));
      assert.equal(codes.filter((c) => c === WarningCode.REDIS_URL_AS_NODE).length, 1);
      await parseConfigText(config('{ cluster: { nodes: ["redis://10.0.0.1:7000"] } }'), 'gw.yaml');
      await new Promise((r) => setImmediate(r));
      assert.equal(seen.filter((w) => w.code === WarningCode.REDIS_URL_AS_NODE).length, 1, 'once per process');
      assert.match(seen.find((w) => w.code === WarningCode.REDIS_URL_AS_NODE)!.message, /10\.0\.0\.1:7000 was used/);
      assert.ok(!seen.some((w) => w.message.includes('pw@')), 'the URL credentials are not repeated');
    } finally {
      process.off('warning', listen);
    }
  });
});

describe('Redis flags refused when read, naming the flag', () => {
  const refused = (argv: string[], where: RegExp) =>
    assert.throws(
      () => parseCommandLine(['serve', '--upstream', 'http://127.0.0.1:1', '--limit', '1/1m', ...argv]),
      (e: unknown) => (e as { code?: string }).code === ErrorCode.INVALID_ARGUMENT && where.test((e as Error).message),
    );
  const cases: Array<[string, string[], RegExp]> = [
    ['a malformed node list', ['--redis-cluster', '10.0.0.1:7000,,10.0.0.2'], /^--redis-cluster /],
    ['a sentinel spec without a master name', ['--redis-sentinel', '10.0.0.1:26379'], /^--redis-sentinel must be MASTER@HOST:PORT/],
    ['two Redis flags', ['--redis', 'redis://a:1', '--redis-cluster', 'a:1,b:2'], /^--redis and --redis-cluster both name the Redis store/],
    ['credentials without a Redis flag', ['--redis-password-file', '/x'], /^--redis-password-file needs the Redis store/],
    [
      'a password file that is missing',
      ['--redis-cluster', 'a:1,b:2', '--redis-password-file', '/nonexistent/p'],
      /^--redis-password-file cannot read/,
    ],
    ['an environment variable not set', ['--redis-cluster', 'a:1,b:2', '--redis-password-env', UNSET], /^--redis-password-env names/],
    ['a CA file that is missing', ['--redis-sentinel', 'm@a:1,b:2', '--redis-ca', '/nonexistent/ca.pem'], /^--redis-ca cannot read/],
  ];
  for (const [what, argv, where] of cases) it(what, () => refused(argv, where));
});

describe('Redis set-ups that do not answer stop the gateway at start, before it listens', () => {
  let plain: RedisServer;
  let sentinel: RedisSentinel;
  before(async () => {
    [plain, sentinel] = await Promise.all([startRedis(), startRedisSentinel({ replicas: 0, sentinels: 1 })]);
  });
  after(async () => {
    await Promise.all([plain.stop(), sentinel.stop()]);
  });

  /** Runs `floodgate serve --config` on `store`: its exit code and stderr, and whether it ever logged that it listens. */
  async function serveFails(store: string): Promise<{ code: number | string; stderr: string; listened: boolean }> {
    const cli = runCli([
      'serve',
      '--config',
      file('gw.yaml', `upstream: http://127.0.0.1:1\nlisten: 127.0.0.1:0\nstore: ${store}\nrules: []\n`),
    ]);
    const code = await cli.exited;
    return { code, stderr: cli.stderr(), listened: cli.logs.some((l) => l.msg === 'floodgate gateway listening') };
  }

  it('an unreachable seed list, a node not in cluster mode, unreachable sentinels and a wrong master name: FLOODGATE_STORE_UNREACHABLE', async () => {
    const [p1, p2] = [await freePort(), await freePort()];
    const s = sentinel.sentinels[0]!;
    const rows: Array<[string, RegExp]> = [
      [
        `{ cluster: { nodes: ["127.0.0.1:${p1}", "127.0.0.1:${p2}"] }, connectTimeout: 500ms }`,
        /store\.cluster\.nodes: the store Redis Cluster .* did not answer within 500 ms/,
      ],
      [
        `{ cluster: { nodes: ["127.0.0.1:${plain.port}", "127.0.0.1:${p1}"] }, connectTimeout: 1s }`,
        /store\.cluster\.nodes: .*cluster support disabled/i,
      ],
      [
        `{ sentinel: { name: ${sentinel.name}, sentinels: ["127.0.0.1:${p1}", "127.0.0.1:${p2}"] }, connectTimeout: 500ms }`,
        /store\.sentinel\.sentinels: no sentinel of .* answered/,
      ],
      [
        `{ sentinel: { name: no-such-master, sentinels: ["${s.host}:${s.port}"] }, connectTimeout: 1s }`,
        /store\.sentinel\.name: the sentinels .* monitor no master named "no-such-master"/,
      ],
    ];
    const results = await Promise.all(rows.map(([store]) => serveFails(store)));
    for (const [i, r] of results.entries()) {
      assert.equal(r.code, 1, `${rows[i]![0]}: exit 1; stderr: ${r.stderr}`);
      assert.match(r.stderr, rows[i]![1]);
      assert.match(r.stderr, /\[FLOODGATE_STORE_UNREACHABLE\]/);
      assert.equal(r.listened, false, 'never listened');
    }
  });

  it('floodgate check validates the sections without connecting: unreachable nodes pass, a missing TLS file is named (exit 2)', async () => {
    const p = await freePort();
    const ok = runCli([
      'check',
      '--config',
      file('gw.yaml', config(`{ cluster: { nodes: ["127.0.0.1:${p}", "redis://127.0.0.1:${p + 1}"] } }`)),
    ]);
    assert.equal(await ok.exited, 0, ok.stderr());
    assert.match(ok.stderr(), /FLOODGATE_REDIS_URL_AS_NODE/);
    const bad = runCli([
      'check',
      '--config',
      file('gw.yaml', config(`{ cluster: { nodes: ["127.0.0.1:${p}"] }, tls: { ca: ./missing-ca.pem } }`)),
    ]);
    assert.equal(await bad.exited, 2);
    assert.match(bad.stderr(), /store\.tls\.ca: cannot read ".*missing-ca\.pem".*\[FLOODGATE_INVALID_CONFIG\]/);
  });
});

describe('floodgate --help', () => {
  it('explains every Redis flag, each with an example', () => {
    for (const option of [
      '--redis-cluster',
      '--redis-sentinel',
      '--redis-user',
      '--redis-password-file',
      '--redis-password-env',
      '--redis-ca',
    ]) {
      const at = HELP.indexOf(`  ${option} `);
      assert.ok(at >= 0, `${option} is explained`);
      const next = HELP.indexOf('\n  --', at + 1);
      assert.match(HELP.slice(at, next < 0 ? undefined : next), /e\.g\. /, `${option} has an example`);
    }
    assert.match(HELP, /--redis-cert and --redis-key/);
  });
});
