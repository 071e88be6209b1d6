// Regression tests for F13: the rate limit service over TLS and mutual TLS, with certificates made by openssl in a temporary directory and a real @grpc/grpc-js client with and without a client certificate; the settings from the config file and the command line.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { parseCommandLine } from '../../../src/gateway/cli/args.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';
import { rlsClient } from '../support/rls-client.js';
import { runCli, writeTemp } from '../support/harness.js';

const CONFIG = 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 5 }\n';

let dir: string;
/** PEM files: a CA, the server's certificate (for 127.0.0.1 and localhost) and key, a client's signed by the CA, and a stranger's self-signed one. */
const files = { ca: '', cert: '', key: '', clientCert: '', clientKey: '', strangerCert: '', strangerKey: '' };

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A key and a certificate signed by the CA (its SAN in `ext`). */
function signed(name: string, cn: string, ext: string): void {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    `${name}.crt`,
    '-extfile',
    `${name}.ext`,
  );
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'floodgate-rls-tls-'));
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test ca');
  signed('server', 'localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  signed('client', 'envoy', 'extendedKeyUsage=clientAuth\n');
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'stranger.key',
    '-out',
    'stranger.crt',
    '-days',
    '2',
    '-subj',
    '/CN=stranger',
  );
  Object.assign(files, {
    ca: join(dir, 'ca.crt'),
    cert: join(dir, 'server.crt'),
    key: join(dir, 'server.key'),
    clientCert: join(dir, 'client.crt'),
    clientKey: join(dir, 'client.key'),
    strangerCert: join(dir, 'stranger.crt'),
    strangerKey: join(dir, 'stranger.key'),
  });
});
after(() => rmSync(dir, { recursive: true, force: true }));

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
  const file = join(dir, 'floodgate.yaml');
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
