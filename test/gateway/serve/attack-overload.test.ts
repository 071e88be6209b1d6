// The overload gate under attack: a client that wants a higher class, more than its tenant's share, or to shrink the limit
// for everyone (hang-ups at every point, trickled bodies, upgrades, refused requests, reloads), through a real gateway and upstream.
import assert from 'node:assert/strict';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { overloadSettings } from '../../../src/gateway/config/overload-config.js';
import { readYaml } from '../../../src/gateway/config/yaml-cursor.js';
import { FairQueue, type FairEntry } from '../../../src/waiting/fair-queue.js';
import { ErrorCode } from '../../../src/core/errors.js';
import { OverloadLimiter, type OverloadSlot } from '../../../src/index.js';
import { mulberry32 } from '../../accuracy/traffic.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get, leaveAfter } from '../../http/support/http.js';
import { parseMetrics, sleep, startGateway } from '../support/harness.js';
import { requestBytes, sendRaw } from '../support/raw.js';

/** What the upstream saw of one request. */
interface Seen {
  readonly id: string;
  readonly path: string;
  readonly method: string;
  readonly forwardedHost: string | undefined;
  readonly headers: IncomingHttpHeaders;
}

/**
 * An upstream that answers `?ms=N` after N ms (503 for `/busy`), `/stream` with its head at once and its body after N ms,
 * `/big` with 16 MB, `/limited` with 413 once 4 KB of the body came (as a body-size limit does, before the body ends), and
 * WebSocket upgrades with 101; it records what reached it and how many requests ran at once.
 */
class Upstream {
  url = '';
  server!: Server;
  seen: Seen[] = [];
  now = 0;
  most = 0;
  tunnels = 0;
  readonly sockets = new Set<Socket>();

  ids(): string[] {
    return this.seen.map((s) => s.id);
  }
}

async function startUpstream(): Promise<Upstream> {
  const up = new Upstream();
  up.server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    up.seen.push({
      id: url.searchParams.get('id') ?? '-',
      path: url.pathname,
      method: req.method ?? '',
      forwardedHost: req.headers['x-forwarded-host'] as string | undefined,
      headers: req.headers,
    });
    up.now += 1;
    up.most = Math.max(up.most, up.now);
    let done = false;
    const end = (): void => {
      if (!done) up.now -= 1;
      done = true;
    };
    res.on('close', end);
    const ms = Number(url.searchParams.get('ms') ?? 0);
    if (url.pathname === '/limited') {
      let got = 0;
      req.on('data', (chunk: Buffer) => {
        got += chunk.length;
        if (got >= 4096 && !res.headersSent) {
          res.writeHead(413, { connection: 'close' });
          res.end('too large');
        }
      });
      return;
    }
    req.resume();
    if (url.pathname === '/stream') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('start\n');
      setTimeout(() => res.end('done\n'), ms);
      return;
    }
    if (url.pathname === '/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let left = 256;
      const chunk = Buffer.alloc(64 * 1024, 120);
      const pump = (): void => {
        while (left > 0) {
          left -= 1;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
      return;
    }
    const answer = (): void => {
      if (done) return;
      res.writeHead(url.pathname === '/busy' ? 503 : 200, { 'content-type': 'text/plain' });
      res.end('ok');
    };
    // The answer waits for the whole body, as most handlers do.
    if (req.readableEnded) setTimeout(answer, ms);
    else req.on('end', () => setTimeout(answer, ms));
  });
  up.server.on('upgrade', (_req, socket: Socket) => {
    up.tunnels += 1;
    socket.on('error', () => undefined);
    socket.on('close', () => (up.tunnels -= 1));
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
  });
  up.server.on('connection', (socket: Socket) => {
    up.sockets.add(socket);
    socket.on('close', () => up.sockets.delete(socket));
  });
  await new Promise<void>((resolve) => up.server.listen(0, '127.0.0.1', resolve));
  up.url = `http://127.0.0.1:${(up.server.address() as AddressInfo).port}`;
  return up;
}

/** The gateways a suite starts one after another: each start stops the one before, and {@link stop} the last. */
function gateways(): { start(yaml: string): Promise<Gateway>; stop(): Promise<void> } {
  let current: Gateway | undefined;
  const stop = async (): Promise<void> => {
    const gw = current;
    current = undefined;
    await gw?.shutdown();
  };
  return {
    async start(yaml) {
      await stop();
      current = await startGateway(yaml);
      return current;
    },
    stop,
  };
}

/** Stops an upstream, cutting the connections pools of stopped gateways may still keep open. */
async function stopUpstream(up: Upstream): Promise<void> {
  up.server.closeAllConnections();
  for (const s of up.sockets) s.destroy();
  await new Promise((r) => up.server.close(r));
}

async function metricsOf(gw: Gateway): Promise<Map<string, number>> {
  return parseMetrics((await get(`${gw.url}/_floodgate/metrics`)).body);
}

/** Requests each class admitted so far (at once or after a wait). */
async function admittedByClass(gw: Gateway): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [name, v] of await metricsOf(gw)) {
    const m = /^floodgate_overload_decisions_total\{priority="([^"]+)",outcome="(admitted|waited)"\}$/.exec(name);
    if (m !== null) out.set(m[1]!, (out.get(m[1]!) ?? 0) + v);
  }
  return out;
}

