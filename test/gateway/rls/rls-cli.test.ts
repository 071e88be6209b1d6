// How the rate limit service is asked for: --grpc and --rls-config alone or over a config file, the file's grpc section, the refusals, --help, and a bad YAML at start (exit 2, file:line).
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { packagesFor } from '../../../src/gateway/runtime/package-check.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { runCli, writeTemp } from '../support/harness.js';

test('--grpc with --rls-config needs no upstream nor rules; the HTTP listener takes a free port', () => {
  const command = parseCommandLine(['serve', '--grpc', '127.0.0.1:8081', '--rls-config', 'rl/']);
  assert.equal(command.kind, 'serve');
  if (command.kind !== 'serve') return;
  assert.deepEqual(command.settings?.grpc, { listen: { host: '127.0.0.1', port: 8081 }, config: resolve('rl/') });
  assert.equal(command.settings?.upstream, undefined);
  assert.deepEqual(command.settings?.rules, []);
  assert.deepEqual(command.settings?.listen, { host: '127.0.0.1', port: 0 });
  const withRedis = parseCommandLine([
    'serve',
    '--grpc',
    '8081',
    '--rls-config',
    'x.yaml',
    '--redis',
    'redis://127.0.0.1:6379',
    '--local-first',
  ]);
  assert.equal(withRedis.kind === 'serve' && withRedis.settings?.store.localFirst, true);
});

test('--grpc refusals: without --rls-config, with --workers, and with a rule flag but no upstream', () => {
  assert.throws(() => parseCommandLine(['serve', '--grpc', '127.0.0.1:8081']), /--grpc needs --rls-config PATH/);
  assert.throws(() => parseCommandLine(['serve', '--rls-config', 'x.yaml']), /--rls-config needs --grpc/);
  assert.throws(
    () => parseCommandLine(['serve', '--grpc', '8081', '--rls-config', 'x', '--workers', '2']),
    /does not combine with --workers/,
  );
  assert.throws(() => parseCommandLine(['serve', '--grpc', '8081', '--rls-config', 'x', '--limit', '5/1s']), /needs --upstream/);
  assert.throws(() => parseCommandLine(['serve', '--grpc', 'nowhere', '--rls-config', 'x']), /--grpc must be HOST:PORT/);
});

test('the config file: grpc { listen, config } relative to the file, flags over it, no rules needed', async () => {
  const file = writeTemp('floodgate.yaml', 'grpc:\n  listen: 127.0.0.1:9001\n  config: ./ratelimit\n');
  const settings = await parseConfigText('grpc:\n  listen: 127.0.0.1:9001\n  config: ./ratelimit\n', file, {}, { requireRules: true });
  assert.deepEqual(settings.grpc, { listen: { host: '127.0.0.1', port: 9001 }, config: join(dirname(file), 'ratelimit') });
  const flagged = await parseConfigText('grpc: { listen: 9001, config: ./r.yaml }\n', file, {
    grpcOverrides: { listen: { host: '0.0.0.0', port: 7000 } },
  });
  assert.deepEqual(flagged.grpc?.listen, { host: '0.0.0.0', port: 7000 });
  await assert.rejects(parseConfigText('grpc:\n  config: ./r.yaml\n', file), /:2:\d+: grpc: needs listen/);
  await assert.rejects(parseConfigText('grpc:\n  listen: 9001\n  colour: red\n', file), /:3:\d+: grpc\.colour: unknown field/);
  await assert.rejects(parseConfigText('workers: 2\ngrpc: { listen: 9001, config: x }\n', file), /grpc: the rate limit service/);
});

test('--help explains both flags with an example', async () => {
  const cli = runCli(['--help']);
  assert.equal(await cli.exited, 0);
  const help = cli.text.join('\n');
  for (const option of ['--grpc', '--rls-config']) {
    const at = help.indexOf(`  ${option} `);
    assert.ok(at >= 0, `${option} is explained`);
    const next = help.indexOf('\n  --', at + 1);
    assert.match(help.slice(at, next < 0 ? undefined : next), /e\.g\. /);
  }
});

test('a bad rate limit file at start: exit 2 with file:line, nothing left listening', async () => {
  const file = writeTemp(
    'ratelimit.yaml',
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
  );
  const cli = runCli(['serve', '--grpc', '127.0.0.1:0', '--rls-config', file]);
  assert.equal(await cli.exited, 2);
  assert.match(
    cli.stderr(),
    new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:4:\\d+: descriptors\\[0\\]\\.rate_limit\\.unit: must be one of`),
  );
  assert.match(cli.stderr(), /FLOODGATE_INVALID_CONFIG/);
});

test('--grpc needs yaml, and @grpc/grpc-js only on grpc.server: grpc-js, checked with the others before anything starts', () => {
  const names = (uses: Parameters<typeof packagesFor>[0]): string[] => packagesFor(uses).map((p) => p.name);
  assert.deepEqual(names({ config: false, redis: false, grpc: true }), ['undici', 'prom-client', 'pino', 'yaml']);
  assert.deepEqual(names({ config: true, redis: true, grpc: true, grpcJs: true }), [
    'undici',
    'prom-client',
    'pino',
    'yaml',
    'ioredis',
    '@grpc/grpc-js',
  ]);
  assert.deepEqual(names({ config: false, redis: false }), ['undici', 'prom-client', 'pino']);
});
