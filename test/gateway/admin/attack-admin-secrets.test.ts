// Secrets the admin side must not show: the admin token in any log line of a real process at debug level, and a Redis password given in the URL's query (ioredis reads ?password=) on the dashboard's stats or in the logs.
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { serveCli, stopCli, writeTemp } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const TOKEN = 'attack-secret-token-0123456789abcdef';
const PASSWORD = 'redis-secret-in-the-query-0123';

const fixture = redisGatewayFixture();

describe('attack: secrets on the admin side', { timeout: 60_000 }, () => {
  it('regression: a Redis password in the URL query (?password=, read by ioredis) is redacted on /admin/stats and in the logs, as one in user:pass@ is', async () => {
    const config = writeTemp(
      'secret.yaml',
      `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  tokenFile: ${writeTemp('token', TOKEN)}\n` +
        `store: { type: redis, url: "${fixture.redis.url}/0?password=${PASSWORD}&sentinelPassword=${PASSWORD}" }\n` +
        'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies: ["5/1m"]\n',
    );
    const cli = await serveCli(['--config', config, '--log-level', 'debug']);
    try {
      const line = await cli.waitForLog((l) => l.msg === 'floodgate gateway listening');
      const admin = String(line.admin);
      for (let i = 0; i < 7; i += 1) await get(`${cli.url}/x`, { headers: { 'x-api-key': 'k' } });
      const stats = await get(`${admin}/admin/stats`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(stats.status, 200);
      assert.match(
        JSON.parse(stats.body).store.description,
        /^redis redis:\/\/127\.0\.0\.1:\d+\/0\?password=\*\*\*&sentinelPassword=\*\*\*$/,
      );
      assert.ok(!stats.body.includes(PASSWORD), 'the stats show the password');
      const logs = JSON.stringify(cli.logs) + cli.text.join('\n') + cli.stderr();
      assert.ok(!logs.includes(PASSWORD), 'a log line shows the password');
    } finally {
      await stopCli(cli);
    }
  });

  it('holds: the admin token appears in no log line at debug level, whatever the admin requests (right, wrong, in the query)', async () => {
    const config = writeTemp(
      'token.yaml',
      `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  tokenFile: ${writeTemp('token', `${TOKEN}\n`)}\n` +
        'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies: ["1/1m"]\n',
    );
    const cli = await serveCli(['--config', config, '--log-level', 'debug']);
    try {
      const line = await cli.waitForLog((l) => l.msg === 'floodgate gateway listening');
      const admin = String(line.admin);
      const auth = { authorization: `Bearer ${TOKEN}` };
      assert.equal((await get(`${admin}/admin/rules`, { headers: auth })).status, 200);
      assert.equal((await get(`${admin}/admin/rules?token=${TOKEN}`)).status, 401);
      assert.equal((await get(`${admin}/admin/rules`, { headers: { authorization: `Bearer ${TOKEN}x` } })).status, 401);
      assert.equal((await get(`${admin}/admin/stats`, { headers: auth })).status, 200);
      // The proxy port too: a client that sends the admin token there has it forwarded, never logged.
      for (let i = 0; i < 3; i += 1) await get(`${cli.url}/x?token=${TOKEN}`, { headers: { ...auth, 'x-api-key': TOKEN } });
      process.kill(cli.child.pid!, 'SIGHUP');
      await cli.waitForLog((l) => l.msg === 'config applied');
      const logs = JSON.stringify(cli.logs) + cli.text.join('\n') + cli.stderr();
      assert.ok(cli.logs.length > 2);
      assert.ok(!logs.includes(TOKEN.slice(4, -4)), 'a log line shows the token');
    } finally {
      await stopCli(cli);
    }
  });

  it('holds: a token file emptied, shortened or deleted before a reload fails the reload; the API keeps the token it started with, and the new content is not logged', async () => {
    const tokenFile = writeTemp('token', `${TOKEN}\n`);
    const config = writeTemp(
      'reload.yaml',
      `upstream: ${fixture.upstream.url}\nadmin:\n  listen: 127.0.0.1:0\n  tokenFile: ${tokenFile}\nrules: []\n`,
    );
    const cli = await serveCli(['--config', config]);
    try {
      const line = await cli.waitForLog((l) => l.msg === 'floodgate gateway listening');
      const admin = String(line.admin);
      const auth = { authorization: `Bearer ${TOKEN}` };
      // An answer proves the process is past start-up, where it handles SIGHUP (a signal before that ends it).
      assert.equal((await get(`${admin}/admin/rules`, { headers: auth })).status, 200);
      for (const [i, content] of ['', '\n', 'short-secret-x\n', undefined].entries()) {
        if (content === undefined) rmSync(tokenFile);
        else writeFileSync(tokenFile, content);
        process.kill(cli.child.pid!, 'SIGHUP');
        await cli.waitForLog(() => cli.logs.filter((l) => String(l.msg).startsWith('config reload failed')).length > i);
        assert.equal((await get(`${admin}/admin/rules`, { headers: auth })).status, 200, `after ${JSON.stringify(content)}`);
        assert.equal((await get(`${admin}/admin/rules`, { headers: { authorization: 'Bearer ' } })).status, 401);
      }
      assert.ok(!JSON.stringify(cli.logs).includes('short-secret-x'), 'a log line shows the new token');
    } finally {
      assert.equal(await stopCli(cli), 0);
    }
  });
});