/** Sends `bytes` as they are and says which class admitted the request (`none` when the gate never saw it) and its status. */
async function classOf(gw: Gateway, bytes: string): Promise<{ cls: string; status: number | undefined }> {
  const before = await admittedByClass(gw);
  const reply = await sendRaw(gw.url, bytes);
  const after = await admittedByClass(gw);
  const rose = [...after].filter(([name, n]) => n > (before.get(name) ?? 0)).map(([name]) => name);
  assert.ok(rose.length <= 1, `more than one class admitted: ${rose.join(', ')}`);
  return { cls: rose[0] ?? 'none', status: reply.statuses[0] };
}

/** Nothing held or waiting at the gate, and a next request is admitted at once. */
async function assertSettled(gw: Gateway, what: string): Promise<void> {
  let m = await metricsOf(gw);
  // A hang-up is seen by the gateway a moment after the client's close.
  for (let i = 0; i < 40 && m.get('floodgate_overload_in_flight') !== 0; i++) {
    await sleep(25);
    m = await metricsOf(gw);
  }
  assert.equal(m.get('floodgate_overload_in_flight'), 0, `${what}: a slot is still held`);
  for (const [name, v] of m) if (name.startsWith('floodgate_overload_queued{')) assert.equal(v, 0, `${what}: ${name}`);
  const next = await get(`${gw.url}/?id=next`, { timeoutMs: 2000 });
  assert.equal(next.status, 200, `${what}: the next request was not admitted`);
}

const limitOf = async (gw: Gateway): Promise<number> => (await metricsOf(gw)).get('floodgate_overload_limit')!;

/** An adaptive gate whose limit moves after every request (one-request windows), so any sample a client can forge shows. */
/** Overload signals (errors, drops) the gateway's gate has counted. */
const overloadsOf = (gw: unknown): number =>
  (gw as { proxy: { gate: { limiter: { stats(): { overloads: number } } } } }).proxy.gate.limiter.stats().overloads;

const QUICK_ADAPTIVE =
  '  adaptive: { initialLimit: 20, maxLimit: 40, probeSamples: 1, sampleWindow: 1ms, minSamples: 1, probeInterval: 1h }\n';

