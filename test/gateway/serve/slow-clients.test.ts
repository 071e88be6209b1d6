// Slow request bodies against a small upstream pool: bodies up to proxy.requestBuffer are read before an upstream connection is taken, larger ones must keep proxy.minBodyRate, and chunked bodies arrive intact either way.
import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { gatewayFixture, parseMetrics, sleep } from '../support/harness.js';

const fixture = gatewayFixture();

/** A client that sends its head, then one byte of its `length`-byte body every `everyMs`; `reply` collects what it is sent. */
function trickle(base: string, length: number, everyMs: number): { socket: Socket; reply: () => string } {
  const socket = connect(Number(new URL(base).port), '127.0.0.1');
  let reply = '';
  socket.on('data', (d: Buffer) => (reply += d.toString('utf8')));
  socket.on('error', () => undefined);
  socket.write(`POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${length}\r\n\r\n`);
  let sent = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || sent >= length) return clearInterval(timer);
    socket.write('x');
    sent += 1;
  }, everyMs);
  socket.on('close', () => clearInterval(timer));
  return { socket, reply: () => reply };
}

/** POSTs `body` chunked (no Content-Length) and returns the upstream's echo of it. */
function postChunked(url: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent: false, headers: { 'transfer-encoding': 'chunked' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    for (let i = 0; i < body.length; i += 10_000) req.write(body.slice(i, i + 10_000));
    req.end();
  });
}

describe('gateway: slow clients', () => {
  it('regression: slow request bodies from more clients than proxy.connections do not hold the upstream pool', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\nproxy: { connections: 4 }\nrules: []`);
    const slow = Array.from({ length: 12 }, () => trickle(g.url, 200, 100));
    try {
      await sleep(300);
      // Each slow client has sent part of its body by now; none of them has an upstream connection.
      const legit = await get(`${g.url}/legit`, { timeoutMs: 4000 });
      assert.equal(legit.status, 200);
      assert.ok(legit.elapsedMs < 3000, `the legitimate request waited ${legit.elapsedMs} ms`);
      const post = await get(`${g.url}/legit-post`, { method: 'POST', headers: { 'content-length': '0' }, timeoutMs: 4000 });
      assert.equal(post.status, 200);
    } finally {
      for (const s of slow) s.socket.destroy();
    }
  });

  it('regression: a large body trickled below proxy.minBodyRate is cut with 408 and its upstream connection freed', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nproxy: { connections: 1, requestBuffer: 1024, minBodyRate: 2000 }\nrules: []`,
    );
    const slow = trickle(g.url, 100_000, 50);
    try {
      for (let i = 0; i < 200 && !slow.reply().startsWith('HTTP/1.1'); i += 1) await sleep(50);
      assert.match(slow.reply(), /^HTTP\/1.1 408 /);
      const legit = await get(`${g.url}/after`, { timeoutMs: 4000 });
      assert.equal(legit.status, 200, 'the one upstream connection is free again');
    } finally {
      slow.socket.destroy();
    }
  });

  it('regression: a client that stops reading its response does not hold the upstream connection past proxy.clientWriteTimeout', async () => {
    // An upstream answering /big with 64 MiB: far more than the socket buffers between it and a client that does not read.
    const chunk = Buffer.alloc(1 << 20, 'z');
    const big = createServer((req, res) => {
      if (req.url !== '/big') return void res.end('ok');
      res.writeHead(200, { 'content-length': String(64 * chunk.length) });
      let sent = 0;
      const pump = (): void => {
        while (sent < 64) {
          sent += 1;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve));
    const g = await fixture.start(
      `upstream: http://127.0.0.1:${(big.address() as AddressInfo).port}\nproxy: { connections: 1, clientWriteTimeout: 500ms }\nrules: []`,
    );
    const reader = connect(Number(new URL(g.url).port), '127.0.0.1');
    reader.on('error', () => undefined);
    try {
      reader.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
      reader.pause();
      await sleep(300);
      const legit = await get(`${g.url}/legit`, { timeoutMs: 5000 });
      assert.equal(legit.status, 200, 'the one upstream connection was freed');
    } finally {
      reader.destroy();
      big.closeAllConnections();
      big.close();
    }
  });

  it('regression: with every upstream connection busy, a request waits at most proxy.queueTimeout, then gets 503', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nproxy: { connections: 1, queueTimeout: 300ms }\nrules: [{ name: all, key: ip, policies: ["100/1m"] }]`,
    );
    const busy = get(`${g.url}/slow?ms=2500`, { timeoutMs: 6000 });
    await sleep(100);
    const queued = await get(`${g.url}/queued`, { timeoutMs: 2000 });
    assert.equal(queued.status, 503);
    assert.equal(queued.headers['retry-after'], '1');
    assert.match(String(queued.headers.ratelimit), /r=98/, 'the RateLimit fields come along');
    assert.equal((await busy).status, 200);
    assert.equal((await get(`${g.url}/free-again`)).status, 200);
    const m = parseMetrics((await get(`${g.url}/_floodgate/metrics`)).body);
    assert.equal(m.get('floodgate_upstream_errors_total{kind="queue"}'), 1);
  });

  it('forwards chunked bodies intact, whether buffered (small) or streamed (past proxy.requestBuffer)', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\nproxy: { requestBuffer: 4096 }\nrules: []`);
    const small = await postChunked(`${g.url}/small`, 'a'.repeat(3000));
    assert.equal(JSON.parse(small.body).body, 'a'.repeat(3000));
    const big = 'b'.repeat(250_000) + 'end';
    const streamed = await postChunked(`${g.url}/big`, big);
    assert.equal(JSON.parse(streamed.body).body, big);
  });
});
