// Upgrade requests through the gateway against a real node:http upstream that accepts any upgrade: only complete WebSocket handshakes (or listed protocols) are tunnelled, h2c never, and a client leaving before the 101 leaves no upstream socket behind.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { ErrorCode } from '../../../src/core/errors.js';
import { sleep, startGateway } from '../support/harness.js';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/**
 * An upstream as permissive as a careless app: it answers 101 to any upgrade (after `delay101Ms`), then
 * speaks HTTP/1.1 again on the upgraded socket, so every request written into a "tunnel" is served and counted.
 */
interface PermissiveUpstream {
  url: string;
  /** Requests served, by path. */
  served: string[];
  /** Upgraded sockets (and those waiting for their 101) still open. */
  open: Set<Socket>;
  delay101Ms: number;
  close(): Promise<void>;
}

async function startPermissiveUpstream(): Promise<PermissiveUpstream> {
  const served: string[] = [];
  const open = new Set<Socket>();
  const state = { delay101Ms: 0 };
  const server: Server = createServer((req, res) => {
    served.push(req.url ?? '');
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  server.on('upgrade', (req, socket: Socket, head: Buffer) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
    // As WebSocket servers do: the peer closed its side, so the connection is over.
    socket.on('end', () => socket.destroy());
    if (req.url === '/denied') {
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\nWWW-Authenticate: Bearer\r\nConnection: close\r\n\r\ndenied');
      return;
    }
    setTimeout(() => {
      if (socket.destroyed) return;
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${String(req.headers.upgrade)}\r\n\r\n`);
      if (head.length > 0) socket.unshift(head);
      // Hand the socket back to the HTTP server: what follows is parsed as more requests.
      server.emit('connection', socket);
    }, state.delay101Ms);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    served,
    open,
    get delay101Ms() {
      return state.delay101Ms;
    },
    set delay101Ms(ms: number) {
      state.delay101Ms = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Sends an upgrade head; once a 101 comes back, writes `then`. Resolves with everything read until the server closes or `waitMs` passes. */
function upgradeExchange(base: string, head: string, then = '', waitMs = 500): Promise<string> {
  const { port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    let sent = false;
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      if (!sent && data.startsWith('HTTP/1.1 101') && data.includes('\r\n\r\n')) {
        sent = true;
        socket.write(then);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(data));
    socket.write(head);
    setTimeout(() => socket.destroy(), waitMs);
  });
}

let upstream: PermissiveUpstream;
const gateways: Gateway[] = [];
before(async () => {
  upstream = await startPermissiveUpstream();
});
after(async () => {
  await Promise.all(gateways.map((g) => g.shutdown()));
  await upstream.close();
});

async function gateway(yaml: string): Promise<Gateway> {
  const g = await startGateway(`upstream: ${upstream.url}\n${yaml}`);
  gateways.push(g);
  return g;
}

const LIMITED = 'rules: [{ name: api, match: { path: /api/ }, key: ip, policies: ["2/1h"] }]';

describe('gateway: upgrades', () => {
  it('regression: Upgrade: h2c is refused, and requests written after it never reach the upstream uncounted', async () => {
    const g = await gateway(LIMITED);
    upstream.served.length = 0;
    const inside = 'GET /api/secret HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(50);
    const reply = await upgradeExchange(
      g.url,
      'GET /api/secret HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n',
      inside,
    );
    assert.match(reply, /^HTTP\/1.1 403 /);
    // Pipelined right behind the head, the way an attacker would not wait for the answer.
    await upgradeExchange(g.url, `GET /api/secret HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n${inside}`);
    assert.equal(upstream.served.filter((u) => u.startsWith('/api/')).length, 0, 'nothing inside a refused upgrade reached the upstream');
  });

  it('regression: other tokens, two tokens, and incomplete WebSocket handshakes are never tunnelled', async () => {
    const g = await gateway(LIMITED);
    upstream.served.length = 0;
    const ws = `Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n`;
    const variants: Array<[string, RegExp]> = [
      ['GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n', /^HTTP\/1.1 403 /],
      ['GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\n\r\n', /^HTTP\/1.1 400 /],
      [`GET /api/x HTTP/1.1\r\nHost: x\r\n${ws}\r\n`, /^HTTP\/1.1 400 /],
      [`POST /api/x HTTP/1.1\r\nHost: x\r\n${ws}Sec-WebSocket-Key: ${KEY}\r\nContent-Length: 0\r\n\r\n`, /^HTTP\/1.1 400 /],
      [
        `GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ${KEY}\r\n\r\n`,
        /^HTTP\/1.1 400 /,
      ],
    ];
    for (const [head, status] of variants) {
      const reply = await upgradeExchange(
        g.url,
        head + 'GET /api/inside HTTP/1.1\r\nHost: x\r\n\r\n',
        'GET /api/inside HTTP/1.1\r\nHost: x\r\n\r\n',
      );
      assert.match(reply, status, head);
    }
    assert.deepEqual(upstream.served, []);
  });

  it('tunnels a complete WebSocket handshake after counting it; proxy.upgrades lists other protocols, [] turns tunnels off', async () => {
    const g = await gateway(LIMITED);
    const handshake = `GET /api/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
    assert.match(await upgradeExchange(g.url, handshake), /^HTTP\/1.1 101 [^]*RateLimit: "2-per-1h";r=1/);
    const custom = await gateway('proxy: { upgrades: [custom-proto] }\nrules: []');
    assert.match(
      await upgradeExchange(custom.url, 'GET /c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: Custom-Proto\r\n\r\n'),
      /^HTTP\/1.1 101 /,
    );
    assert.match(await upgradeExchange(custom.url, handshake), /^HTTP\/1.1 403 /, 'websocket is not on this list');
    const none = await gateway('proxy: { upgrades: [] }\nrules: []');
    assert.match(await upgradeExchange(none.url, handshake), /^HTTP\/1.1 403 /);
  });

  it("relays the upstream's own refusal of a handshake (401 and its body) rather than a 502", async () => {
    const g = await gateway(LIMITED);
    const reply = await upgradeExchange(
      g.url,
      `GET /denied HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    assert.match(reply, /^HTTP\/1.1 401 Unauthorized\r\n/);
    assert.match(reply, /\r\nWWW-Authenticate: Bearer\r\n/);
    assert.match(reply, /\r\n\r\ndenied$/);
  });

  it('refuses proxy.upgrades: [h2c] in the config', async () => {
    await assert.rejects(parseConfigText('proxy:\n  upgrades: [websocket, h2c]\n', 'up.yaml'), (error: Error & { code?: string }) => {
      assert.equal(error.code, ErrorCode.INVALID_CONFIG);
      assert.match(error.message, /^up\.yaml:2:\d+: proxy\.upgrades: h2c cannot be tunnelled/);
      return true;
    });
  });

  it("regression: clients that leave before the upstream's 101 leave no upstream socket open", async () => {
    const g = await gateway('rules: []');
    // Far longer than the test waits below: the upstream sockets must close because the clients left, not because a 101 came.
    upstream.delay101Ms = 10_000;
    try {
      const handshake = `GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
      const clients: Socket[] = [];
      for (let i = 0; i < 20; i += 1) {
        const socket = connect(Number(new URL(g.url).port), '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(handshake);
        clients.push(socket);
      }
      // Every handshake has reached the upstream, which is still sitting on its 101.
      for (let i = 0; i < 100 && upstream.open.size < 20; i += 1) await sleep(20);
      assert.equal(upstream.open.size, 20);
      // A reset, as a client that vanishes sends: no FIN the gateway could pass on.
      for (const c of clients) c.resetAndDestroy();
      // Nothing may still hold an upstream socket for a client that is gone.
      for (let i = 0; i < 150 && upstream.open.size > 0; i += 1) await sleep(20);
      assert.equal(upstream.open.size, 0, `${upstream.open.size} upstream sockets still open`);
    } finally {
      upstream.delay101Ms = 0;
    }
  });
});