/** Sends the head of a request with a `total`-byte body, then `sent` bytes of it; the socket is returned open. */
function startUpload(gw: Gateway, path: string, total: number, sent: number): Promise<Socket> {
  const { port } = new URL(gw.url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${total}\r\nContent-Type: application/octet-stream\r\n\r\n`);
      if (sent > 0) socket.write(Buffer.alloc(sent, 120));
      resolve(socket);
    });
    socket.on('error', () => undefined);
    socket.resume();
  });
}

const closed = (socket: Socket): Promise<void> =>
  new Promise((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));

describe('overload attack: claiming a higher class, escaping a lower one', () => {
  let up: Upstream;
  let gw: Gateway;
  before(async () => {
    up = await startUpstream();
    gw = await startGateway(`upstream: ${up.url}
rules: []
overload:
  limit: 50
  priorities:
    - { name: critical, match: { path: /checkout } }
    - { name: vip, match: { host: vip.example.com } }
    - { name: flagged, match: { headers: { x-class: gold } } }
    - { name: default }
    - { name: sheddable, match: { path: /batch } }
`);
  });
  after(async () => {
    await gw?.shutdown();
    await stopUpstream(up);
  });

  it('a path dressed up (case, escapes, //, /./, .., trailing slash) is classed as the canonical path the upstream is sent', async () => {
    const cases: Array<[string, string]> = [
      ['/CHECKOUT', 'critical'],
      ['/%63heckout', 'critical'],
      ['//checkout', 'critical'],
      ['/./checkout', 'critical'],
      ['/x/../checkout', 'critical'],
      ['/checkout/', 'critical'],
      ['/search/..%2Fcheckout', 'none'],
      ['/BATCH', 'sheddable'],
      ['/%62atch', 'sheddable'],
      ['//batch', 'sheddable'],
      ['/./batch/', 'sheddable'],
      ['/x/../batch', 'sheddable'],
      ['/%2562atch', 'none'],
    ];
    for (const [target, cls] of cases) {
      up.seen = [];
      const got = await classOf(gw, requestBytes(`GET ${target} HTTP/1.1`));
      assert.equal(got.cls, cls, target);
      // Whatever the class, the upstream serves the path the class was chosen by.
      if (cls === 'critical') assert.match(up.seen[0]!.path, /^\/checkout\/?$/i, target);
      if (cls === 'sheddable') assert.match(up.seen[0]!.path, /^\/batch\/?$/i, target);
      if (cls === 'none') assert.equal(got.status, 400, target);
    }
  });

  it('a query, a fragment or ; parameters do not move a request into or out of a class', async () => {
    assert.equal((await classOf(gw, requestBytes('GET /search?/checkout HTTP/1.1'))).cls, 'default');
    assert.equal((await classOf(gw, requestBytes('GET /search?x=1&path=/checkout HTTP/1.1'))).cls, 'default');
    assert.equal((await classOf(gw, requestBytes('GET /batch?/checkout HTTP/1.1'))).cls, 'sheddable');
    // A fragment and `;` parameters are refused (paths.semicolons: reject by default) before any class is chosen.
    assert.deepEqual(await classOf(gw, requestBytes('GET /batch#/checkout HTTP/1.1')), { cls: 'none', status: 400 });
    assert.deepEqual(await classOf(gw, requestBytes('GET /batch;/checkout HTTP/1.1')), { cls: 'none', status: 400 });
    assert.deepEqual(await classOf(gw, requestBytes('GET /checkout;x HTTP/1.1')), { cls: 'none', status: 400 });
  });

  it('HEAD is classed as GET, and a method-override header changes no class', async () => {
    up.seen = [];
    assert.equal((await classOf(gw, requestBytes('HEAD /batch HTTP/1.1'))).cls, 'sheddable');
    assert.equal(
      (await classOf(gw, requestBytes('POST /batch HTTP/1.1', ['Content-Length: 0', 'X-HTTP-Method-Override: GET']))).cls,
      'sheddable',
    );
    assert.equal(
      (await classOf(gw, requestBytes('GET /x HTTP/1.1', ['X-HTTP-Method-Override: POST', 'X-Original-URL: /checkout']))).cls,
      'default',
    );
    // The upstream never hears of the override: it serves the method and path the class was chosen by.
    assert.deepEqual(
      up.seen.map((seen) => `${seen.method} ${seen.path}`),
      ['HEAD /batch', 'POST /batch', 'GET /x'],
    );
    for (const seen of up.seen.slice(-2)) {
      assert.equal(seen.headers['x-http-method-override'], undefined);
      assert.equal(seen.headers['x-original-url'], undefined);
    }
  });

  it('an absolute-form target is classed by its own path and authority, which replace the Host header', async () => {
    up.seen = [];
    assert.equal((await classOf(gw, requestBytes('GET http://api.example.com/batch HTTP/1.1'))).cls, 'sheddable');
    assert.equal((await classOf(gw, requestBytes('GET http://api.example.com//checkout HTTP/1.1'))).cls, 'critical');
    // The Host header says vip, the target says otherwise: the target wins, for the class and for the upstream.
    assert.equal((await classOf(gw, requestBytes('GET http://api.example.com/x HTTP/1.1', [], 'vip.example.com'))).cls, 'default');
    assert.equal(up.seen.at(-1)!.forwardedHost, 'api.example.com');
    assert.equal((await classOf(gw, requestBytes('GET http://vip.example.com/x HTTP/1.1', [], 'api.example.com'))).cls, 'vip');
    assert.equal(up.seen.at(-1)!.forwardedHost, 'vip.example.com');
  });

  it('a Host header dressed up (case, trailing dot, port) is classed as its host; of two Host headers the first classes and is forwarded', async () => {
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', [], 'VIP.Example.COM.'))).cls, 'vip');
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', [], 'vip.example.com:8443'))).cls, 'vip');
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', [], 'vip.example.com.evil.test'))).cls, 'default');
    // Node keeps the first Host and drops the rest; the upstream is told the same one (X-Forwarded-Host), so class and service agree.
    up.seen = [];
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', ['Host: vip.example.com'], 'api.example.com'))).cls, 'default');
    assert.equal(up.seen.at(-1)!.forwardedHost, 'api.example.com');
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', ['Host: api.example.com'], 'vip.example.com'))).cls, 'vip');
    assert.equal(up.seen.at(-1)!.forwardedHost, 'vip.example.com');
  });

  it('a class header sent twice, or with another case of its value, is not the class header', async () => {
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', ['X-Class: gold']))).cls, 'flagged');
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', ['X-Class: gold', 'X-Class: gold']))).cls, 'default');
    assert.equal((await classOf(gw, requestBytes('GET /x HTTP/1.1', ['X-Class: GOLD']))).cls, 'default');
  });
});

describe('overload attack: more than a tenant’s share', () => {
  let up: Upstream;
  const gws = gateways();
  before(async () => {
    up = await startUpstream();
  });
  after(async () => {
    await gws.stop();
    await stopUpstream(up);
  });

  it('a flood of new tenant values holds at most maxQueue waiters, and every line goes when its waiters do', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\nproxy: { connections: 64 }\noverload:\n  limit: 1\n  tenant: header:x-tenant\n  queue: { timeout: 300ms, maxQueue: 20 }\n`,
    );
    const first = get(`${gw.url}/?ms=200&id=first`);
    await sleep(30);
    const flood = Array.from({ length: 200 }, (_, i) => get(`${gw.url}/?id=f${i}`, { headers: { 'x-tenant': `t${i}` } }));
    await sleep(100);
    const m = await metricsOf(gw);
    assert.equal(m.get('floodgate_overload_queued{priority="default"}'), 20);
    const replies = await Promise.all([first, ...flood]);
    const full = replies.filter((r) => r.headers['floodgate-overload'] === 'full').length;
    assert.ok(full >= 180, `refused as full: ${full}`);
    assert.ok(replies.every((r) => r.status === 200 || r.status === 503));
    await assertSettled(gw, 'after the tenant flood');
  });

  it('a noisy tenant that filled the queue is shed for a quiet tenant’s first request', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  tenant: header:x-tenant\n  queue: { timeout: 3s, maxQueue: 4 }\n`,
    );
    up.seen = [];
    const first = get(`${gw.url}/?ms=200&id=first`);
    await sleep(30);
    const noisy = [0, 1, 2, 3].map((i) => get(`${gw.url}/?ms=5&id=n${i}`, { headers: { 'x-tenant': 'noisy' } }));
    await sleep(30);
    const quiet = get(`${gw.url}/?ms=5&id=q`, { headers: { 'x-tenant': 'quiet' } });
    const replies = await Promise.all([first, quiet, ...noisy]);
    assert.equal(replies[1]!.status, 200);
    assert.equal(replies[5]!.headers['floodgate-overload'], 'shed');
    assert.deepEqual(up.ids(), ['first', 'n0', 'q', 'n1', 'n2']);
  });

  it('tenant values in another case are other tenants; whitespace around a value and a missing header are not', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  tenant: header:x-tenant\n  queue: { timeout: 3s }\n`,
    );
    // One line per tenant served in turn: the order at the upstream tells who shares a line.
    const order = async (tenants: Array<string | undefined>): Promise<string[]> => {
      up.seen = [];
      const first = get(`${gw.url}/?ms=150&id=first`);
      await sleep(30);
      const waiting: Array<Promise<unknown>> = [];
      for (const [i, t] of tenants.entries()) {
        const raw = requestBytes(`GET /?ms=5&id=${i} HTTP/1.1`, t === undefined ? [] : [`X-Tenant: ${t}`]);
        waiting.push(sendRaw(gw.url, raw));
        await sleep(10);
      }
      await Promise.all([first, ...waiting]);
      return up.ids().slice(1);
    };
    // `acme` twice then `other`: one line for acme, so other goes second.
    assert.deepEqual(await order(['acme', ' acme ', 'other']), ['0', '2', '1']);
    assert.deepEqual(await order(['acme', 'ACME', 'other']), ['0', '1', '2']);
    // No header: one shared line (''), whoever sends none.
    assert.deepEqual(await order([undefined, undefined, 'other']), ['0', '2', '1']);
    // An empty header is a tenant of its own, not the headerless line.
    assert.deepEqual(await order([undefined, '', undefined]), ['0', '1', '2']);
  });

  it('under tenant: ip, addresses of one IPv6 /64 share a line, and X-Forwarded-For from an untrusted peer opens none', async () => {
    const order = async (gw: Gateway, forwarded: string[]): Promise<string[]> => {
      up.seen = [];
      const first = get(`${gw.url}/?ms=150&id=first`);
      await sleep(30);
      const waiting: Array<Promise<unknown>> = [];
      for (const [i, xff] of forwarded.entries()) {
        waiting.push(sendRaw(gw.url, requestBytes(`GET /?ms=5&id=${i} HTTP/1.1`, [`X-Forwarded-For: ${xff}`])));
        await sleep(10);
      }
      await Promise.all([first, ...waiting]);
      return up.ids().slice(1);
    };
    const trusting = await gws.start(
      `upstream: ${up.url}\nrules: []\ntrustProxy: [loopback]\noverload:\n  limit: 1\n  queue: { timeout: 3s }\n`,
    );
    assert.deepEqual(await order(trusting, ['2001:db8::1', '2001:db8::ffff:2', '2001:db8:0:1::1']), ['0', '2', '1']);
    assert.deepEqual(await order(trusting, ['203.0.113.1', '203.0.113.1', '203.0.113.2']), ['0', '2', '1']);
    const untrusting = await gws.start(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  queue: { timeout: 3s }\n`);
    // Without trustProxy the header is the client's word: every request is 127.0.0.1's, one line, in arrival order.
    assert.deepEqual(await order(untrusting, ['203.0.113.1', '203.0.113.1', '203.0.113.2']), ['0', '1', '2']);
  });
});

describe('overload attack: hanging up at every point leaves nothing held and the limit where it was', () => {
  let up: Upstream;
  const gws = gateways();
  before(async () => {
    up = await startUpstream();
  });
  after(async () => {
    await gws.stop();
    await stopUpstream(up);
  });

  it('hanging up before the body, mid-body (streamed past requestBuffer) or mid-response frees the slot without shrinking the limit', async () => {
    const gw = await gws.start(`upstream: ${up.url}\nrules: []\nproxy: { requestBuffer: 1024 }\noverload:\n${QUICK_ADAPTIVE}`);
    for (let i = 0; i < 3; i++) assert.equal((await get(`${gw.url}/?ms=2`)).status, 200);
    // The limit itself moves with every real latency sample (a loaded machine's included): what a hang-up must never be
    // is an overload signal, the one thing that backs the limit off whatever the latency.
    const overloads = overloadsOf(gw);
    for (let i = 0; i < 10; i++) {
      // Before any of the body: the request never reaches the gate.
      const early = await startUpload(gw, '/?ms=1', 100, 0);
      await sleep(10);
      early.destroy();
      // Mid-body of a body too large to buffer: admitted, streaming to the upstream, then cut.
      const mid = await startUpload(gw, '/?ms=1', 64 * 1024, 8 * 1024);
      await sleep(30);
      mid.destroy();
      // Mid-response: after the head, while the body streams.
      await new Promise<void>((resolve) => {
        const req = httpRequest(`${gw.url}/stream?ms=300`, { agent: false }, () => {
          req.destroy();
          resolve();
        });
        req.on('error', () => resolve());
        req.end();
      });
    }
    await assertSettled(gw, 'after hang-ups before, mid-body and mid-response');
    assert.equal(overloadsOf(gw), overloads, 'a hang-up was read as an overload signal');
  });

  it('hanging up while queued, just as admitted, or while the upstream works leaves no waiter and no slot', async () => {
    const gw = await gws.start(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  queue: { timeout: 5s, maxQueue: 100 }\n`);
    up.seen = [];
    for (const leaveMs of [20, 95, 100, 105, 110, 150]) {
      const first = get(`${gw.url}/?ms=100&id=first`);
      await sleep(5);
      // Each leaves around the moment the first request's slot frees (100 ms after it started).
      await Promise.all([0, 1, 2].map((i) => leaveAfter(`${gw.url}/?ms=50&id=gone${leaveMs}-${i}`, leaveMs - 5)));
      assert.equal((await first).status, 200);
      await assertSettled(gw, `clients that left after ${leaveMs} ms`);
    }
  });

  it('a slow reader holds its slot only until clientWriteTimeout cuts it', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\nproxy: { clientWriteTimeout: 300ms }\noverload:\n  limit: 1\n  queue: { timeout: 5s }\n`,
    );
    const { port } = new URL(gw.url);
    const reader = connect(Number(port), '127.0.0.1', () => reader.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n'));
    reader.on('error', () => undefined);
    // Never read: the 16 MB answer fills the socket's buffers and stops.
    reader.pause();
    await sleep(100);
    assert.equal((await metricsOf(gw)).get('floodgate_overload_in_flight'), 1);
    const waited = await get(`${gw.url}/?id=after`, { timeoutMs: 3000 });
    assert.equal(waited.status, 200);
    assert.ok(waited.elapsedMs >= 150, `admitted after ${waited.elapsedMs} ms, while the reader still held the slot?`);
    reader.destroy();
    await assertSettled(gw, 'after the slow reader');
  });

  it('a trickled body is cut at minBodyRate and frees its slot without shrinking the limit', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\nproxy: { requestBuffer: 1024, minBodyRate: 4096 }\noverload:\n${QUICK_ADAPTIVE}`,
    );
    for (let i = 0; i < 3; i++) await get(`${gw.url}/?ms=2`);
    const limit = await limitOf(gw);
    const socket = await startUpload(gw, '/?ms=1', 64 * 1024, 2048);
    const timer = setInterval(() => socket.writable && socket.write('x'), 50);
    await closed(socket);
    clearInterval(timer);
    await assertSettled(gw, 'after the trickled body');
    assert.ok((await limitOf(gw)) >= limit, `limit fell from ${limit} to ${await limitOf(gw)}`);
  });

  it('an upload refused at the gate (a full queue, a wait timed out) is answered 503 at once though its body is still coming', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\nproxy: { requestBuffer: 1024 }\noverload:\n  limit: 1\n  queue: { timeout: 200ms, maxQueue: 1 }\n`,
    );
    const busy = get(`${gw.url}/?ms=600&id=busy`);
    await sleep(30);
    const replyOf = (socket: Socket): Promise<string> =>
      new Promise((resolve) => {
        let reply = '';
        socket.on('data', (d: Buffer) => {
          reply += d.toString('latin1');
          if (reply.includes('\r\n\r\n')) resolve(reply);
        });
        socket.on('close', () => resolve(reply));
      });
    // One waits (its body streams in slowly), a second finds the queue full.
    const waiting = await startUpload(gw, '/?id=w', 64 * 1024, 2048);
    const waited = replyOf(waiting);
    await sleep(20);
    const full = await startUpload(gw, '/?id=f', 64 * 1024, 2048);
    const started = Date.now();
    assert.match(await replyOf(full), /^HTTP\/1\.1 503[\s\S]*floodgate-overload: full/i);
    assert.ok(Date.now() - started < 150, `the full answer took ${Date.now() - started} ms`);
    assert.match(await waited, /^HTTP\/1\.1 503[\s\S]*floodgate-overload: timeout/i);
    waiting.destroy();
    full.destroy();
    assert.equal((await busy).status, 200);
    await assertSettled(gw, 'after refused uploads');
  });

  it('an upload the upstream answers before it ends (413 at its body limit) is no latency sample: a slow uploader cannot shrink the limit', async () => {
    const gw = await gws.start(`upstream: ${up.url}\nrules: []\nproxy: { requestBuffer: 1024 }\noverload:\n${QUICK_ADAPTIVE}`);
    for (let i = 0; i < 3; i++) await get(`${gw.url}/?ms=2`);
    const limit = await limitOf(gw);
    for (let i = 0; i < 5; i++) {
      // 2 KB at once, then the rest 512 bytes every 50 ms: the upstream answers 413 at 4 KB, 200 ms after admission.
      const socket = await startUpload(gw, '/limited', 64 * 1024, 2048);
      const timer = setInterval(() => socket.writable && socket.write(Buffer.alloc(512, 120)), 50);
      let reply = '';
      socket.on('data', (d: Buffer) => (reply += d.toString('latin1')));
      for (let t = 0; t < 100 && !reply.includes('413'); t++) await sleep(20);
      clearInterval(timer);
      socket.destroy();
      assert.match(reply, /^HTTP\/1\.1 413/);
    }
    await assertSettled(gw, 'after the early answers');
    assert.ok((await limitOf(gw)) >= limit, `limit fell from ${limit} to ${await limitOf(gw)}`);
  });
});

describe('overload attack: shrinking the limit or passing the gate with what never reaches the upstream', () => {
  let up: Upstream;
  const gws = gateways();
  before(async () => {
    up = await startUpstream();
  });
  after(async () => {
    await gws.stop();
    await stopUpstream(up);
  });

  it('requests the rules refuse, and those the gateway answers itself, take no slot and give no sample', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules:\n  - name: few\n    match: { path: /limited-by-rule }\n    key: ip\n    policies: ["1/1h"]\noverload:\n${QUICK_ADAPTIVE}`,
    );
    for (let i = 0; i < 3; i++) await get(`${gw.url}/?ms=2`);
    const before = await metricsOf(gw);
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await get(`${gw.url}/limited-by-rule`)).status);
    for (let i = 0; i < 10; i++) {
      await get(`${gw.url}/_floodgate/healthz`);
      await get(`${gw.url}/_floodgate/decide`, { headers: { 'x-original-uri': '/limited-by-rule' } });
      await sendRaw(gw.url, requestBytes('GET /bad;target HTTP/1.1'));
    }
    assert.deepEqual(statuses, [200, ...Array(19).fill(429)]);
    const after = await admittedByClass(gw);
    assert.equal(after.get('default'), (before.get('floodgate_overload_decisions_total{priority="default",outcome="admitted"}') ?? 0) + 1);
    assert.equal(await limitOf(gw), before.get('floodgate_overload_limit'));
    await assertSettled(gw, 'after refused requests');
  });

  it('a client that asks for a path the upstream answers 503 for shrinks everyone’s limit, unless errorStatuses leaves 503 out', async () => {
    const shrinks = async (errorStatuses: string): Promise<[number, number]> => {
      const gw = await gws.start(`upstream: ${up.url}\nrules: []\noverload:\n${QUICK_ADAPTIVE}${errorStatuses}`);
      for (let i = 0; i < 3; i++) await get(`${gw.url}/?ms=2`);
      const before = await limitOf(gw);
      for (let i = 0; i < 10; i++) assert.equal((await get(`${gw.url}/busy`)).status, 503);
      return [before, await limitOf(gw)];
    };
    const [was, now] = await shrinks('');
    assert.ok(now < was / 2, `limit ${was} → ${now}`);
    const [kept, still] = await shrinks('  errorStatuses: [504]\n');
    assert.ok(still >= kept, `limit ${kept} → ${still}`);
  });

  it('pipelined requests on one connection wait at the gate like separate ones and leave nothing held', async () => {
    const gw = await gws.start(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  queue: { timeout: 3s }\n`);
    up.most = 0;
    const busy = get(`${gw.url}/?ms=100&id=busy`);
    await sleep(20);
    const one = (i: number, last: boolean): string =>
      `GET /?ms=5&id=p${i} HTTP/1.1\r\nHost: x\r\n${last ? 'Connection: close\r\n' : ''}\r\n`;
    const reply = await sendRaw(gw.url, [0, 1, 2, 3, 4].map((i) => one(i, i === 4)).join(''));
    assert.deepEqual(reply.statuses, [200, 200, 200, 200, 200]);
    assert.equal((await busy).status, 200);
    assert.equal(up.most, 1);
    await assertSettled(gw, 'after pipelined requests');
  });

  it('an adaptive limit above proxy.connections let sheddable requests admitted first hold the connection queue ahead of a critical one: maxLimit defaults to the pool size', async () => {
    const parse = async (yaml: string, connections: number): Promise<number | undefined> => {
      const { cursor, value } = await readYaml(yaml, 'test.yaml');
      return overloadSettings(cursor, (value as { overload: unknown }).overload, connections)!.adaptive.maxLimit;
    };
    assert.equal(await parse('overload: {}\n', 128), 128);
    assert.equal(await parse('overload: { adaptive: { maxLimit: 50 } }\n', 128), 50);
    assert.equal(await parse('overload: {}\n', 4096), undefined);
    await assert.rejects(parse('overload: { adaptive: { minLimit: 200 } }\n', 128), /minLimit.*above proxy\.connections 128/);
    await assert.rejects(parse('overload: { adaptive: { initialLimit: 200 } }\n', 128), /initialLimit.*above proxy\.connections 128/);
    // What the default prevents: a fixed limit past the pool gives the order to the connection queue, first come first served.
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\nproxy: { connections: 1 }\noverload:\n  limit: 10\n  priorities:\n    - { name: critical, match: { path: /checkout } }\n    - { name: default }\n    - { name: sheddable, match: { path: /batch } }\n`,
    );
    up.seen = [];
    const first = get(`${gw.url}/?ms=150&id=first`);
    await sleep(30);
    const batch = [1, 2].map((i) => get(`${gw.url}/batch?ms=5&id=b${i}`));
    await sleep(20);
    const critical = get(`${gw.url}/checkout?ms=5&id=c`);
    await Promise.all([first, critical, ...batch]);
    assert.deepEqual(up.ids(), ['first', 'b1', 'b2', 'c']);
  });

  it('a WebSocket handshake waits at the gate like a request (a reconnect storm is held back); the open tunnel holds no slot', async () => {
    const gw = await gws.start(
      `upstream: ${up.url}\nrules: []\nproxy: { upgrades: [websocket] }\noverload:\n  limit: 1\n  queue: { timeout: 2s, maxQueue: 3 }\n`,
    );
    const started = Date.now();
    const busy = get(`${gw.url}/?ms=300&id=busy`);
    await sleep(30);
    const { port } = new URL(gw.url);
    const sockets: Socket[] = [];
    const handshake = (): Promise<{ line: string; afterMs: number; text: string }> =>
      new Promise((resolve) => {
        const s = connect(Number(port), '127.0.0.1', () =>
          s.write(
            'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
              'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
          ),
        );
        sockets.push(s);
        s.on('error', () => resolve({ line: 'error', afterMs: Date.now() - started, text: '' }));
        s.once('data', (d: Buffer) => {
          const text = d.toString('latin1');
          resolve({ line: text.split('\r\n')[0]!, afterMs: Date.now() - started, text });
        });
      });
    const answers = await Promise.all([0, 1, 2, 3].map(() => handshake()));
    // Three wait for the one slot and open after the busy request; the fourth finds the queue full.
    const opened = answers.filter((a) => a.line === 'HTTP/1.1 101 Switching Protocols');
    const refused = answers.filter((a) => a.line.startsWith('HTTP/1.1 503'));
    assert.equal(opened.length, 3, answers.map((a) => a.line).join(' | '));
    for (const a of opened) assert.ok(a.afterMs >= 250, `a handshake passed at ${a.afterMs} ms, while the slot was busy`);
    assert.equal(refused.length, 1);
    assert.match(refused[0]!.text, /Floodgate-Overload: full/i);
    assert.equal((await busy).status, 200);
    // The tunnels stay open and hold nothing: a request is admitted at once.
    assert.equal((await metricsOf(gw)).get('floodgate_overload_in_flight'), 0);
    assert.equal((await get(`${gw.url}/?ms=1&id=after`)).status, 200);
    for (const s of sockets) s.destroy();
    await assertSettled(gw, 'with tunnels open and closed');
  });
});

