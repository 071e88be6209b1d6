// Gateway rules with concurrency (requests of one key in flight at once) and wait, through real gateways to a real upstream that counts
// what runs at once: memory, --workers 2 (cluster store) and two gateways on one real Redis; slots freed by every way a response ends.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ErrorCode } from '../../../src/core/errors.js';
import { ConfigError } from '../../../src/gateway/config/config-error.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get, leaveAfter, type Reply } from '../../http/support/http.js';
import { freePort, startRedis, type RedisServer } from '../../support/redis-server.js';
import { serveCli, sleep, startGateway, stopCli, writeTemp } from '../support/harness.js';

/** The test upstream: counts the requests of each key it is answering at once. */
interface Counting {
  url: string;
  server: Server;
  /** Requests of each key being answered now. */
  now: Map<string, number>;
  /** Most requests of one key answered at once, per key. */
  most: Map<string, number>;
  /** Most requests of all keys answered at once. */
  mostTotal: number;
  /** Requests that reached the upstream. */
  seen: number;
}

async function startCounting(): Promise<Counting> {
  const up: Counting = { url: '', server: undefined as unknown as Server, now: new Map(), most: new Map(), mostTotal: 0, seen: 0 };
  let total = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const key = String(req.headers['x-api-key'] ?? '-');
    up.seen += 1;
    const n = (up.now.get(key) ?? 0) + 1;
    up.now.set(key, n);
    up.most.set(key, Math.max(up.most.get(key) ?? 0, n));
    total += 1;
    up.mostTotal = Math.max(up.mostTotal, total);
    let done = false;
    const leave = (): void => {
      if (done) return;
      done = true;
      up.now.set(key, up.now.get(key)! - 1);
      total -= 1;
    };
    res.on('close', leave);
    const ms = Number(url.searchParams.get('ms') ?? 0);
    switch (url.pathname) {
      case '/fail':
        // The upstream drops the connection before any answer: the gateway answers 502.
        setTimeout(() => res.socket?.destroy(), ms);
        return;
      case '/hang':
        // Never answers: the gateway's headersTimeout answers 504.
        return;
      case '/big': {
        // A large body to a client that may not read it.
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(64 * 1024, 120);
        let left = Number(url.searchParams.get('mb') ?? 16) * 16;
        const pump = (): void => {
          while (left > 0) {
            left -= 1;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          res.end();
        };
        pump();
        return;
      }
      default:
        setTimeout(() => {
          leave();
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('ok');
        }, ms);
    }
  });
  // A WebSocket upstream: answers 101 and keeps the tunnel open until the client closes it.
  server.on('upgrade', (_req, socket: import('node:net').Socket) => {
    socket.on('error', () => socket.destroy());
    socket.on('end', () => socket.destroy());
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  up.server = server;
  return up;
}

function reset(up: Counting): void {
  up.now.clear();
  up.most.clear();
  up.mostTotal = 0;
  up.seen = 0;
}

const rule = (extra: string, policies = '["1000/1m"]'): string =>
  `rules:\n  - name: calls\n    key: header:x-api-key\n    policies: ${policies}\n${extra
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n')}\n`;

const keyed = (key: string, timeoutMs = 10_000) => ({ headers: { 'x-api-key': key }, timeoutMs });

/** The `ratelimit` field's remaining units. */
const remaining = (reply: Reply): number => Number(/r=(\d+)/.exec(String(reply.headers.ratelimit))?.[1]);

async function configError(yaml: string, field: RegExp, message: RegExp): Promise<void> {
  await assert.rejects(
    parseConfigText(yaml, 'test.yaml', {}),
    (e: unknown) => e instanceof ConfigError && e.code === ErrorCode.INVALID_CONFIG && field.test(e.field ?? '') && message.test(e.message),
  );
}

let up: Counting;
before(async () => {
  up = await startCounting();
});
after(async () => {
  up.server.closeAllConnections();
  await new Promise<void>((resolve) => up.server.close(() => resolve()));
});

describe('gateway concurrency: config', () => {
  it('concurrency and wait are checked with the field named and the fix said', async () => {
    const base = 'upstream: http://127.0.0.1:1\n';
    await configError(base + rule('concurrency: 0'), /concurrency/, /whole number from 1/);
    await configError(base + rule('concurrency: { ttl: 30s }'), /concurrency/, /needs a limit/);
    await configError(base + rule('concurrency: { limit: 2, ttl: 100ms }'), /concurrency\.ttl/, /from 1s to 1h/);
    await configError(base + rule('concurrency: { limit: 2, size: 3 }'), /concurrency/, /size/);
    await configError(base + rule('concurrency: 2\nshadow: true'), /concurrency/, /shadow rule only reports/);
    await configError(base + rule('wait: { maxQueue: 3 }'), /wait/, /needs a timeout/);
    await configError(base + rule('wait: { timeout: 2m }'), /wait\.timeout/, /at most 1m/);
    await configError(base + rule('wait: { timeout: 1s, maxQueue: 0 }'), /wait\.maxQueue/, /whole number from 1/);
    await configError(base + rule('wait: { timeout: 1s }', '["10/1s", "100/1m"]'), /wait/, /decided together, at once/);
    // With concurrency, several policies are fine: the request waits for a slot.
    await parseConfigText(base + rule('concurrency: 2\nwait: { timeout: 1s }', '["10/1s", "100/1m"]'), 'test.yaml', {});
  });

  it('regression: concurrency on a gateway without an upstream (decision endpoint only) is a config error, not a slot never freed', async () => {
    await configError(rule('concurrency: 2'), /rules\[0\]\.concurrency/, /needs an upstream: .*decision endpoint/);
  });
});

describe('gateway concurrency: memory store, one process', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway(
      `upstream: ${up.url}\nproxy: { headersTimeout: 300ms, clientWriteTimeout: 300ms }\n` + rule('concurrency: 3', '["100/1m"]'),
    );
  });
  after(async () => {
    await gw.shutdown();
  });

  it('12 requests of one key at once: never more than 3 at the upstream; the others 429 naming 3-in-flight, their units given back', async () => {
    reset(up);
    const replies = await Promise.all(Array.from({ length: 12 }, () => get(`${gw.url}/hold?ms=200`, keyed('a'))));
    const ok = replies.filter((r) => r.status === 200).length;
    const refused = replies.filter((r) => r.status === 429);
    assert.equal(up.most.get('a'), 3);
    assert.equal(ok, 3);
    assert.equal(refused.length, 9);
    for (const r of refused) assert.match(r.body, /3-in-flight/);
    // Only the 3 served requests spent units: the next request sees 100 − 3 − 1 left.
    assert.equal(remaining(await get(`${gw.url}/hold`, keyed('a'))), 96);
    // Other keys have slots of their own.
    assert.equal((await get(`${gw.url}/hold`, keyed('b'))).status, 200);
  });

  it('F4: a client that disconnects mid-response keeps its slot until the upstream has answered (its work goes on), then frees it', async () => {
    reset(up);
    await Promise.all([0, 1, 2].map(() => leaveAfter(`${gw.url}/hold?ms=800`, 100, { 'x-api-key': 'c' })));
    await sleep(20);
    const during = await get(`${gw.url}/hold`, keyed('c'));
    assert.equal(during.status, 429, 'the upstream still runs the three jobs whose clients left');
    await sleep(900);
    const reply = await get(`${gw.url}/hold`, keyed('c'));
    assert.equal(reply.status, 200, reply.body);
  });

  it('upstream failures free the slot: 502 (connection dropped) and 504 (no answer within headersTimeout)', async () => {
    reset(up);
    const failed = await Promise.all([0, 1, 2].map(() => get(`${gw.url}/fail?ms=20`, keyed('d'))));
    assert.deepEqual(
      failed.map((r) => r.status),
      [502, 502, 502],
    );
    assert.equal((await get(`${gw.url}/hold`, keyed('d'))).status, 200);
    const hung = await Promise.all([0, 1, 2].map(() => get(`${gw.url}/hang`, keyed('e'))));
    assert.deepEqual(
      hung.map((r) => r.status),
      [504, 504, 504],
    );
    assert.equal((await get(`${gw.url}/hold`, keyed('e'))).status, 200);
  });

  it('the attacker with many keys: 40 keys × 6 requests hold at most 3 slots each, and every slot is free once the responses end', async () => {
    reset(up);
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    const replies = await Promise.all(keys.flatMap((k) => Array.from({ length: 6 }, () => get(`${gw.url}/hold?ms=150`, keyed(k)))));
    const most = Math.max(...keys.map((k) => up.most.get(k) ?? 0));
    assert.equal(most, 3, 'no key above its limit');
    assert.ok(up.mostTotal <= 120, `${up.mostTotal} at the upstream at once (40 keys × 3)`);
    assert.equal(replies.filter((r) => r.status === 200).length, up.seen);
    // Every slot came back: a second round of 3 per key is admitted whole.
    const again = await Promise.all(keys.flatMap((k) => [0, 1, 2].map(() => get(`${gw.url}/hold?ms=20`, keyed(k)))));
    assert.ok(
      again.every((r) => r.status === 200),
      `${again.filter((r) => r.status !== 200).length} refused`,
    );
  });

  it('a slow client that stops reading holds its slot only until clientWriteTimeout (300 ms) cuts the response', async () => {
    reset(up);
    const started = Date.now();
    // Three clients that read the head of a 16 MB body and then stop reading.
    const stalled = [0, 1, 2].map(
      () =>
        new Promise<void>((resolve) => {
          const req = httpRequest(`${gw.url}/big?mb=16`, { headers: { 'x-api-key': 's' }, agent: false }, (res) => {
            res.pause();
            res.on('close', () => resolve());
            res.on('error', () => resolve());
          });
          req.on('error', () => resolve());
          req.end();
        }),
    );
    await sleep(50);
    assert.equal((await get(`${gw.url}/hold`, keyed('s'))).status, 429, 'the three stalled responses hold every slot');
    let freedAfter = -1;
    while (Date.now() - started < 5000) {
      if ((await get(`${gw.url}/hold`, keyed('s'))).status === 200) {
        freedAfter = Date.now() - started;
        break;
      }
      await sleep(25);
    }
    console.log(`# a stalled reader's slot came free ${freedAfter} ms after its request (clientWriteTimeout 300 ms)`);
    assert.ok(freedAfter >= 250 && freedAfter < 1500, `freed after ${freedAfter} ms`);
    await Promise.race([Promise.all(stalled), sleep(2000)]);
  });
});

