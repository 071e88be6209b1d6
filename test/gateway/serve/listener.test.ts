// The proxy listener's client-side limits: a slow header block is cut close to proxy.clientHeadersTimeout, proxy.maxConnections caps open connections, and a hop-count trustProxy on a public listener is warned of.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { gatewayFixture, sleep } from '../support/harness.js';

const fixture = gatewayFixture();
const rules = 'rules:\n  - name: all\n    key: ip\n    policies: ["1000/1m"]\n';

/** Opens a raw connection to `url`'s port; resolves once connected. */
function open(url: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port: Number(new URL(url).port), host: '127.0.0.1' });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Everything `socket` receives until it closes (or `limitMs` passes), and when it closed. */
function untilClosed(socket: Socket, limitMs: number): Promise<{ data: string; closedAfterMs: number | undefined }> {
  const started = Date.now();
  let data = '';
  socket.on('data', (d: Buffer) => (data += d.toString('latin1')));
  socket.on('error', () => undefined);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ data, closedAfterMs: undefined }), limitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ data, closedAfterMs: Date.now() - started });
    });
  });
}

describe('gateway: listener limits', () => {
  it('regression: a client trickling its headers is cut about when proxy.clientHeadersTimeout says (408), not up to 30 s later', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\nproxy:\n  clientHeadersTimeout: 1s\n${rules}`);
    const socket = await open(g.url);
    socket.write('GET / HTTP/1.1\r\nHost: gw\r\n');
    // One header line every 200 ms: the connection never idles, but the header block never ends.
    const trickle = setInterval(() => socket.writable && socket.write(`X-Slow-${Date.now()}: 1\r\n`), 200);
    try {
      const { data, closedAfterMs } = await untilClosed(socket, 8000);
      assert.ok(closedAfterMs !== undefined, 'cut within 8 s (Node checks every 30 s unless told otherwise)');
      assert.ok(closedAfterMs >= 900, `not before the timeout (${closedAfterMs} ms)`);
      assert.match(data, /^HTTP\/1\.1 408 /);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });

  it('regression: proxy.maxConnections refuses connections over the cap, and accepts again once one closes', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\nproxy:\n  maxConnections: 3\n${rules}`);
    const held = await Promise.all([open(g.url), open(g.url), open(g.url)]);
    // Each held connection is served, so the server has surely accepted all three.
    for (const socket of held) {
      const reply = new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(d.toString('latin1'))));
      socket.write('GET /held HTTP/1.1\r\nHost: gw\r\n\r\n');
      assert.match(await reply, /^HTTP\/1\.1 200 /);
    }
    const extra = await open(g.url);
    extra.write('GET /extra HTTP/1.1\r\nHost: gw\r\n\r\n');
    const refused = await untilClosed(extra, 5000);
    assert.ok(refused.closedAfterMs !== undefined, 'the fourth connection is closed');
    assert.equal(refused.data, '', 'and never answered');
    assert.ok(!fixture.upstream.seen.some((r) => r.url === '/extra'), 'nor forwarded');

    held[0]!.destroy();
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i += 1) {
      status = await get(`${g.url}/again`).then(
        (r) => r.status,
        () => 0,
      );
      if (status !== 200) await sleep(20);
    }
    assert.equal(status, 200, 'a slot freed by a closed connection is usable');
    for (const socket of held) socket.destroy();
  });

  it('regression: trustProxy as a hop count on a non-loopback listener is warned of at start, naming the CIDR form', async () => {
    const logs: Array<Record<string, unknown>> = [];
    await fixture.start(`upstream: ${fixture.upstream.url}\ntrustProxy: 1\n${rules}`, { listen: { host: '0.0.0.0', port: 0 } }, logs);
    const warning = logs.find((l) => typeof l.msg === 'string' && l.msg.includes('hop count'));
    assert.ok(warning, `a warning among ${JSON.stringify(logs)}`);
    assert.match(String(warning.msg), /any peer/);
    assert.match(String(warning.msg), /trustProxy: \["10\.0\.0\.0\/8"\]/);
    assert.equal(warning.level, 40);

    const quiet: Array<Record<string, unknown>> = [];
    await fixture.start(
      `upstream: ${fixture.upstream.url}\ntrustProxy: ["10.0.0.0/8"]\n${rules}`,
      { listen: { host: '0.0.0.0', port: 0 } },
      quiet,
    );
    await fixture.start(`upstream: ${fixture.upstream.url}\ntrustProxy: 1\n${rules}`, {}, quiet);
    assert.deepEqual(
      quiet.filter((l) => String(l.msg).includes('hop count')),
      [],
      'CIDRs, or a loopback listener, are not warned of',
    );
  });
});