describe('overload attack: a reload while requests wait and run', () => {
  let up: Upstream;
  const gws = gateways();
  before(async () => {
    up = await startUpstream();
  });
  after(async () => {
    await gws.stop();
    await stopUpstream(up);
  });

  const config = (limit: number): string =>
    `upstream: ${up.url}\nrules: []\noverload:\n  limit: ${limit}\n  queue: { timeout: 3s, maxQueue: 100 }\n`;

  for (const [what, next] of [
    ['changes the overload section', 2],
    ['keeps the overload section', 1],
  ] as const) {
    it(`a reload that ${what} answers every waiting and running request and leaves nothing held`, async () => {
      const gw = await gws.start(config(1));
      up.most = 0;
      const replies = Array.from({ length: 8 }, (_, i) => get(`${gw.url}/?ms=60&id=${i}`, { timeoutMs: 4000 }));
      await sleep(30);
      gw.apply(await parseConfigText(config(next), 'test.yaml', { listen: { host: '127.0.0.1', port: 0 }, watch: false }));
      const after = Array.from({ length: 4 }, (_, i) => get(`${gw.url}/?ms=20&id=a${i}`, { timeoutMs: 4000 }));
      const statuses = (await Promise.all([...replies, ...after])).map((r) => r.status);
      assert.deepEqual(statuses, Array(12).fill(200));
      await assertSettled(gw, `after a reload that ${what}`);
      // The old gate's requests and the new one's run side by side for a moment: at most both limits.
      assert.ok(up.most <= 1 + next, `${up.most} at once`);
    });
  }
});