describe('gateway concurrency: requests that are not proxied hold no slot', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway(
      `upstream: ${up.url}\nrules:\n` +
        '  - name: slots\n    key: header:x-api-key\n    policies: ["1000/1m"]\n    concurrency: 1\n' +
        '  - name: strict\n    match: { path: /strict/ }\n    key: header:x-api-key\n    policies: ["1/1m"]\n',
    );
  });
  after(async () => {
    await gw.shutdown();
  });

  it('regression: a request a later rule refuses gives back the slot an earlier rule took for it', async () => {
    assert.equal((await get(`${gw.url}/strict/a`, keyed('r'))).status, 200);
    assert.equal((await get(`${gw.url}/strict/a`, keyed('r'))).status, 429);
    assert.equal((await get(`${gw.url}/strict/a`, keyed('r'))).status, 429);
    // Had the refused requests kept their slot of rule "slots", this key would be refused for ever.
    assert.equal((await get(`${gw.url}/other`, keyed('r'))).status, 200);
  });

  it('a WebSocket tunnel holds its slot while it is open, and gives it back when it closes', async () => {
    const { port } = new URL(gw.url);
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    const head = new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(d.toString('latin1'))));
    socket.write(
      'GET /ws HTTP/1.1\r\nHost: x\r\nx-api-key: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    assert.match(await head, /^HTTP\/1\.1 101/);
    assert.equal((await get(`${gw.url}/hold`, keyed('t'))).status, 429, 'the open tunnel holds the only slot');
    socket.destroy();
    await sleep(50);
    assert.equal((await get(`${gw.url}/hold`, keyed('t'))).status, 200);
  });

  it('the decision endpoint applies the rule’s policies and frees the slot with its answer (it never sees the response)', async () => {
    const decide = { headers: { 'x-api-key': 'n', 'x-original-uri': '/x' } };
    for (let i = 0; i < 3; i += 1) assert.equal((await get(`${gw.url}/_floodgate/decide`, decide)).status, 204);
    assert.equal((await get(`${gw.url}/hold`, keyed('n'))).status, 200);
  });
});

