// Regression tests: `floodgate check` reads the rate limit service's YAML as serve does (grpc.config, or --rls-config), and `serve --grpc` reports a bad one before any "listening" line.
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { runCli, writeTemp } from '../support/harness.js';

const GOOD = 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 5 }\n';
const BAD = 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 5 }\n';

/** A gateway config whose grpc.config names `rlsName`, beside a good and a bad rate limit file. */
function configWith(rlsName: string): string {
  const file = writeTemp('floodgate.yaml', `grpc:\n  listen: 127.0.0.1:0\n  config: ./${rlsName}\n`);
  writeFileSync(join(dirname(file), 'good.yaml'), GOOD);
  writeFileSync(join(dirname(file), 'bad.yaml'), BAD);
  return file;
}

test('check: a config whose grpc.config YAML makes serve exit 2 is not valid (exit 2, file:line)', async () => {
  const file = configWith('bad.yaml');
  const cli = runCli(['check', '--config', file]);
  assert.equal(await cli.exited, 2);
  assert.match(cli.stderr(), /bad\.yaml:4:\d+: descriptors\[0\]\.rate_limit\.unit: must be one of/);
  const good = runCli(['check', '--config', configWith('good.yaml')]);
  assert.equal(await good.exited, 0);
  assert.match(good.text.join('\n'), /valid; 0 rule\(s\).*rate limit service: edge from .*good\.yaml/);
});

test('check --rls-config: the rate limit YAML named on the command line is the one checked, as serve would read it', async () => {
  const file = configWith('good.yaml');
  const cli = runCli(['check', '--config', file, '--rls-config', join(dirname(file), 'bad.yaml')]);
  assert.equal(await cli.exited, 2);
  assert.match(cli.stderr(), /bad\.yaml:4:\d+:/);
});

test('serve --grpc with a bad rate limit config: exit 2 before any "listening" line', async () => {
  const rls = writeTemp('ratelimit.yaml', BAD);
  const cli = runCli(['serve', '--grpc', '127.0.0.1:0', '--rls-config', rls]);
  assert.equal(await cli.exited, 2);
  assert.match(cli.stderr(), /ratelimit\.yaml:4:\d+:/);
  assert.deepEqual(
    cli.logs.filter((l) => /listening/.test(String(l.msg))).map((l) => l.msg),
    [],
  );
});