describe('overload attack: a flood of tenant values against a large queue', () => {
  /** The line a full queue evicts from, found the slow way: the first longest line of the lowest class below `priority` that waits. */
  const bruteVictim = (
    entries: ReadonlyArray<FairEntry<number>>,
    classes: number,
    priority: number,
    tenant: string,
  ): number | undefined => {
    const lengths = (p: number): Map<string, number> => {
      const m = new Map<string, number>();
      for (const e of entries) if (e.priority === p) m.set(e.tenant, (m.get(e.tenant) ?? 0) + 1);
      return m;
    };
    for (let p = classes - 1; p > priority; p--) {
      const m = lengths(p);
      if (m.size > 0) return Math.max(...m.values());
    }
    const m = lengths(priority);
    if (m.size === 0) return undefined;
    const most = Math.max(...m.values());
    return most > (m.get(tenant) ?? 0) + 1 ? most : undefined;
  };

  it('evicts from a longest line however waiters come and go (the lengths kept by count agree with a count of the lines)', () => {
    let seed = 7;
    const random = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const q = new FairQueue<number>(3);
    const entries: Array<FairEntry<number>> = [];
    for (let step = 0; step < 20_000; step++) {
      const op = random(10);
      if (op < 5 || entries.length === 0) entries.push(q.push(random(3), `t${random(12)}`, step));
      else if (op < 8) {
        const [gone] = entries.splice(random(entries.length), 1);
        assert.ok(q.remove(gone!));
      } else {
        const shifted = q.shift()!;
        entries.splice(entries.indexOf(shifted), 1);
      }
      const priority = random(3);
      const tenant = `t${random(12)}`;
      const victim = q.victimFor(priority, tenant);
      const want = bruteVictim(entries, 3, priority, tenant);
      assert.equal(victim === undefined ? undefined : victim.line!.count, want, `step ${step}`);
      if (victim !== undefined) assert.equal(victim.line!.tail, victim, 'the newest of its line');
    }
  });

  it('a newcomer to a full queue of 100 000 one-request tenants costs no walk over every line', () => {
    const cost = (lines: number): number => {
      const q = new FairQueue<number>(3);
      for (let i = 0; i < lines; i++) q.push(1, `t${i}`, i);
      const started = performance.now();
      for (let i = 0; i < 20_000; i++) q.victimFor(1, `new${i}`);
      return performance.now() - started;
    };
    cost(1000);
    const small = cost(1000);
    const large = cost(100_000);
    // A walk over the lines made the large queue ~60 times slower per newcomer; kept by count, both cost the same.
    assert.ok(large < small * 10 + 20, `1000 lines: ${small.toFixed(1)} ms, 100 000 lines: ${large.toFixed(1)} ms for 20 000 newcomers`);
  });
});