describe('gateway concurrency with cost', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway(
      `upstream: ${up.url}\n` + rule('concurrency: 1\ncost: { estimate: 10, header: x-usage-tokens, missing: 10 }', '["1000/1m"]'),
    );
  });
  after(async () => {
    await gw.shutdown();
  });

  it('a rule with cost and concurrency holds one slot per request through its charge, freed when the response ends', async () => {
    reset(up);
    const both = await Promise.all([get(`${gw.url}/hold?ms=150`, keyed('m')), get(`${gw.url}/hold?ms=150`, keyed('m'))]);
    assert.deepEqual(both.map((r) => r.status).sort(), [200, 429]);
    assert.equal(up.most.get('m'), 1);
    // The slot came back with the response; the refused request's estimate went back too (1000 − 10 − 10 left after this one).
    const next = await get(`${gw.url}/hold`, keyed('m'));
    assert.equal(next.status, 200);
    assert.equal(remaining(next), 980);
  });
});

describe('gateway wait: bounded, FIFO, abandoned by a client that leaves', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway(
      `upstream: ${up.url}\n` +
        'rules:\n  - name: units\n    match: { path: /units/ }\n    final: true\n    key: header:x-api-key\n    policies: ["2/1s"]\n    wait: { timeout: 1500ms }\n' +
        rule('concurrency: 1\nwait: { timeout: 400ms, maxQueue: 3 }', '["100/1m"]').replace('rules:\n', ''),
    );
  });
  after(async () => {
    await gw.shutdown();
  });

  it('waiters behind a held slot: none waits past its timeout (400 ms), a full line refuses at once', async () => {
    reset(up);
    const holder = get(`${gw.url}/hold?ms=1500`, keyed('w'));
    await sleep(50);
    const waiters = [0, 1, 2].map(() => get(`${gw.url}/hold`, keyed('w')));
    await sleep(50);
    const full = await get(`${gw.url}/hold`, keyed('w'));
    assert.equal(full.status, 429);
    assert.ok(full.elapsedMs < 100, `a full line answered after ${full.elapsedMs} ms`);
    const replies = await Promise.all(waiters);
    const longest = Math.max(...replies.map((r) => r.elapsedMs));
    console.log(`# longest wait of a refused waiter: ${longest} ms (timeout 400 ms)`);
    assert.deepEqual(
      replies.map((r) => r.status),
      [429, 429, 429],
    );
    assert.ok(longest < 400 + 100, `a waiter was answered after ${longest} ms`);
    assert.equal((await holder).status, 200);
    // The refused waiters spent nothing: 100 − 1 (the holder) − 1 (this one).
    assert.equal(remaining(await get(`${gw.url}/hold`, keyed('w'))), 98);
  });

  it('a waiter is let in when the holder’s response ends, in arrival order', async () => {
    reset(up);
    const holder = get(`${gw.url}/hold?ms=150`, keyed('f'));
    await sleep(30);
    const first = get(`${gw.url}/hold?ms=100`, keyed('f'));
    await sleep(10);
    const second = get(`${gw.url}/hold?ms=10`, keyed('f'));
    const [h, a, b] = await Promise.all([holder, first, second]);
    assert.deepEqual([h.status, a.status], [200, 200]);
    // The second waited behind the first (150 ms + 100 ms), past its 400 ms only if the order broke.
    assert.equal(b.status, 200);
    assert.equal(up.most.get('f'), 1);
  });

  it('regression: a client that disconnects while waiting leaves the line at once: its place is free, nothing reaches the upstream, no unit is spent', async () => {
    reset(up);
    const holder = get(`${gw.url}/hold?ms=350`, keyed('x'));
    await sleep(30);
    // Fill the line (3), then the three leave after 50 ms.
    await Promise.all([0, 1, 2].map(() => leaveAfter(`${gw.url}/hold`, 50, { 'x-api-key': 'x' })));
    await sleep(10);
    // Their places are free again: this one waits instead of being refused at once, and gets the slot when the holder ends.
    const next = await get(`${gw.url}/hold`, keyed('x'));
    assert.equal(next.status, 200);
    assert.ok(next.elapsedMs > 150, `admitted after ${next.elapsedMs} ms (waited for the holder)`);
    assert.equal((await holder).status, 200);
    assert.equal(up.seen, 2, 'only the holder and the last request reached the upstream');
    // Units: the holder, the last waiter and this one: 100 − 3.
    assert.equal(remaining(await get(`${gw.url}/hold`, keyed('x'))), 97);
  });

  it('a rule with one policy and wait: requests wait for a unit instead of a 429, never past the timeout', async () => {
    reset(up);
    const replies = await Promise.all([0, 1, 2, 3].map(() => get(`${gw.url}/units/a`, keyed('u'))));
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200, 200, 200],
    );
    const longest = Math.max(...replies.map((r) => r.elapsedMs));
    console.log(`# longest wait for a unit: ${longest} ms (window 1 s, timeout 1500 ms)`);
    assert.ok(longest < 1500 + 100, `waited ${longest} ms`);
  });
});

