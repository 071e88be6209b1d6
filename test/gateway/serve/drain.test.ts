// The drain on shutdown: keep-alive clients sending steadily while the gateway stops get an HTTP answer to every request they wrote.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { freePort } from '../../support/redis-server.js';
import { gatewayFixture, serveCli, sleep, stopCli } from '../support/harness.js';

const fixture = gatewayFixture();

/** What one raw keep-alive client saw. */
interface ClientTally {
  answered: number;
  /** Requests written whose connection ended before their whole response arrived. */
  unanswered: number;
  /** Responses that said Connection: close (the client then stops, as a real one reconnects elsewhere). */
  closedByResponse: number;
  errors: string[];
}

/**
 * One keep-alive connection that writes a request as soon as the previous
 * response has been read (after a pause of 0–1 ms), until a response says
 * `Connection: close` or the connection ends.
 */
function steadyClient(port: number, path: string): { tally: ClientTally; done: Promise<void> } {
  const tally: ClientTally = { answered: 0, unanswered: 0, closedByResponse: 0, errors: [] };
  const socket: Socket = connect({ port, host: '127.0.0.1' });
  let buffer = Buffer.alloc(0);
  let waiting = false;
  const send = (): void => {
    waiting = true;
    socket.write(`GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\n\r\n`);
  };
  const done = new Promise<void>((resolve) => {
    socket.on('connect', send);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString('latin1');
        const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
        let next: number;
        if (length !== undefined) {
          next = end + 4 + Number(length);
          if (buffer.length < next) return;
        } else {
          // Chunked: the echoed JSON holds no CRLF, so the first last-chunk marker ends the body.
          const last = buffer.indexOf('\r\n0\r\n\r\n', end);
          if (last < 0) return;
          next = last + 7;
        }
        buffer = buffer.subarray(next);
        waiting = false;
        tally.answered += 1;
        if (/\r\nconnection: *close/i.test(head)) {
          tally.closedByResponse += 1;
          socket.end();
          return;
        }
        setTimeout(send, Math.random() < 0.5 ? 0 : 1);
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => tally.errors.push(error.code ?? error.message));
    socket.on('close', () => {
      if (waiting) tally.unanswered += 1;
      resolve();
    });
  });
  return { tally, done };
}

/** Sums the tallies of `clients`. */
function sum(clients: ReadonlyArray<{ tally: ClientTally }>): { answered: number; unanswered: number; closed: number; errors: string[] } {
  return clients.reduce(
    (t, c) => ({
      answered: t.answered + c.tally.answered,
      unanswered: t.unanswered + c.tally.unanswered,
      closed: t.closed + c.tally.closedByResponse,
      errors: [...t.errors, ...c.tally.errors],
    }),
    { answered: 0, unanswered: 0, closed: 0, errors: [] as string[] },
  );
}

describe('gateway: drain', () => {
  it('regression: SIGTERM drain answers every request a keep-alive client wrote (no ECONNRESET on connections that looked idle)', async () => {
    const g = await fixture.start(`upstream: ${fixture.upstream.url}\nrules:\n  - name: all\n    key: ip\n    policies: ["1000000/1m"]\n`);
    const port = Number(new URL(g.url).port);
    const clients = Array.from({ length: 60 }, () => steadyClient(port, '/steady'));
    // Let every connection settle into its request/response loop before the drain starts.
    while (clients.some((c) => c.tally.answered < 3)) await sleep(10);
    await g.shutdown();
    await Promise.all(clients.map((c) => c.done));
    const total = sum(clients);
    assert.equal(total.unanswered, 0, `requests written but never answered: ${JSON.stringify(total)}`);
    assert.deepEqual(total.errors, [], 'no connection was reset');
    assert.equal(total.closed, clients.length, 'each connection ended after a Connection: close response');
  });

  it('regression: SIGTERM to the CLI under steady keep-alive traffic: every written request is answered, then exit 0', async () => {
    const port = await freePort();
    const cli = await serveCli(['--upstream', fixture.upstream.url, '--limit', '1000000/1m', '--listen', `127.0.0.1:${port}`]);
    const clients = Array.from({ length: 40 }, () => steadyClient(port, '/steady'));
    try {
      while (clients.some((c) => c.tally.answered < 3)) await sleep(10);
      cli.child.kill('SIGTERM');
      await Promise.all(clients.map((c) => c.done));
      const total = sum(clients);
      assert.equal(total.unanswered, 0, `requests written but never answered: ${JSON.stringify(total)}`);
      assert.deepEqual(total.errors, [], 'no connection was reset');
      assert.equal(total.closed, clients.length, 'each connection ended after a Connection: close response');
      assert.equal(await cli.exited, 0);
    } finally {
      await stopCli(cli);
    }
  });
});
