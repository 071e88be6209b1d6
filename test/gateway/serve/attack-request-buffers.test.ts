// F6: buffered request bodies are bounded per process (proxy.requestBufferTotal, past it bodies stream) and per connection (one body read at a time behind pipelining). Prints what the flood did to the gateway child.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { get } from '../../http/support/http.js';
import { gatewayFixture, parseMetrics, serveCli, sleep, stopCli, writeTemp } from '../support/harness.js';
import { sendRaw } from '../support/raw.js';
import { rejectsConfig } from '../support/config-errors.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';

const fixture = gatewayFixture();

/** Bytes of each flooding body: under proxy.requestBuffer (64 KiB), so each one would be buffered whole. */
const BODY = 65_000;
const CONNECTIONS = 100;
const PIPELINED = 32;
/** proxy.requestBufferTotal in the flood: room for 32 such bodies, far less than the 100 connections' first ones. */
const BUDGET = 2 * 1_048_576;

/** An upstream that reads each body and answers after `delayMs`, counting the requests it holds at once. */
async function startHoldingUpstream(delayMs: number): Promise<{ url: string; server: Server; peak: () => number; seen: () => number }> {
  let now = 0;
  let peak = 0;
  let seen = 0;
  const server = createServer((req, res) => {
    now += 1;
    seen += 1;
    peak = Math.max(peak, now);
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        now -= 1;
        res.end('ok\n');
      }, delayMs),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    peak: () => peak,
    seen: () => seen,
  };
}