describe('gateway concurrency across processes', { timeout: 120_000 }, () => {
  const yaml = (extra = ''): string => `upstream: ${up.url}\n${extra}` + rule('concurrency: 4', '["100000/1m"]');

  /** 24 requests of one key at once, over fresh connections to `urls` in turn. */
  async function burst(urls: readonly string[]): Promise<Reply[]> {
    return Promise.all(Array.from({ length: 24 }, (_, i) => get(`${urls[i % urls.length]}/hold?ms=250`, keyed('shared'))));
  }

  it('--workers 2 (cluster store): the limit of 4 is never exceeded at the upstream', async () => {
    reset(up);
    const port = await freePort();
    const cli = await serveCli(['--config', writeTemp('inflight.yaml', yaml()), '--workers', '2', '--listen', `127.0.0.1:${port}`]);
    try {
      await cli.waitForLog(() => cli.logs.filter((x) => x.msg === 'floodgate gateway listening' && x.worker !== undefined).length >= 2);
      const url = `http://127.0.0.1:${port}`;
      let most = 0;
      for (let round = 0; round < 3; round += 1) {
        reset(up);
        const replies = await burst([url]);
        most = Math.max(most, up.most.get('shared') ?? 0);
        const ok = replies.filter((r) => r.status === 200).length;
        assert.ok(ok >= 4, `${ok} admitted`);
        assert.equal(ok, up.seen);
      }
      console.log(`# most requests of one key at the upstream through --workers 2: ${most} (limit 4)`);
      assert.ok(most <= 4, `${most} at once`);
      const workers = new Set(cli.logs.filter((x) => x.msg === 'floodgate gateway listening').map((x) => x.worker));
      assert.ok(workers.size >= 2);
    } finally {
      await stopCli(cli);
    }
  });

  let redis: RedisServer | undefined;
  after(async () => {
    await redis?.stop();
  });

  it('two gateway processes on one real Redis: the limit of 4 is never exceeded at the upstream', async () => {
    redis = await startRedis();
    const config = writeTemp('inflight-redis.yaml', yaml(`store: { type: redis, url: "${redis.url}" }\n`));
    const [a, b] = await Promise.all([serveCli(['--config', config]), serveCli(['--config', config])]);
    try {
      let most = 0;
      for (let round = 0; round < 3; round += 1) {
        reset(up);
        const replies = await burst([a.url, b.url]);
        most = Math.max(most, up.most.get('shared') ?? 0);
        const ok = replies.filter((r) => r.status === 200).length;
        assert.ok(ok >= 4, `${ok} admitted`);
        assert.equal(ok, up.seen);
      }
      console.log(`# most requests of one key at the upstream through two gateways on Redis: ${most} (limit 4)`);
      assert.ok(most <= 4, `${most} at once`);
      assert.equal(most, 4);
    } finally {
      await Promise.all([stopCli(a), stopCli(b)]);
    }
  });
});
