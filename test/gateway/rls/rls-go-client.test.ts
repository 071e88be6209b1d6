// The rate limit service called by a Go gRPC client (ghz, on grpc-go) on both transports: every call decided exactly, statuses and the size limit as Go reads them, and TLS with and without a client certificate.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { GHZ_BINARY } from '../../../scripts/test-prereqs.mjs';
import { startRls } from '../support/rls-harness.js';
import { writeTemp } from '../support/harness.js';
import { CLIENT_EXTENSIONS, SERVER_EXTENSIONS, TestCertificateAuthority } from '../../support/test-certificates.js';

const PROTO_DIR = fileURLToPath(new URL('../../../proto', import.meta.url));
const CALL = 'envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit';
const CONFIG = 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 25 }\n';

/** What ghz reports of a run (its JSON format). */
interface GhzReport {
  count: number;
  statusCodeDistribution?: Record<string, number>;
  errorDistribution?: Record<string, number>;
}

/** Runs ghz against `address` with `message`; its report. */
function ghz(address: string, message: unknown, flags: string[] = []): Promise<GhzReport> {
  assert.ok(existsSync(GHZ_BINARY), `ghz at ${GHZ_BINARY} (npm test builds it with Go; or set FLOODGATE_TEST_GHZ)`);
  const args = ['--proto', `${PROTO_DIR}/envoy/service/ratelimit/v3/rls.proto`, '--import-paths', PROTO_DIR, '--call', CALL];
  // From a file: a message over the size limit is longer than a command line may be.
  args.push(
    '--data-file',
    writeTemp('ghz-message.json', JSON.stringify(message)),
    '--format',
    'json',
    '--timeout',
    '5s',
    ...flags,
    address,
  );
  return new Promise((resolve, reject) => {
    const child = spawn(GHZ_BINARY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', () => {
      try {
        resolve(JSON.parse(out) as GhzReport);
      } catch {
        reject(new Error(`ghz printed no report: ${err || out}`));
      }
    });
  });
}

const user = (value: string) => ({ domain: 'edge', descriptors: [{ entries: [{ key: 'user', value }] }] });

for (const server of ['http2', 'grpc-js'] as const) {
  test(`${server}: 200 calls from grpc-go, 16 at a time on 2 connections, are each decided once: 25 OK, 175 OVER_LIMIT`, async () => {
    const f = await startRls(CONFIG, undefined, undefined, { server });
    try {
      const report = await ghz(f.rls.address, user('go'), ['--insecure', '-n', '200', '-c', '16', '--connections', '2']);
      assert.equal(report.count, 200);
      assert.deepEqual(report.statusCodeDistribution, { OK: 200 });
      const m = await f.metrics();
      assert.equal(m.get('floodgate_rls_requests_total{code="ok"}'), 25);
      assert.equal(m.get('floodgate_rls_requests_total{code="over_limit"}'), 175);
    } finally {
      await f.stop();
    }
  });

  test(`${server}: a request over the message-size limit reaches grpc-go as ResourceExhausted, and is never decided`, async () => {
    const f = await startRls(CONFIG, undefined, undefined, { server });
    try {
      const big = { domain: 'edge', descriptors: [{ entries: [{ key: 'user', value: 'x'.repeat(300 * 1024) }] }] };
      const report = await ghz(f.rls.address, big, ['--insecure', '-n', '3', '-c', '1']);
      assert.deepEqual(report.statusCodeDistribution, { ResourceExhausted: 3 });
      assert.equal((await f.metrics()).get('floodgate_rls_requests_total{code="ok"}') ?? 0, 0);
    } finally {
      await f.stop();
    }
  });

  test(`${server}: a request the service cannot read reaches grpc-go as Unknown with the reason`, async () => {
    const f = await startRls(CONFIG, undefined, undefined, { server });
    try {
      const report = await ghz(f.rls.address, { domain: 'edge', descriptors: [{ entries: [{ key: '', value: 'v' }] }] }, [
        '--insecure',
        '-n',
        '2',
        '-c',
        '1',
      ]);
      assert.deepEqual(report.statusCodeDistribution, { Unknown: 2 });
      assert.match(Object.keys(report.errorDistribution ?? {})[0] ?? '', /key must not be empty/);
    } finally {
      await f.stop();
    }
  });
}

let authority: TestCertificateAuthority;
const pem = { ca: '', cert: '', key: '', clientCert: '', clientKey: '' };
before(() => {
  authority = new TestCertificateAuthority('rls-go');
  const server = authority.sign('server', SERVER_EXTENSIONS, 'localhost');
  const client = authority.sign('client', CLIENT_EXTENSIONS, 'envoy');
  Object.assign(pem, { ca: authority.ca, cert: server.cert, key: server.key, clientCert: client.cert, clientKey: client.key });
});
after(() => authority.close());

test('http2 over mutual TLS: grpc-go with a client certificate signed by the CA is answered; without one it is refused in the handshake', async () => {
  const f = await startRls(CONFIG, undefined, { cert: pem.cert, key: pem.key, clientCa: pem.ca }, { server: 'http2' });
  try {
    const tls = ['--cacert', pem.ca, '--cname', 'localhost', '-n', '5', '-c', '1'];
    const signed = await ghz(f.rls.address, user('tls'), [...tls, '--cert', pem.clientCert, '--key', pem.clientKey]);
    assert.deepEqual(signed.statusCodeDistribution, { OK: 5 });
    const anonymous = await ghz(f.rls.address, user('tls'), tls);
    assert.equal(anonymous.statusCodeDistribution?.OK ?? 0, 0);
    assert.equal((await f.metrics()).get('floodgate_rls_requests_total{code="ok"}'), 5);
  } finally {
    await f.stop();
  }
});