const post = (path: string, length: number, close = false): string =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${length}\r\n${close ? 'Connection: close\r\n' : ''}\r\n${'b'.repeat(length)}`;

describe('attack: buffered request bodies', () => {
  let upstream: Awaited<ReturnType<typeof startHoldingUpstream>>;
  before(async () => {
    await fixture.ready();
    upstream = await startHoldingUpstream(300);
  });
  after(async () => {
    upstream.server.closeAllConnections();
    await new Promise<void>((resolve) => upstream.server.close(() => resolve()));
  });

  test(`F6: ${CONNECTIONS} connections × ${PIPELINED} pipelined ${BODY}-byte bodies hold at most proxy.requestBufferTotal in the gateway`, async () => {
    const config = writeTemp('buffers.yaml', `upstream: ${upstream.url}\nproxy: { requestBufferTotal: ${BUDGET} }\nrules: []\n`);
    const cli = await serveCli(['--config', config]);
    const sockets: Socket[] = [];
    try {
      const metrics = async (): Promise<Map<string, number>> => parseMetrics((await get(`${cli.url}/_floodgate/metrics`)).body);
      const rssBefore = (await metrics()).get('process_resident_memory_bytes') ?? 0;
      const port = Number(new URL(cli.url).port);
      const flood = Array.from({ length: PIPELINED }, () => post('/upload', BODY)).join('');
      for (let i = 0; i < CONNECTIONS; i += 1) {
        const socket = connect(port, '127.0.0.1', () => socket.write(flood));
        socket.on('error', () => undefined);
        socket.resume();
        sockets.push(socket);
      }
      const samples: number[] = [];
      let rssPeak = rssBefore;
      let control = 0;
      const started = Date.now();
      while (Date.now() - started < 5000) {
        const m = await metrics();
        samples.push(m.get('floodgate_request_buffer_bytes') ?? Number.NaN);
        rssPeak = Math.max(rssPeak, m.get('process_resident_memory_bytes') ?? 0);
        // A client outside the flood, with a body the budget may have no room for: it streams, and is served.
        if (control === 0) control = (await sendRaw(cli.url, post('/control', 10_000, true), 10_000)).statuses[0] ?? -1;
        await sleep(100);
      }
      const peak = Math.max(...samples);
      const table = [
        'measure                                  | value',
        `bodies sent (connections × pipelined)    | ${CONNECTIONS} × ${PIPELINED} × ${BODY} B = ${((CONNECTIONS * PIPELINED * BODY) / 1_048_576).toFixed(0)} MiB`,
        `proxy.requestBufferTotal                 | ${BUDGET} B`,
        `floodgate_request_buffer_bytes, peak     | ${Number.isNaN(peak) ? 'not exported' : `${peak} B`} (${samples.length} samples)`,
        `RSS before → peak                        | ${(rssBefore / 1_048_576).toFixed(0)} → ${(rssPeak / 1_048_576).toFixed(0)} MiB`,
        `upstream requests seen, most held at once | ${upstream.seen()}, ${upstream.peak()}`,
        `control POST (10 kB body) during flood   | ${control}`,
      ].join('\n');
      console.log(`\n${table}\n`);
      assert.ok(!Number.isNaN(peak) && peak > 0, 'the gateway exports the bytes it buffers, and the flood was buffered');
      assert.ok(peak <= BUDGET, `the gateway held ${peak} bytes of bodies, over proxy.requestBufferTotal (${BUDGET})`);
      assert.equal(control, 200, 'a client whose body finds the budget full still gets through (its body streams)');
      // Before, the same flood took the gateway from about 110 to 370 MiB: every pipelined body was read and held.
      assert.ok(rssPeak - rssBefore < 150 * 1_048_576, `RSS grew by ${((rssPeak - rssBefore) / 1_048_576).toFixed(0)} MiB`);
      // Each connection reads one body at a time: never more requests upstream than connections (and the control).
      assert.ok(upstream.peak() <= CONNECTIONS + 1, `the upstream held ${upstream.peak()} requests at once`);
    } finally {
      for (const s of sockets) s.destroy();
      await stopCli(cli);
    }
  });

  test('F6: requests pipelined behind one with a body are not read until it is answered', async () => {
    // An upstream of its own: the flood's aborted uploads never end on the other one, so its count of held requests stays up.
    const own = await startHoldingUpstream(300);
    after(() => {
      own.server.closeAllConnections();
      own.server.close();
    });
    const g = await fixture.start(`upstream: ${own.url}\nrules: []`);
    const upstream = own;
    const reply = await sendRaw(g.url, post('/one', 1000) + post('/two', 1000) + post('/three', 1000, true), 10_000);
    assert.deepEqual(reply.statuses, [200, 200, 200]);
    assert.equal(upstream.seen(), 3);
    // The holding upstream answers each after 300 ms: had the gateway read all three, all three would have been there at once.
    assert.equal(upstream.peak(), 1, 'pipelined bodies reached the upstream one at a time');
  });

  test('pipelined requests without bodies are still forwarded side by side, and every answer arrives in order', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\nrules: []`);
    const req = (path: string, close = false): string => `GET ${path} HTTP/1.1\r\nHost: x\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
    const reply = await sendRaw(g.url, req('/slow?ms=200&n=1') + req('/slow?ms=200&n=2') + post('/after', 10) + req('/last', true), 10_000);
    assert.deepEqual(reply.statuses, [200, 200, 200, 200]);
    const order = [...reply.text.matchAll(/"url":"([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(order, ['/slow?ms=200&n=1', '/slow?ms=200&n=2', '/after', '/last']);
  });

  test('proxy.requestBufferTotal, minResponseRate and responseTimeout are checked like the other proxy settings', async () => {
    await rejectsConfig('proxy:\n  requestBufferTotal: lots\n', /^gw\.yaml:2:\d+: proxy\.requestBufferTotal: must be a whole number/);
    await rejectsConfig('proxy:\n  minResponseRate: -1\n', /^gw\.yaml:2:\d+: proxy\.minResponseRate: must be a whole number/);
    await rejectsConfig('proxy:\n  responseTimeout: later\n', /^gw\.yaml:2:\d+: proxy\.responseTimeout: /);
    await rejectsConfig(
      'proxy:\n  requestBuffer: 65536\n  requestBufferTotal: 1000\n',
      /^gw\.yaml:3:\d+: proxy\.requestBufferTotal: requestBufferTotal \(1000 bytes\) must be at least requestBuffer \(65536 bytes\), or 0/,
    );
    const zero = await parseConfigText('proxy: { requestBufferTotal: 0, minResponseRate: 0, responseTimeout: 0 }\nrules: []', 'gw.yaml');
    assert.deepEqual([zero.proxy.requestBufferTotal, zero.proxy.minResponseRate, zero.proxy.responseTimeoutMs], [0, 0, 0]);
    const defaults = await parseConfigText('rules: []', 'gw.yaml');
    assert.deepEqual(
      [defaults.proxy.requestBufferTotal, defaults.proxy.minResponseRate, defaults.proxy.responseTimeoutMs],
      [64 * 1_048_576, 1024, 600_000],
    );
  });
});
