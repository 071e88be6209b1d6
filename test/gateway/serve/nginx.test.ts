// Runs the nginx `auth_request` example of docs/gateway.md with a real nginx in front of the test upstream and a decision-only gateway.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../../support/redis-server.js';
import { runCli, sleep, startUpstream, stopCli, type CliProcess, type Upstream } from '../support/harness.js';

const INSTALL_HINT =
  'nginx (with the auth_request module) was not found; this test runs the docs/gateway.md example with a real nginx. ' +
  'Install it, e.g. `sudo apt-get install -y nginx` on Debian/Ubuntu (then `sudo service nginx stop` if apt started the system service) ' +
  'or `brew install nginx` on macOS.';

/** The nginx binary: on PATH, or in sbin (which a non-root PATH often lacks on Debian). */
function findNginx(): string {
  for (const candidate of ['nginx', '/usr/sbin/nginx', '/usr/local/sbin/nginx']) {
    if (candidate.startsWith('/')) {
      try {
        accessSync(candidate, constants.X_OK);
      } catch {
        continue;
      }
    }
    // `nginx -V` prints the configure flags (on stderr); the example needs auth_request.
    const probe = spawnSync(candidate, ['-V'], { encoding: 'utf8' });
    if (probe.error || probe.status !== 0) continue;
    if (!`${probe.stdout}${probe.stderr}`.includes('--with-http_auth_request_module')) {
      throw new Error(`${candidate} was built without the auth_request module (--with-http_auth_request_module). ${INSTALL_HINT}`);
    }
    return candidate;
  }
  throw new Error(INSTALL_HINT);
}

/** The fenced block of `lang` in the docs' nginx section, so the test runs what the docs show. */
function docsExample(lang: 'yaml' | 'nginx'): string {
  const doc = readFileSync(new URL('../../../docs/gateway.md', import.meta.url), 'utf8');
  const start = doc.indexOf('## Decision endpoint (nginx `auth_request`)');
  assert.ok(start >= 0, 'docs/gateway.md has the section "Decision endpoint (nginx `auth_request`)"');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const match = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(section);
  assert.ok(match, `the nginx section of docs/gateway.md has a \`\`\`${lang} block`);
  return match[1]!;
}

/** Replaces `from` by `to`, insisting it occurs exactly once, so a docs change that moves the addresses fails here instead of testing something else. */
function replaceOnce(text: string, from: string, to: string): string {
  const parts = text.split(from);
  assert.equal(parts.length, 2, `the docs' nginx example contains "${from}" exactly once`);
  return parts.join(to);
}

