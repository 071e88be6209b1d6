// The concurrency attack suite: a client under `concurrency: 2` tries to run more upstream jobs of one key at once — hang-ups at each
// point of the exchange, pipelining, WebSocket upgrades, slow readers — through a real gateway to a real upstream whose jobs run their
// full time whether or not anyone still listens. Each row prints the peak jobs running at once for the key; none may pass the limit.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { sleep, startGateway } from '../support/harness.js';

const LIMIT = 2;
const JOB_MS = 500;

/** Jobs of each key running now and the most at once. A job starts with its request and runs JOB_MS, then answers (if anyone listens). */
class Upstream {
  url = '';
  server!: Server;
  now = new Map<string, number>();
  most = new Map<string, number>();
  started = new Map<string, number>();
  sockets = new Set<Socket>();
  begin(key: string): () => void {
    const n = (this.now.get(key) ?? 0) + 1;
    this.now.set(key, n);
    this.started.set(key, (this.started.get(key) ?? 0) + 1);
    this.most.set(key, Math.max(this.most.get(key) ?? 0, n));
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.now.set(key, this.now.get(key)! - 1);
    };
  }
}

async function startUpstream(): Promise<Upstream> {
  const up = new Upstream();
  up.server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const key = String(req.headers['x-api-key']);
    const end = up.begin(key);
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/stream') {
      // The head at once, the body over the job's time (as a report export or an LLM answer streams).
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('start\n');
      setTimeout(() => {
        end();
        res.end('done\n');
      }, JOB_MS);
      return;
    }
    if (url.pathname === '/big') {
      // A large answer for a reader that does not read: the job lasts as long as its answer is being written.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let left = 256;
      const chunk = Buffer.alloc(64 * 1024, 120);
      const pump = (): void => {
        while (left > 0) {
          left -= 1;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        end();
        res.end();
      };
      res.on('close', end);
      pump();
      return;
    }
    setTimeout(() => {
      end();
      res.end('done');
    }, JOB_MS);
  });
  up.server.on('upgrade', (req, socket: Socket) => {
    const end = up.begin(String(req.headers['x-api-key']));
    socket.on('error', () => undefined);
    socket.on('close', end);
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

/** One request of `key` whose client leaves `leaveMs` after sending (never when undefined), or once it sees the head. */
function call(url: string, key: string, leave: number | 'head' | undefined): Promise<void> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { headers: { 'x-api-key': key }, agent: false }, (res) => {
      if (leave === 'head') {
        req.destroy();
        return resolve();
      }
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', () => resolve());
    req.end();
    if (typeof leave === 'number')
      setTimeout(() => {
        req.destroy();
        resolve();
      }, leave);
  });
}

const ws = (path: string, key: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';

describe('attack: more upstream jobs at once than concurrency allows', () => {
  let up: Upstream;
  let gw: Gateway;
  before(async () => {
    up = await startUpstream();
    gw = await startGateway(
      `upstream: ${up.url}\nproxy: { upgrades: [websocket], clientWriteTimeout: 300ms }\nrules:\n  - name: jobs\n    key: header:x-api-key\n    policies: ["10000/1m"]\n    concurrency: ${LIMIT}\n`,
    );
  });
  after(async () => {
    await gw.shutdown();
    // Upgraded sockets are not the http server's any more: destroy every socket it accepted.
    for (const socket of up.sockets) socket.destroy();
    up.server.close();
  });

  const port = (): number => Number(new URL(gw.url).port);
  const variants: ReadonlyArray<readonly [string, (key: string) => Promise<unknown>]> = [
    ['control: 6 at once, read whole', (k) => Promise.all(Array.from({ length: 6 }, () => call(`${gw.url}/job`, k, undefined)))],
    [
      'F4: 20 hang-ups after 150 ms (before the head)',
      async (k) => {
        for (let i = 0; i < 10; i++) await Promise.all([call(`${gw.url}/job`, k, 150), call(`${gw.url}/job`, k, 150)]);
      },
    ],
    ['20 hang-ups at once after 20 ms', (k) => Promise.all(Array.from({ length: 20 }, () => call(`${gw.url}/job`, k, 20)))],
    [
      '20 hang-ups after the head (mid-body)',
      async (k) => {
        for (let i = 0; i < 10; i++) await Promise.all([call(`${gw.url}/stream`, k, 'head'), call(`${gw.url}/stream`, k, 'head')]);
      },
    ],
    [
      '10 pipelined on one connection, then gone',
      async (k) => {
        const socket = connect(port(), '127.0.0.1');
        socket.on('error', () => undefined);
        await new Promise((resolve) => socket.once('connect', resolve));
        socket.write(Array.from({ length: 10 }, () => `GET /job HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${k}\r\n\r\n`).join(''));
        await sleep(100);
        socket.destroy();
        await sleep(200);
      },
    ],
    [
      '6 WebSocket tunnels, closed after 200 ms',
      async (k) => {
        const sockets = Array.from({ length: 6 }, () => {
          const s = connect(port(), '127.0.0.1', () => s.write(ws('/ws', k)));
          s.on('error', () => undefined);
          return s;
        });
        await sleep(200);
        for (const s of sockets) s.destroy();
      },
    ],
    [
      '6 slow readers of a 16 MiB answer',
      (k) =>
        Promise.all(
          Array.from({ length: 6 }, async () => {
            const s = connect(port(), '127.0.0.1', () => s.write(`GET /big HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${k}\r\n\r\n`));
            s.on('error', () => undefined);
            s.pause();
            await sleep(800);
            s.destroy();
          }),
        ),
    ],
  ];

  it('no row runs more than the limit of one key’s jobs at once; the table shows each', async () => {
    const table: Array<Record<string, string | number>> = [];
    for (const [i, [name, run]] of variants.entries()) {
      const key = `k${i}`;
      await run(key);
      // Let every job the variant started run out.
      for (let t = 0; t < 300 && (up.now.get(key) ?? 0) > 0; t++) await sleep(10);
      const most = up.most.get(key) ?? 0;
      table.push({
        variant: name,
        'jobs started': up.started.get(key) ?? 0,
        'most at once': most,
        limit: LIMIT,
        ok: most <= LIMIT ? 'yes' : 'NO',
      });
    }
    console.log(`# concurrency attack suite (concurrency: ${LIMIT}, job ${JOB_MS} ms)`);
    console.table(table);
    for (const row of table) assert.ok(Number(row['most at once']) <= LIMIT, `${row.variant}: ${row['most at once']} at once`);
    assert.ok(Number(table[0]!['most at once']) === LIMIT, 'the control reaches the limit');
  });
});
