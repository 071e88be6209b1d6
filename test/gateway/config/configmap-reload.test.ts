// Config on a mounted Kubernetes ConfigMap (kubelet's layout, updated by its link swap): `floodgate serve --config` and `--rls-config DIR` apply an update, keep the last good config on a broken one, and ignore other files.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathHops } from '../../../src/gateway/config/link-watch.js';
import { get, statuses } from '../../http/support/http.js';
import { configMapVolume } from '../support/configmap.js';
import { parseMetrics, runCli, serveCli, startUpstream, stopCli, type CliProcess, type Upstream } from '../support/harness.js';
import { rlsClient, type Descriptor } from '../support/rls-client.js';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

const gatewayConfig = (limit: string): string =>
  `upstream: ${upstream.url}\nrules:\n  - name: api\n    key: "header:x-api-key"\n    policies: ["${limit}"]\n`;

/** Waits for the `n`th log line `match` accepts. */
function nth(cli: CliProcess, n: number, match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return cli.waitForLog(() => cli.logs.filter(match).length >= n).then(() => cli.logs.filter(match)[n - 1]!);
}

test('the links a ConfigMap key goes through: its own, ..data, and the file in the timestamped directory', async () => {
  const volume = configMapVolume({ 'rules.yaml': 'rules: []\n' });
  const stamp = volume.current();
  assert.deepEqual(await pathHops(join(volume.dir, 'rules.yaml')), [
    join(volume.dir, 'rules.yaml'),
    join(volume.dir, '..data'),
    join(volume.dir, stamp, 'rules.yaml'),
  ]);
  volume.update({ 'rules.yaml': 'rules: []\n' });
  assert.notEqual(volume.current(), stamp);
  assert.deepEqual((await pathHops(join(volume.dir, 'rules.yaml'))).at(-1), join(volume.dir, volume.current(), 'rules.yaml'));
});

test('floodgate serve --config on a ConfigMap: an update applies, a broken one keeps the last good config, other files change nothing', async () => {
  const volume = configMapVolume({ 'rules.yaml': gatewayConfig('1/1m') });
  const cli = await serveCli(['--config', join(volume.dir, 'rules.yaml')]);
  const h = (k: string) => ({ headers: { 'x-api-key': k } });
  const reloaded = (l: Record<string, unknown>): boolean => l.msg === 'config reloaded' && l.trigger === 'file change';
  const failed = (l: Record<string, unknown>): boolean => l.msg === 'config reload failed; keeping the last good config';
  try {
    assert.deepEqual(await statuses(`${cli.url}/`, 2, h('a')), [200, 429]);

    volume.update({ 'rules.yaml': gatewayConfig('3/1m') });
    await nth(cli, 1, reloaded);
    assert.deepEqual(await statuses(`${cli.url}/`, 4, h('b')), [200, 200, 200, 429]);

    // An update of another key only, and a stray file beside the keys: the gateway's file is as it was.
    volume.update({ 'rules.yaml': gatewayConfig('3/1m'), 'notes.txt': 'unrelated\n' });
    writeFileSync(join(volume.dir, 'stray.yaml'), 'unrelated\n');
    volume.update({ 'rules.yaml': `${gatewayConfig('3/1m')}    shadow: maybe\n` });
    const failure = await nth(cli, 1, failed);
    assert.equal(failure.code, 'FLOODGATE_INVALID_CONFIG');
    assert.match(String(failure.error), /rules\.yaml:6:13: rules\[0\]\.shadow: must be true or false/);
    assert.deepEqual(await statuses(`${cli.url}/`, 4, h('c')), [200, 200, 200, 429], 'the last good config (3/1m) still applies');

    volume.update({ 'rules.yaml': gatewayConfig('2/1m') });
    await nth(cli, 2, reloaded);
    assert.deepEqual(await statuses(`${cli.url}/`, 3, h('d')), [200, 200, 429]);

    const m = parseMetrics((await get(`${cli.url}/_floodgate/metrics`)).body);
    assert.equal(m.get('floodgate_config_reloads_total{result="success"}'), 2);
    assert.equal(m.get('floodgate_config_reloads_total{result="failure"}'), 1);
    assert.equal(cli.logs.filter(reloaded).length, 2, 'one reload per update');
  } finally {
    assert.equal(await stopCli(cli), 0);
  }
});

const rlsConfig = (perDay: number): string =>
  `domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: ${perDay} }\n`;
const user = (value: string): Descriptor => ({ entries: [{ key: 'user', value }] });

test('floodgate serve --grpc --rls-config DIR on a ConfigMap: an update applies (a new key too), a broken one keeps the last good config', async () => {
  const volume = configMapVolume({ 'ratelimit.yaml': rlsConfig(5) });
  const cli = runCli(['serve', '--grpc', '127.0.0.1:0', '--rls-config', volume.dir]);
  const address = String((await cli.waitForLog((l) => l.msg === 'floodgate rls listening')).grpc);
  const client = rlsClient(address);
  const reloaded = (l: Record<string, unknown>): boolean => l.msg === 'rate limit config reloaded' && l.trigger === 'file change';
  const failed = (l: Record<string, unknown>): boolean => l.msg === 'rate limit config reload failed; keeping the last good config';
  const limitOf = async (domain: string, value: string): Promise<number | undefined> =>
    (await client.should(domain, [user(value)])).statuses[0]?.current_limit?.requests_per_unit;
  try {
    assert.equal(await limitOf('api', 'a'), 5);

    volume.update({ 'ratelimit.yaml': rlsConfig(2), 'more.yaml': rlsConfig(7).replace('domain: api', 'domain: more') });
    const line = await nth(cli, 1, reloaded);
    assert.deepEqual(line.domains, ['more', 'api'], 'files in name order');
    assert.equal(await limitOf('api', 'b'), 2);
    assert.equal(await limitOf('more', 'b'), 7);

    volume.update({
      'ratelimit.yaml': 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    });
    const failure = await nth(cli, 1, failed);
    assert.match(String(failure.error), /ratelimit\.yaml:4:\d+: descriptors\[0\]\.rate_limit\.unit: must be one of/);
    assert.equal(await limitOf('api', 'c'), 2, 'the last good config still applies');
    assert.equal(await limitOf('more', 'c'), 7);

    volume.update({ 'ratelimit.yaml': rlsConfig(3) });
    const back = await nth(cli, 2, reloaded);
    assert.deepEqual(back.domains, ['api'], 'the removed key is gone');
    assert.equal(await limitOf('api', 'd'), 3);
    assert.equal(cli.logs.filter(reloaded).length, 2, 'one reload per update');
  } finally {
    client.close();
    assert.equal(await stopCli(cli), 0);
  }
});
