// Regression tests for F13: the rate limit service over TLS and mutual TLS, with certificates made by openssl in a temporary directory and a real @grpc/grpc-js client with and without a client certificate; the settings from the config file and the command line.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';
import { CLIENT_EXTENSIONS, SERVER_EXTENSIONS, TestCertificateAuthority } from '../../support/test-certificates.js';
import { rlsClient } from '../support/rls-client.js';
import { runCli, writeTemp } from '../support/harness.js';

const CONFIG = 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 5 }\n';

let authority: TestCertificateAuthority;
/** PEM files: a CA, the server's certificate (for 127.0.0.1 and localhost) and key, a client's signed by the CA, and a stranger's self-signed one. */
const files = { ca: '', cert: '', key: '', clientCert: '', clientKey: '', strangerCert: '', strangerKey: '' };

before(() => {
  authority = new TestCertificateAuthority('rls-tls');
  const server = authority.sign('server', SERVER_EXTENSIONS, 'localhost');
  const client = authority.sign('client', CLIENT_EXTENSIONS, 'envoy');
  const stranger = authority.selfSigned('stranger');
  Object.assign(files, {
    ca: authority.ca,
    cert: server.cert,
    key: server.key,
    clientCert: client.cert,
    clientKey: client.key,
    strangerCert: stranger.cert,
    strangerKey: stranger.key,
  });
});
after(() => authority.close());

const read = (file: string): Buffer => readFileSync(file);
const tlsClient = (address: string, cert?: string, key?: string) =>
  rlsClient(
    address,
    grpc.credentials.createSsl(read(files.ca), key === undefined ? null : read(key), cert === undefined ? null : read(cert)),
    // The server's certificate names localhost too: TLS servername must not be an address.
    { 'grpc.ssl_target_name_override': 'localhost' },
  );
const call = (client: ReturnType<typeof rlsClient>) => client.should('edge', [{ entries: [{ key: 'user', value: 'u' }] }]);

/** A call that fails: its gRPC status code. */
async function failure(client: ReturnType<typeof rlsClient>): Promise<number | undefined> {
  try {
    await call(client);
    return undefined;
  } catch (error) {
    return (error as { code?: number }).code;
  } finally {
    client.close();
  }
}

test('F13: grpc.tls with cert and key: a TLS client that trusts the CA is answered; a plaintext one is not', async () => {
  let f: RlsFixture | undefined;
  try {
    f = await startRls(CONFIG, undefined, { cert: files.cert, key: files.key });
    assert.equal(await failure(f.client), grpc.status.UNAVAILABLE);
    const ok = tlsClient(f.rls.address);
    assert.equal((await call(ok)).overall_code, 'OK');
    ok.close();
    assert.ok(f.logs.some((l) => l.msg === 'floodgate rls listening' && l.tls === 'tls'));
  } finally {
    await f?.stop();
  }
});

test('F13: mutual TLS (clientCa): only a client with a certificate signed by that CA is answered', async () => {
  let f: RlsFixture | undefined;
  try {
    f = await startRls(CONFIG, undefined, { cert: files.cert, key: files.key, clientCa: files.ca });
    // In plaintext, without a certificate, with a stranger's: refused in the handshake, nothing counted.
    assert.equal(await failure(f.client), grpc.status.UNAVAILABLE);
    const ok = tlsClient(f.rls.address, files.clientCert, files.clientKey);
    const answer = await call(ok);
    assert.equal(answer.overall_code, 'OK');
    assert.equal(answer.statuses[0]!.limit_remaining, 4);
    ok.close();
    assert.equal(await failure(tlsClient(f.rls.address)), grpc.status.UNAVAILABLE);
    assert.equal(await failure(tlsClient(f.rls.address, files.strangerCert, files.strangerKey)), grpc.status.UNAVAILABLE);
    const again = tlsClient(f.rls.address, files.clientCert, files.clientKey);
    assert.equal((await call(again)).statuses[0]!.limit_remaining, 3);
    again.close();
  } finally {
    await f?.stop();
  }
});

test('F13: grpc.tls in the config file (paths relative to it) and --grpc-cert/--grpc-key/--grpc-client-ca on the command line', async () => {
  const file = join(authority.dir, 'floodgate.yaml');
  const text =
    'grpc:\n  listen: 127.0.0.1:9001\n  config: ./r.yaml\n  tls: { cert: ./server.crt, key: ./server.key, clientCa: ./ca.crt }\n';
  const settings = await parseConfigText(text, file, {});
  assert.deepEqual(settings.grpc?.tls, { cert: files.cert, key: files.key, clientCa: files.ca });
  await assert.rejects(parseConfigText('grpc: { listen: 9001, config: r.yaml, tls: { cert: a.crt } }\n', file), /grpc\.tls: needs key/);
  await assert.rejects(
    parseConfigText('grpc: { listen: 9001, config: r.yaml, tls: { key: a.key, ca: x } }\n', file),
    /grpc\.tls\.ca: unknown field/,
  );
  const command = parseCommandLine([
    'serve',
    '--grpc',
    '9001',
    '--rls-config',
    'r.yaml',
    '--grpc-cert',
    files.cert,
    '--grpc-key',
    files.key,
    '--grpc-client-ca',
    files.ca,
  ]);
  assert.deepEqual(command.kind === 'serve' && command.settings?.grpc?.tls, { cert: files.cert, key: files.key, clientCa: files.ca });
  assert.throws(
    () => parseCommandLine(['serve', '--grpc', '9001', '--rls-config', 'r.yaml', '--grpc-cert', files.cert]),
    /--grpc-cert needs --grpc-key/,
  );
  // The file's tls, with one field from a flag.
  const flagged = await parseConfigText(text, file, { grpcOverrides: { tls: { key: '/elsewhere.key' } as never } });
  assert.equal(flagged.grpc?.tls?.key, '/elsewhere.key');
  assert.equal(flagged.grpc?.tls?.cert, files.cert);
});

test('F13: a certificate that cannot be used stops serve before anything listens (exit 2, the file named)', async () => {
  const rls = writeTemp('ratelimit.yaml', CONFIG);
  const cli = runCli(['serve', '--grpc', '127.0.0.1:0', '--rls-config', rls, '--grpc-cert', files.key, '--grpc-key', files.cert]);
  assert.equal(await cli.exited, 2);
  assert.match(cli.stderr(), /grpc\.tls: the certificate, key or client CA is not usable PEM/);
  assert.equal(cli.logs.filter((l) => /listening/.test(String(l.msg))).length, 0);
});