/** Resolves once something accepts TCP connections on the port, or rejects when nginx has exited or the time is up. */
async function waitForPort(port: number, child: ChildProcess, output: () => string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`nginx exited (${child.exitCode ?? child.signalCode}) before listening on ${port}:\n${output()}`);
    }
    const up = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error(`nginx did not listen on ${port} within ${timeoutMs} ms:\n${output()}`);
    await sleep(25);
  }
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on a fresh connection (no agent), so no keep-alive socket outlives the test. */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('gateway behind a real nginx (auth_request, docs/gateway.md)', () => {
  let dir: string | undefined;
  let upstream: Upstream | undefined;
  let gateway: CliProcess | undefined;
  let nginx: ChildProcess | undefined;
  let nginxOutput = '';
  let base = '';

  before(async () => {
    // Fail (not skip) without nginx: a silently skipped test would prove nothing.
    const binary = findNginx();
    dir = mkdtempSync(join(tmpdir(), 'floodgate-nginx-'));
    upstream = await startUpstream();
    // The docs' floodgate config as written; --listen on the command line wins over its `listen:`, so it takes a free port.
    const configFile = join(dir, 'floodgate.yaml');
    writeFileSync(configFile, docsExample('yaml'));
    // runCli rather than serveCli: `after` gets the process to stop even when it never comes up.
    gateway = runCli(['serve', '--listen', '127.0.0.1:0', '--config', configFile, '--no-watch']);
    const listening = await gateway.waitForLog((line) => line.msg === 'floodgate gateway listening');
    const gatewayHost = new URL(String(listening.url)).host;

    const port = await freePort();
    let site = docsExample('nginx');
    site = replaceOnce(site, 'server 127.0.0.1:3000;', `server 127.0.0.1:${upstream.port};`);
    site = replaceOnce(site, 'server 127.0.0.1:8080;', `server ${gatewayHost};`);
    site = replaceOnce(site, 'listen 80;', `listen 127.0.0.1:${port};`);
    // Everything nginx writes stays in the temp dir, so the test runs without root and leaves nothing behind.
    for (const sub of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, sub));
    const conf = [
      'daemon off;',
      'master_process off;',
      `pid ${join(dir, 'nginx.pid')};`,
      'error_log stderr warn;',
      'events { worker_connections 64; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${join(dir, 'client_body')};`,
      `  proxy_temp_path ${join(dir, 'proxy')};`,
      `  fastcgi_temp_path ${join(dir, 'fastcgi')};`,
      `  uwsgi_temp_path ${join(dir, 'uwsgi')};`,
      `  scgi_temp_path ${join(dir, 'scgi')};`,
      site,
      '}',
      '',
    ].join('\n');
    const confFile = join(dir, 'nginx.conf');
    writeFileSync(confFile, conf);
    // -e stderr: nginx opens its compiled-in error log (/var/log/nginx/error.log) before reading the config otherwise.
    nginx = spawn(binary, ['-p', `${dir}/`, '-e', 'stderr', '-c', confFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      nginxOutput = (nginxOutput + chunk.toString('utf8')).slice(-4000);
    };
    nginx.stdout!.on('data', keep);
    nginx.stderr!.on('data', keep);
    nginx.on('error', (error) => keep(Buffer.from(`spawn error: ${error.message}\n`)));
    await waitForPort(port, nginx, () => `${nginxOutput}\n--- ${confFile} ---\n${conf}`);
    base = `http://127.0.0.1:${port}`;
  });

  after(async () => {
    if (nginx && nginx.exitCode === null && nginx.signalCode === null) {
      const child = nginx;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // SIGQUIT is nginx's graceful shutdown; SIGKILL only if it hangs.
      child.kill('SIGQUIT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    if (gateway) await stopCli(gateway);
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('admits 3 requests per API key with the RateLimit fields, answers the 4th 429 with Retry-After, 401 without a key', async () => {
    const seenBefore = upstream!.seen.length;
    const alice = { 'x-api-key': 'alice' };
    const admitted: Reply[] = [];
    for (let i = 0; i < 3; i += 1) admitted.push(await send(`${base}/items?page=${i}`, { headers: alice }));
    assert.deepEqual(
      admitted.map((r) => r.status),
      [200, 200, 200],
      nginxOutput,
    );
    admitted.forEach((reply, i) => {
      // The answer is the app's (the test upstream echoes the request it got), with the gateway's fields added by nginx.
      const echoed = JSON.parse(reply.body) as { url: string; headers: Record<string, string> };
      assert.equal(echoed.url, `/items?page=${i}`);
      assert.equal(echoed.headers['x-api-key'], 'alice');
      assert.equal(reply.headers['ratelimit-policy'], '"3-per-1m";q=3;w=60');
      assert.match(String(reply.headers.ratelimit), new RegExp(`^"3-per-1m";r=${2 - i};t=\\d+$`));
    });
    assert.equal(upstream!.seen.length, seenBefore + 3);

    const limited = await send(`${base}/items`, { headers: alice });
    assert.equal(limited.status, 429);
    assert.ok(
      Number(limited.headers['retry-after']) >= 1 && Number(limited.headers['retry-after']) <= 60,
      `Retry-After: ${limited.headers['retry-after']}`,
    );
    assert.match(String(limited.headers.ratelimit), /^"3-per-1m";r=0;t=\d+$/);
    assert.equal(limited.headers['ratelimit-policy'], '"3-per-1m";q=3;w=60');
    assert.equal(limited.headers['content-type'], 'application/problem+json');
    assert.deepEqual(JSON.parse(limited.body), { title: 'Too Many Requests', status: 429 });
    assert.equal(upstream!.seen.length, seenBefore + 3, 'the refused request never reaches the app');

    // The gateway's 401 passes through auth_request as is, with its WWW-Authenticate.
    const anonymous = await send(`${base}/items`);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers['www-authenticate'], 'ApiKey header="x-api-key"');
    assert.equal(upstream!.seen.length, seenBefore + 3, 'the request without a key never reaches the app');

    // Another key has its own count; a POST with a body works too (the auth subrequest drops the body, the app gets it).
    const bob = await send(`${base}/items`, {
      method: 'POST',
      headers: { 'x-api-key': 'bob', 'content-type': 'text/plain' },
      body: 'hello',
    });
    assert.equal(bob.status, 200);
    assert.match(String(bob.headers.ratelimit), /^"3-per-1m";r=2;t=\d+$/);
    const echoed = JSON.parse(bob.body) as { method: string; body: string };
    assert.deepEqual([echoed.method, echoed.body], ['POST', 'hello']);
    assert.equal((await send(`${base}/items`, { headers: alice })).status, 429, 'alice is still limited');
  });
});
