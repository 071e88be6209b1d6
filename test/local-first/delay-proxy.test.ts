// The delay proxy the remote-Redis tests and the local-first benchmark use: it must delay, and never reorder, the bytes it forwards.
import assert from 'node:assert/strict';
import { createConnection, createServer, type Server } from 'node:net';
import { after, before, test } from 'node:test';
import { startDelayProxy } from '../support/delay-proxy.js';

let echo: Server;
let echoPort: number;
before(async () => {
  echo = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoPort = (echo.address() as { port: number }).port;
});
after(() => new Promise<void>((resolve) => echo.close(() => resolve())));

/**
 * Writes `count` numbered lines through the proxy to an echo server, each as
 * its own write a little after the last (so the proxy sees many small chunks,
 * several per millisecond), and returns how many came back out of order and
 * the round trip of the first line.
 */
async function roundTrip(delayMs: number | readonly [number, number], count: number): Promise<{ outOfOrder: number; firstMs: number }> {
  const proxy = await startDelayProxy({ targetPort: echoPort, delayMs });
  const socket = createConnection({ host: proxy.host, port: proxy.port });
  socket.setNoDelay(true);
  await new Promise((resolve) => socket.once('connect', resolve));
  let buffered = '';
  let expected = 0;
  let outOfOrder = 0;
  let received = 0;
  let firstMs = 0;
  const start = performance.now();
  const done = new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const n = Number(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
        if (received++ === 0) firstMs = performance.now() - start;
        if (n !== expected) outOfOrder++;
        expected = n + 1;
      }
      if (received === count) resolve();
    });
  });
  for (let i = 0; i < count; i++) {
    socket.write(`${i}\n`);
    // A few writes per event-loop turn, with time passing between them, as a busy Redis client does.
    if (i % 4 === 3) await new Promise((resolve) => setImmediate(resolve));
    const until = performance.now() + 0.03;
    while (performance.now() < until);
  }
  await done;
  socket.destroy();
  await proxy.stop();
  return { outOfOrder, firstMs };
}

test('a fixed delay keeps every byte in order (chunks due in the same ms were once swapped)', async () => {
  const { outOfOrder, firstMs } = await roundTrip(20, 20_000);
  assert.equal(outOfOrder, 0, `${outOfOrder} lines out of order`);
  assert.ok(firstMs >= 39, `a round trip costs twice the delay: ${firstMs.toFixed(1)} ms`);
});

test('a random delay keeps every byte in order too', async () => {
  const { outOfOrder } = await roundTrip([0, 15], 10_000);
  assert.equal(outOfOrder, 0, `${outOfOrder} lines out of order`);
});
