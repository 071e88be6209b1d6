// The floodgate CLI: --help, typed errors for bad flags and bad config files (file:line and field), the exit codes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { ErrorCode, FloodgateError } from '../../../src/core/errors.js';
import { rejectsConfig } from '../support/config-errors.js';
import { runCli, writeTemp } from '../support/harness.js';

const argError = (argv: string[], pattern: RegExp) =>
  assert.throws(
    () => parseCommandLine(argv),
    (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_ARGUMENT && pattern.test(e.message),
  );

describe('floodgate CLI', () => {
  it('--help explains every option with an example, exit 0', async () => {
    const cli = runCli(['--help']);
    assert.equal(await cli.exited, 0);
    const help = cli.text.join('\n');
    for (const option of [
      '--upstream',
      '--listen',
      '--limit',
      '--key',
      '--algorithm',
      '--redis',
      '--local-first',
      '--workers',
      '--lease',
      '--config',
      '--admin',
      '--admin-token-file',
      '--trust-proxy',
      '--on-store-failure',
      '--shadow',
      '--headers',
      '--drain-timeout',
      '--log-level',
      '--block-duration',
      '--burst',
      '--no-watch',
    ]) {
      const at = help.indexOf(`  ${option} `);
      assert.ok(at >= 0, `${option} is explained`);
      const next = help.indexOf('\n  --', at + 1);
      assert.match(help.slice(at, next < 0 ? undefined : next), /e\.g\. /, `${option} has an example`);
    }
  });

  it('rejects bad flags with FLOODGATE_INVALID_ARGUMENT naming the flag', () => {
    argError(['serve', '--upstreem', 'http://x'], /unknown option '--upstreem'/);
    argError(['serve', '--upstream', 'ftp://x', '--limit', '1/1s'], /--upstream must use http:\/\/ or https:\/\//);
    argError(['serve', '--upstream', 'http://x', '--limit', 'ten/1s'], /--limit must be LIMIT\/WINDOW/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5parsecs'], /--limit .*window/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--key', 'session:sid'], /--key must be "ip", "header:NAME"/);
    argError(
      ['serve', '--upstream', 'http://x', '--limit', '3/5s', '--key', 'jwt:sub'],
      /--key jwt:sub counts by a bearer token's claim, which must be verified first.*jwt section/,
    );
    argError(
      ['serve', '--upstream', 'http://x', '--limit', '3/5s', '--key', 'path:{user}'],
      /--key path:\{user\} names a group of a path pattern/,
    );
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--algorithm', 'leaky'], /--algorithm must be one of/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--listen', 'localhost'], /--listen .*no port/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--workers', '-1'], /--workers|unknown option/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--local-first'], /--local-first needs --redis/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--lease', '100ms'], /--lease needs workers ≥ 1/);
    argError(
      ['serve', '--upstream', 'http://x', '--limit', '3/5s', '--workers', '2', '--lease', '2m'],
      /--lease must be a whole number of ms up to 60000/,
    );
    argError(
      ['serve', '--upstream', 'http://x', '--limit', '3/5s', '--workers', '2', '--redis', 'redis://r:6379', '--lease', '100ms'],
      /--lease applies to the embedded store under workers/,
    );
    argError(['serve', '--upstream', 'http://x'], /at least one --limit/);
    argError(['serve', '--limit', '3/5s'], /needs --upstream/);
    argError(['serve', '--config', 'f.yaml', '--limit', '3/5s'], /--limit defines the default rule, but --config/);
    argError(['launch'], /unknown command "launch"/);
    // Digits alone are milliseconds on the command line; 0 is refused as a duration, plainly.
    argError(
      ['serve', '--upstream', 'http://x', '--limit', '3/5s', '--block-duration', '0'],
      /--block-duration must be a positive whole number of milliseconds; got 0/,
    );
    argError(['serve', '--upstream', 'http://x', '--limit', '10/1s', '--burst', '50'], /--burst is a token bucket's: "fixed-window"/);
    argError(
      ['serve', '--upstream', 'http://x', '--limit', '10/1s', '--algorithm', 'token-bucket', '--burst', '2.5'],
      /--burst must be a whole number of at least 1 \(the most tokens the bucket holds\); got "2\.5"/,
    );
    // The flag names the value once: not "--headers headers must…".
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--headers', 'nope'], /--headers must be one of/);
    argError(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--trust-proxy', '10.0.0.0/33'], /--trust-proxy entries must be/);
  });

  it('parses a flag-only command line into one default rule', () => {
    const command = parseCommandLine([
      'serve',
      '--upstream',
      'http://127.0.0.1:3000/base',
      '--limit',
      '3/5s',
      '--limit',
      '100/1d',
      '--key',
      'header:X-API-Key,ip',
      '--redis',
      'redis://r:6379',
      '--workers',
      '2',
    ]);
    assert.equal(command.kind, 'serve');
    const s = command.kind === 'serve' ? command.settings! : undefined!;
    assert.equal(s.upstream!.href, 'http://127.0.0.1:3000/base');
    assert.deepEqual(s.rules[0]!.key, { kind: 'header', header: 'x-api-key', fallbackToIp: true });
    assert.deepEqual(
      s.rules[0]!.policies.map((p) => [p.limit, p.windowMs]),
      [
        [3, 5000],
        [100, 86_400_000],
      ],
    );
    assert.equal(s.store.kind, 'redis');
    const withDrain = parseCommandLine(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--drain-timeout', '2500']);
    assert.equal(withDrain.kind === 'serve' ? withDrain.settings!.drainTimeoutMs : 0, 2500);
    assert.equal(s.workers, 2);
    assert.equal(s.store.leaseMs, 0);
    const leased = parseCommandLine(['serve', '--upstream', 'http://x', '--limit', '3/5s', '--workers', '2', '--lease', '100ms']);
    assert.equal(leased.kind === 'serve' ? leased.settings!.store.leaseMs : -1, 100);
    const bursty = parseCommandLine([
      'serve',
      '--upstream',
      'http://x',
      '--limit',
      '10/1s',
      '--algorithm',
      'token-bucket',
      '--burst',
      '50',
    ]);
    assert.deepEqual(bursty.kind === 'serve' ? bursty.settings!.rules[0]!.policies.map((p) => [p.algorithm, p.limit, p.burst]) : [], [
      ['token-bucket', 10, 50],
    ]);
  });

  it('exits 2 with the message on stderr for a bad flag', async () => {
    const cli = runCli(['serve', '--upstream', 'http://127.0.0.1:1', '--limit', 'x']);
    assert.equal(await cli.exited, 2);
    assert.match(cli.stderr(), /floodgate: --limit must be LIMIT\/WINDOW .*\[FLOODGATE_INVALID_ARGUMENT\]/);
    assert.match(cli.stderr(), /floodgate --help/);
  });
});

describe('config file validation', () => {
  const bad = (yaml: string, code: string, where: RegExp) => rejectsConfig(yaml, where, code);

  it('names the file, line, column and field of each problem', async () => {
    await bad(
      'upstream: http://x\nrules:\n  - name: a\n    policies:\n      - limit: many\n        window: 5s\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:5:16: rules\[0\]\.policies\[0\]\.limit: must be a whole number/,
    );
    await bad(
      'rules:\n  - name: a\n    policies: ["3/5fortnights"]\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:3:16: rules\[0\]\.policies\[0\]: .*window/,
    );
    await bad(
      'upstream: http://x\nrulez: []\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:2:1: rulez: unknown field "rulez"; known fields here: upstream, listen/,
    );
    await bad(
      'rules:\n  - name: a\n    match: { paths: /x }\n    policies: ["1/1s"]\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:3:14: rules\[0\]\.match\.paths: unknown field/,
    );
    await bad(
      'rules:\n  - name: a\n    policies: ["1/1s"]\n  - name: a\n    policies: ["1/1s"]\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:4:11: rules\[1\]\.name: two rules are named "a"/,
    );
    await bad(
      'rules:\n  - name: a\n    key: cookie\n    policies: ["1/1s"]\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:3:10: rules\[0\]\.key: must be "ip"/,
    );
    await bad('store: { type: redis }\n', ErrorCode.INVALID_CONFIG, /store\.url: is required when store\.type is redis/);
    await bad(
      'workers: 2\nstore:\n  lease: 1h\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:3:10: store\.lease: must be a whole number of ms up to 60000/,
    );
    await bad('store:\n  lease: 100ms\n', ErrorCode.INVALID_CONFIG, /store\.lease: needs workers ≥ 1/);
    await bad(
      'workers: 2\nstore: { type: redis, url: "redis://r:6379", lease: 100ms }\n',
      ErrorCode.INVALID_CONFIG,
      /store\.lease: applies to the embedded store under workers/,
    );
    await bad(
      'store:\n  onFailure: maybe\n',
      ErrorCode.INVALID_CONFIG,
      /^gw\.yaml:2:14: store\.onFailure: must be one of insurance, fail-open, fail-closed, reject/,
    );
    await bad(
      'rules:\n  - name: a\n    match: { pathPattern: "([" }\n    policies: ["1/1s"]\n',
      ErrorCode.INVALID_CONFIG,
      /rules\[0\]\.match\.pathPattern: is not a valid regular expression/,
    );
    await bad('rules:\n  - name: a\n    policies: []\n', ErrorCode.INVALID_CONFIG, /rules\[0\]\.policies: must be a non-empty list/);
    // A truncated file must not become a gateway without upstream or rules (a reload would turn the proxy off).
    await bad('', ErrorCode.INVALID_CONFIG, /^gw\.yaml: the config file is empty/);
    await bad('# nothing but a comment\n', ErrorCode.INVALID_CONFIG, /^gw\.yaml: the config file is empty/);
  });

  it('reports YAML syntax errors with the line', async () => {
    await bad('upstream: http://x\nrules:\n  - name: [unclosed\n', ErrorCode.CONFIG_SYNTAX, /^gw\.yaml:\d+:\d+: not valid YAML/);
    await bad('upstream: a\nupstream: b\n', ErrorCode.CONFIG_SYNTAX, /^gw\.yaml:2:1: not valid YAML: Map keys must be unique/);
  });

  it('`floodgate check` exits 0 for a valid file and 2 with file:line for a bad one', async () => {
    const good = writeTemp(
      'good.yaml',
      'upstream: http://127.0.0.1:3000\nrules:\n  - { name: api, key: "header:x-api-key", policies: ["3/5s"] }\n',
    );
    const ok = runCli(['check', '--config', good]);
    assert.equal(await ok.exited, 0);
    assert.match(ok.text.join('\n'), /valid; 1 rule\(s\): api/);
    const badFile = writeTemp(
      'bad.yaml',
      'upstream: http://127.0.0.1:3000\nrules:\n  - name: api\n    policies:\n      - { limit: 0, window: 5s }\n',
    );
    const no = runCli(['check', '--config', badFile]);
    assert.equal(await no.exited, 2);
    assert.match(
      no.stderr(),
      /bad\.yaml:5:18: rules\[0\]\.policies\[0\]\.limit: must be a whole number from 1 .*\[FLOODGATE_INVALID_CONFIG\]/,
    );
    const missing = runCli(['check', '--config', '/nonexistent/floodgate.yaml']);
    assert.equal(await missing.exited, 2);
    assert.match(missing.stderr(), /FLOODGATE_CONFIG_UNREADABLE/);
  });

  it('--redis-tls turns on TLS with the system CAs for a Cluster, as tls: true does in the file', () => {
    const command = parseCommandLine([
      'serve',
      '--upstream',
      'http://127.0.0.1:3000',
      '--limit',
      '5/1m',
      '--redis-cluster',
      '127.0.0.1:7000',
      '--redis-tls',
    ]);
    assert.equal(command.kind, 'serve');
    const connection = command.kind === 'serve' ? command.overrides.storeOverrides?.connection : undefined;
    assert.equal(connection?.topology, 'cluster');
    assert.deepEqual(connection?.tls, { ca: undefined, cert: undefined, key: undefined });
    argError(['serve', '--upstream', 'http://127.0.0.1:3000', '--redis-tls'], /--redis-tls needs the Redis store/);
  });

  it('`floodgate check` reads the store flags as serve does: a file with localFirst passes with --redis-cluster, not without', async () => {
    const file = writeTemp(
      'local-first.yaml',
      'upstream: http://127.0.0.1:3000\nstore: { localFirst: true }\nrules:\n  - { name: api, key: "header:x-api-key", policies: ["3/5s"] }\n',
    );
    const alone = runCli(['check', '--config', file]);
    assert.equal(await alone.exited, 2, 'localFirst needs the Redis store');
    assert.match(alone.stderr(), /store\.localFirst/);
    // check connects to nothing: the nodes need not answer.
    const withCluster = runCli(['check', '--config', file, '--redis-cluster', '127.0.0.1:1,127.0.0.1:2']);
    assert.equal(await withCluster.exited, 0, withCluster.stderr());
    const badPassword = runCli(['check', '--config', file, '--redis-cluster', '127.0.0.1:1', '--redis-password-file', '/nonexistent/pw']);
    assert.equal(await badPassword.exited, 2);
    assert.match(badPassword.stderr(), /--redis-password-file/);
  });
});
