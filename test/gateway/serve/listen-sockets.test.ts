// proxy.listenSockets: under Node.js 22.12+ a single gateway listens on several SO_REUSEPORT sockets, so a storm of new
// connections is accepted several per loop iteration; proxy.maxConnections holds across them. Real gateways: one under
// Node.js 22 (npm test fetches it, scripts/test-prereqs.mjs) and one under this Node.js 20, which warns and keeps one.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { request, Agent } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { NODE22_BINARY } from '../../../scripts/test-prereqs.mjs';
import { listenSocketCount, reusePortAvailable, AUTO_LISTEN_SOCKETS } from '../../../src/gateway/serve/listen-sockets.js';
import { runCli, serveCli, sleep, startUpstream, stopCli, writeTemp, type Upstream } from '../support/harness.js';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

/** Listening TCP sockets on `port` (IPv4), from /proc/net/tcp: state 0A is LISTEN. */
function listeningSockets(port: number): number {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .filter((line) => {
      const f = line.trim().split(/\s+/);
      return f[1]?.endsWith(`:${hex}`) === true && f[3] === '0A';
    }).length;
}

/** `n` GETs at once, each on a connection of its own opened at the same moment; their statuses. */
async function storm(url: string, n: number): Promise<number[]> {
  const agent = new Agent({ keepAlive: false, maxSockets: n });
  const one = () =>
    new Promise<number>((resolve) => {
      const req = request(`${url}/`, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', () => resolve(0));
      req.end();
    });
  const statuses = await Promise.all(Array.from({ length: n }, one));
  agent.destroy();
  return statuses;
}

/** Opens `n` idle TCP connections to `port`, waits, and says how many the gateway kept open. */
async function idleConnections(port: number, n: number): Promise<{ open: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const closed = new Set<Socket>();
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) => {
          const s = connect(port, '127.0.0.1', () => resolve());
          s.on('error', () => resolve());
          s.on('close', () => closed.add(s));
          sockets.push(s);
        }),
    ),
  );
  await sleep(1000);
  return { open: sockets.filter((s) => !closed.has(s)).length, sockets };
}

const config = (proxy: string) => `upstream: ${upstream.url}\nproxy: ${proxy}\nrules:\n  - name: all\n    policies: ["1000000/1m"]\n`;

describe('proxy.listenSockets', () => {
  it('SO_REUSEPORT exists from Node.js 22.12 and 23.1, on Linux only', () => {
    assert.equal(reusePortAvailable('linux', '20.20.2'), false);
    assert.equal(reusePortAvailable('linux', '22.11.0'), false);
    assert.equal(reusePortAvailable('linux', '22.12.0'), true);
    assert.equal(reusePortAvailable('linux', '23.0.0'), false);
    assert.equal(reusePortAvailable('linux', '23.1.0'), true);
    assert.equal(reusePortAvailable('linux', '24.4.1'), true);
    assert.equal(reusePortAvailable('darwin', '24.4.1'), false);
  });

  it('auto is 4 sockets where available and not under --workers; a number where it cannot apply is 1, with a warning', () => {
    const warnings: string[] = [];
    const warn = (m: string) => warnings.push(m);
    assert.equal(listenSocketCount('auto', false, warn, true), AUTO_LISTEN_SOCKETS);
    assert.equal(listenSocketCount('auto', true, warn, true), 1);
    assert.equal(listenSocketCount('auto', false, warn, false), 1);
    assert.equal(listenSocketCount(1, false, warn, false), 1);
    assert.equal(warnings.length, 0);
    assert.equal(listenSocketCount(8, false, warn, true), 8);
    assert.equal(listenSocketCount(8, true, warn, true), 1);
    assert.match(warnings.at(-1)!, /under --workers/);
    assert.equal(listenSocketCount(8, false, warn, false), 1);
    assert.match(warnings.at(-1)!, /Node\.js 22\.12 or later/);
  });

  it('under Node.js 22: 4 sockets on the port; 200 connections at once are all served; maxConnections 50 holds across the sockets', async () => {
    assert.ok(existsSync(NODE22_BINARY), `a Node.js 22 binary at ${NODE22_BINARY} (npm test fetches it; or set FLOODGATE_TEST_NODE22)`);
    const cli = await serveCli(['--config', writeTemp('floodgate.yaml', config('{ maxConnections: 50 }'))], {}, NODE22_BINARY);
    try {
      const port = Number(new URL(cli.url).port);
      assert.equal(listeningSockets(port), AUTO_LISTEN_SOCKETS);
      // Regression: with every socket bound SO_REUSEPORT, a second gateway on the same port joined the group and took
      // part of the traffic; the port must be free for a group to start.
      const second = runCli(
        ['serve', '--config', writeTemp('floodgate.yaml', config('{}')), '--listen', `127.0.0.1:${port}`],
        {},
        NODE22_BINARY,
      );
      assert.notEqual(await second.exited, 0);
      assert.match(second.stderr(), /port is in use/);
      // 60 idle connections: whichever socket each lands on, exactly 50 stay open.
      const idle = await idleConnections(port, 60);
      assert.equal(idle.open, 50);
      for (const s of idle.sockets) s.destroy();
      await sleep(300);
      const raised = await serveCli(['--config', writeTemp('floodgate.yaml', config('{ maxConnections: 1000 }'))], {}, NODE22_BINARY);
      try {
        const statuses = await storm(raised.url, 200);
        assert.deepEqual(
          statuses.filter((s) => s !== 200),
          [],
        );
      } finally {
        await stopCli(raised);
      }
    } finally {
      await stopCli(cli);
    }
  });

  it('under Node.js 20: listenSockets 4 warns that it needs Node.js 22.12 and listens on one socket', async () => {
    const cli = await serveCli(['--config', writeTemp('floodgate.yaml', config('{ listenSockets: 4 }'))]);
    try {
      const port = Number(new URL(cli.url).port);
      assert.equal(listeningSockets(port), reusePortAvailable() ? 4 : 1);
      if (!reusePortAvailable()) assert.ok(cli.logs.some((l) => l.level === 40 && /Node\.js 22\.12 or later/.test(String(l.msg))));
      assert.deepEqual(
        (await storm(cli.url, 20)).filter((s) => s !== 200),
        [],
      );
    } finally {
      await stopCli(cli);
    }
  });
});
