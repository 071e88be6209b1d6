// The gateway's store over TLS with an ACL user: a redis-server that accepts only TLS clients with a certificate signed by its CA
// (certificates made by openssl in a temp dir), reached by `rediss://` with `tls: { ca, cert, key }`, `username` and `passwordEnv`.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { get } from '../../http/support/http.js';
import { freePort, startRedis, type RedisServer } from '../../support/redis-server.js';
import { gatewayFixture, untilReady } from '../support/harness.js';
import { CLIENT_EXTENSIONS, SERVER_EXTENSIONS, TestCertificateAuthority } from '../../support/test-certificates.js';

const PASSWORD = 'tls-user-pass-93b1e6';
let authority: TestCertificateAuthority;
let dir: string;
let redis: RedisServer;
let tlsPort: number;

const fixture = gatewayFixture({
  start: async () => {
    authority = new TestCertificateAuthority('redis-tls');
    dir = authority.dir;
    authority.sign('server', SERVER_EXTENSIONS);
    authority.sign('client', CLIENT_EXTENSIONS);
    tlsPort = await freePort();
    // The plain port stays for the fixture's PING; the gateway is given only the TLS one.
    redis = await startRedis({
      args: [
        '--tls-port',
        String(tlsPort),
        '--tls-cert-file',
        join(dir, 'server.crt'),
        '--tls-key-file',
        join(dir, 'server.key'),
        '--tls-ca-cert-file',
        join(dir, 'ca.crt'),
        '--tls-auth-clients',
        'yes',
        // Each word its own argument: redis-server joins them into the config line `user floodgate on >… ~* &* +@all`.
        '--user',
        'floodgate',
        'on',
        `>${PASSWORD}`,
        '~*',
        '&*',
        '+@all',
      ],
    });
  },
  stop: async () => {
    await redis.stop();
    authority?.close();
  },
});

before(() => {
  process.env.FLOODGATE_TEST_REDIS_TLS_PASSWORD = PASSWORD;
});
after(() => {
  delete process.env.FLOODGATE_TEST_REDIS_TLS_PASSWORD;
});

test('rediss:// with tls: { ca, cert, key }, username and passwordEnv: counted over TLS as the ACL user, the password not described', async () => {
  await fixture.ready();
  const g = await fixture.start(
    `upstream: ${fixture.upstream.url}\nstore:\n  url: rediss://127.0.0.1:${tlsPort}\n  username: floodgate\n  passwordEnv: FLOODGATE_TEST_REDIS_TLS_PASSWORD\n` +
      `  tls: { ca: ${join(dir, 'ca.crt')}, cert: ${join(dir, 'client.crt')}, key: ${join(dir, 'client.key')} }\n` +
      `rules: [{ name: tls, key: "header:x-api-key", policies: ["2/1h"] }]\n`,
  );
  await untilReady(`${g.url}/_floodgate/readyz`, 100);
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await get(`${g.url}/x`, { headers: { 'x-api-key': 'over-tls' } })).status);
  assert.deepEqual(statuses, [200, 200, 429]);
  const plain = new Redis({ port: redis.port });
  try {
    const clients = await plain.client('LIST');
    assert.match(String(clients), /user=floodgate/, 'the gateway is connected as the ACL user');
    assert.ok((await plain.keys('*over-tls*')).length > 0);
  } finally {
    plain.disconnect();
  }
  const description = (g as unknown as { store: { description: string } }).store.description;
  assert.equal(description, `redis rediss://127.0.0.1:${tlsPort} (user floodgate, password ***, tls)`);
});