describe('overload attack: one tenant that holds every slot (tenantShare)', () => {
  /** Settles pending acquire() promises. */
  const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  it('a tenant that holds its slots long took every slot while nobody waited; with tenantShare it holds its share and others go at once', async () => {
    // Without a share: four slow requests of one tenant take the four slots, and the next tenant waits for one to end.
    const open = new OverloadLimiter({ limit: 4, queue: { timeout: '1m' } });
    const hog = [0, 1, 2, 3].map(() => open.tryAcquire({ tenant: 'hog' })!);
    assert.ok(hog.every((s) => s.allowed));
    assert.equal(open.tryAcquire({ tenant: 'quiet' }), undefined);
    // With half the limit each: two are admitted, two wait though slots are free, and those slots stay for the others.
    const shared = new OverloadLimiter({ limit: 4, tenantShare: 0.5, queue: { timeout: '1m' } });
    const first = [0, 1].map(() => shared.tryAcquire({ tenant: 'hog' })!);
    assert.ok(first.every((s) => s.allowed));
    assert.equal(shared.tryAcquire({ tenant: 'hog' }), undefined);
    const waiting = [0, 1].map(() => shared.acquire({ tenant: 'hog' }));
    const quiet = shared.tryAcquire({ tenant: 'quiet' });
    assert.equal(quiet?.allowed, true);
    assert.deepEqual(shared.stats().queued, { critical: 0, default: 2, sheddable: 0 });
    // When one of the hog's slots ends, its next waiter takes it; the free slot left is still not the hog's.
    first[0]!.release({ latencyMs: 1 });
    const next = await waiting[0]!;
    assert.equal(next.allowed, true);
    assert.equal(shared.stats().inFlight, 3);
    assert.equal(shared.stats().queued.default, 1);
    // Another tenant waiting behind the hog's waiter goes at once: the hog's waiter is passed over, keeping its turn.
    const late = await shared.acquire({ tenant: 'late' });
    assert.equal(late.allowed, true);
    for (const s of [first[1]!, next, quiet!, late]) s.release({ latencyMs: 1 });
    assert.equal((await waiting[1]!).allowed, true);
    for (const s of hog) s.release({ latencyMs: 1 });
  });

  it('with tenantShare no tenant ever holds more than its share, and no slot stays free while a tenant under its share waits', async () => {
    const random = mulberry32(35);
    const limiter = new OverloadLimiter({ limit: 6, tenantShare: 0.34, queue: { timeout: '1m', maxQueue: 50 } });
    const cap = 2;
    const held: Array<{ tenant: string; slot: OverloadSlot }> = [];
    const waiting = new Map<string, number>();
    // Whoever still waits at the end gives up, so no wait outlives the test.
    const end = new AbortController();
    for (let step = 0; step < 2000; step++) {
      if (random() < 0.55) {
        const tenant = `t${Math.floor(random() * 5)}`;
        const priority = (['critical', 'default', 'sheddable'] as const)[Math.floor(random() * 3)];
        waiting.set(tenant, (waiting.get(tenant) ?? 0) + 1);
        limiter.acquire({ tenant, priority, signal: end.signal }).then(
          (slot) => {
            waiting.set(tenant, waiting.get(tenant)! - 1);
            if (slot.allowed) held.push({ tenant, slot });
          },
          () => undefined,
        );
      } else if (held.length > 0) {
        const [gone] = held.splice(Math.floor(random() * held.length), 1);
        gone!.slot.release({ latencyMs: 1 });
      }
      await tick();
      const per = new Map<string, number>();
      for (const h of held) per.set(h.tenant, (per.get(h.tenant) ?? 0) + 1);
      for (const [tenant, n] of per) assert.ok(n <= cap, `step ${step}: ${tenant} holds ${n}`);
      assert.equal(limiter.stats().inFlight, held.length);
      if (held.length < 6) {
        const starved = [...waiting].filter(([tenant, n]) => n > 0 && (per.get(tenant) ?? 0) < cap);
        assert.deepEqual(starved, [], `step ${step}: ${held.length} held while these wait`);
      }
    }
    end.abort();
    for (const h of held) h.slot.release({ latencyMs: 1 });
  });

  it('refuses a tenantShare that is not above 0 and at most 1', () => {
    for (const bad of [0, -0.5, 1.5, Number.NaN, '0.5'])
      assert.throws(
        () => new OverloadLimiter({ tenantShare: bad as number }),
        (e: unknown) => (e as { code?: string }).code === ErrorCode.INVALID_OPTIONS,
      );
  });
});
