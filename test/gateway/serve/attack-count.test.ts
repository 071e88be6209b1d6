// The login brute-force rule (count: { status: [401, 403] }) from the attacker's side: hang-ups, 50 parallel guesses, HEAD,
// upgrades, slow readers and keys named after someone else, through a real gateway to a real upstream that answers 401 for a
// wrong password. Each row prints the guesses the upstream saw against the limit; none may see more.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { get } from '../../http/support/http.js';
import { statusFrom } from '../support/from-address.js';
import { sleep, startGateway } from '../support/harness.js';
import { startRedis, type RedisServer } from '../../support/redis-server.js';

const LIMIT = 5;
const WS_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** A login upstream: the right password is `right`; every answer to a wrong one is 401 (after `?delay=ms`, with `?size=bytes` of body). */
interface LoginUpstream {
  url: string;
  /** Password checks seen, by the x-client header (or the address the gateway forwarded). */
  guesses: Map<string, number>;
  close(): Promise<void>;
}

async function startLogin(): Promise<LoginUpstream> {
  const guesses = new Map<string, number>();
  const seen = (req: IncomingMessage): void => {
    const who = String(req.headers['x-client'] ?? req.headers['x-forwarded-for'] ?? '?');
    guesses.set(who, (guesses.get(who) ?? 0) + 1);
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    seen(req);
    const delay = Number(url.searchParams.get('delay') ?? 0);
    const size = Number(url.searchParams.get('size') ?? 0);
    req.resume();
    setTimeout(() => {
      if (url.pathname === '/boom') return void res.writeHead(500).end('failed');
      if (req.headers['x-password'] === 'right') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('welcome');
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Basic' });
      res.end(size > 0 ? Buffer.alloc(size, 'x') : 'wrong password');
    }, delay);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    seen(req);
    socket.on('error', () => socket.destroy());
    socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\nConnection: close\r\n\r\ndenied');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    guesses,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** One guess from `client` (`password` wrong unless given); resolves with the status, or what the client did. */
function guess(
  base: string,
  client: string,
  o: { method?: string; path?: string; password?: string; leaveMs?: number } = {},
): Promise<string> {
  return new Promise((resolve) => {
    const req = httpRequest(`${base}${o.path ?? '/login'}`, {
      method: o.method ?? 'GET',
      headers: { 'x-client': client, 'x-password': o.password ?? 'guess' },
      agent: false,
    });
    req.on('error', () => resolve('error'));
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
      res.on('error', () => resolve('cut'));
    });
    req.end();
    if (o.leaveMs !== undefined)
      setTimeout(() => {
        req.destroy();
        resolve('left');
      }, o.leaveMs);
  });
}

/** A WebSocket handshake to /login from `client`; resolves with the status line's code. */
function upgrade(base: string, client: string): Promise<number> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
    socket.on('error', reject);
    socket.write(
      `GET /login HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${WS_KEY}\r\nx-client: ${client}\r\nx-password: guess\r\n\r\n`,
    );
  });
}

describe('attack: guessing passwords past a count: { status: [401, 403] } rule', () => {
  let login: LoginUpstream;
  let gw: Gateway;
  before(async () => {
    login = await startLogin();
    gw = await startGateway(`upstream: ${login.url}
proxy: { clientWriteTimeout: 400ms }
rules:
  - name: login
    match: { path: /login }
    key: header:x-client
    policies: [{ limit: ${LIMIT}, window: 1h }]
    count: { status: [401, 403] }
  - name: by-address
    match: { path: /by-address }
    key: ip
    policies: [{ limit: ${LIMIT}, window: 1h }]
    count: { status: [401] }
`);
  });
  after(async () => {
    await gw.shutdown();
    await login.close();
  });

  /** The units the rule holds for `key` now: failures counted plus answers still awaited. */
  const counted = async (key: string, rule = 0): Promise<number> => {
    const limiter = (gw as unknown as { rules: RuleSet }).rules.rules[rule]!.limiters[0]!;
    const d = await limiter.peek(key);
    return d.limit - d.remaining;
  };
  /** Waits until the count of `key` stops moving (settled when each upstream exchange ends). */
  const settled = async (key: string, rule = 0): Promise<number> => {
    let last = -1;
    for (let t = 0; t < 100; t++) {
      const now = await counted(key, rule);
      if (now === last) return now;
      last = now;
      await sleep(30);
    }
    return last;
  };
  const table: Array<Record<string, string | number>> = [];
  const row = (variant: string, upstreamSaw: number, countedNow: number, refused: string): void => {
    table.push({
      variant,
      'guesses at upstream': upstreamSaw,
      counted: countedNow,
      limit: LIMIT,
      refused,
      ok: upstreamSaw <= LIMIT ? 'yes' : 'NO',
    });
  };
  after(() => {
    console.log(`# login rule: count 401/403, limit ${LIMIT} per hour per key`);
    console.table(table);
  });

  it('a right password never counts; wrong ones are refused once the key reached the limit', async () => {
    for (let i = 0; i < 3 * LIMIT; i++) assert.equal(await guess(gw.url, 'honest', { password: 'right' }), '200');
    assert.equal(await settled('honest'), 0);
    const answers: string[] = [];
    for (let i = 0; i < LIMIT + 2; i++) answers.push(await guess(gw.url, 'wrong'));
    assert.deepEqual(answers, [...Array<string>(LIMIT).fill('401'), '429', '429']);
    assert.equal(login.guesses.get('wrong'), LIMIT);
    // A refused key is refused whatever it sends, a right password too: it is decided before forwarding.
    assert.equal(await guess(gw.url, 'wrong', { password: 'right' }), '429');
    row('one guess at a time', login.guesses.get('wrong')!, await settled('wrong'), '429 from guess 6');
  });

  it('hanging up before the answer: the 401 still counts (the answer is drained)', async () => {
    const seen: string[] = [];
    for (let i = 0; i < LIMIT + 3; i++) {
      seen.push(await guess(gw.url, 'hang-up', { path: '/login?delay=150', leaveMs: 40 }));
      await sleep(200);
    }
    const saw = login.guesses.get('hang-up') ?? 0;
    assert.equal(saw, LIMIT, `upstream saw ${saw} guesses from clients that hung up`);
    assert.equal(await settled('hang-up'), LIMIT);
    assert.equal(await guess(gw.url, 'hang-up'), '429');
    row('hang-up 40 ms in, answer after 150 ms', saw, await counted('hang-up'), 'every guess after the 5th');
  });

  it('50 parallel wrong passwords: the upstream checks at most the limit (each holds its unit until its 401)', async () => {
    const answers = await Promise.all(Array.from({ length: 50 }, () => guess(gw.url, 'parallel', { path: '/login?delay=100' })));
    const saw = login.guesses.get('parallel') ?? 0;
    assert.equal(saw, LIMIT, `upstream checked ${saw} of 50 parallel guesses`);
    assert.equal(answers.filter((a) => a === '401').length, LIMIT);
    assert.equal(answers.filter((a) => a === '429').length, 50 - LIMIT);
    assert.equal(await settled('parallel'), LIMIT);
    row('50 parallel guesses', saw, await counted('parallel'), `${50 - LIMIT} × 429`);
  });

  it('HEAD counts as GET: its 401 has no body, and is counted all the same', async () => {
    const answers: string[] = [];
    for (let i = 0; i < LIMIT + 1; i++) answers.push(await guess(gw.url, 'head', { method: i % 2 === 0 ? 'HEAD' : 'GET' }));
    assert.deepEqual(answers, [...Array<string>(LIMIT).fill('401'), '429']);
    assert.equal(login.guesses.get('head'), LIMIT);
    row('HEAD and GET in turn', login.guesses.get('head')!, await settled('head'), '429 from guess 6');
  });

  it('an upgrade request counts: its answer is not read, so its unit stays (fail-closed)', async () => {
    const codes: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) codes.push(await upgrade(gw.url, 'upgrade'));
    assert.equal(codes.filter((c) => c === 429).length, 2, `codes ${codes.join(' ')}`);
    assert.equal(login.guesses.get('upgrade'), LIMIT);
    row('WebSocket handshakes', login.guesses.get('upgrade')!, await settled('upgrade'), '429 from handshake 6');
  });

  it('slow readers of a large 401: the units are held while they read, and the 401s count when cut', async () => {
    // Five clients that read nothing of a 4 MB 401 (cut after proxy.clientWriteTimeout), then a sixth guess meanwhile.
    const sockets: Socket[] = [];
    const { port } = new URL(gw.url);
    for (let i = 0; i < LIMIT; i++) {
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause();
      socket.write('GET /login?size=4000000 HTTP/1.1\r\nHost: x\r\nx-client: slow\r\nx-password: guess\r\n\r\n');
      sockets.push(socket);
    }
    await sleep(150);
    assert.equal(await guess(gw.url, 'slow'), '429', 'a guess while five 401s are being read slowly');
    const saw = login.guesses.get('slow') ?? 0;
    assert.equal(saw, LIMIT);
    await sleep(600);
    for (const s of sockets) s.destroy();
    assert.equal(await settled('slow'), LIMIT);
    assert.equal(await guess(gw.url, 'slow'), '429');
    row('5 slow readers of a 4 MB 401, then a guess', saw, await counted('slow'), 'the 6th, while they read');
  });

  it('a key named after someone else: counts are the rule key’s; by address, a forged X-Forwarded-For or x-client spends nothing of the victim’s', async () => {
    // The header-keyed rule counts whatever key the client names: that is what keying a login rule by a client-chosen value means.
    for (let i = 0; i < LIMIT; i++) await guess(gw.url, 'alice');
    assert.equal(await guess(gw.url, 'alice', { password: 'right' }), '429', 'by header: a guess under alice’s name spends alice’s count');
    // Keyed by address: the attacker (127.0.0.3) names the victim (127.0.0.2) every way it can; the victim's count stays 0.
    const headers = { 'x-forwarded-for': '127.0.0.2', 'x-real-ip': '127.0.0.2', forwarded: 'for=127.0.0.2', 'x-client': '127.0.0.2' };
    const attacker: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) attacker.push(await statusFrom(gw.url, '127.0.0.3', headers, '/by-address'));
    assert.deepEqual(attacker, [...Array<number>(LIMIT).fill(401), 429, 429]);
    assert.equal(await settled('127.0.0.2', 1), 0);
    assert.equal(await statusFrom(gw.url, '127.0.0.2', { 'x-password': 'right' }, '/by-address'), 200);
    row('by address, forging the victim’s X-Forwarded-For', LIMIT, await counted('127.0.0.3', 1), 'the attacker only');
  });
});

describe('count on Redis: 50 parallel wrong passwords from two gateway processes on one Redis', () => {
  let login: LoginUpstream;
  let redis: RedisServer;
  const gateways: Gateway[] = [];
  before(async () => {
    [login, redis] = await Promise.all([startLogin(), startRedis()]);
    const yaml = `upstream: ${login.url}
store: { type: redis, url: "${redis.url}" }
rules:
  - name: login
    key: header:x-client
    policies: [{ limit: ${LIMIT}, window: 1h }]
    count: { status: [401] }
`;
    gateways.push(await startGateway(yaml), await startGateway(yaml));
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.shutdown()));
    await login.close();
    await redis.stop();
  });

  it('the upstream checks the limit and no more; good passwords of another key are not refused', async () => {
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => guess(gateways[i % 2]!.url, 'parallel', { path: '/login?delay=100' })),
    );
    assert.equal(login.guesses.get('parallel'), LIMIT);
    assert.equal(answers.filter((a) => a === '429').length, 50 - LIMIT);
    const honest: string[] = [];
    for (let i = 0; i < 20; i++) honest.push(await guess(gateways[i % 2]!.url, 'honest', { password: 'right' }));
    assert.ok(
      honest.every((a) => a === '200'),
      honest.join(' '),
    );
    // Given back once answered: the key that only logged in holds nothing.
    const limiter = (gateways[0] as unknown as { rules: RuleSet }).rules.rules[0]!.limiters[0]!;
    for (let t = 0; t < 50 && (await limiter.peek('honest')).remaining < LIMIT; t++) await sleep(20);
    assert.equal((await limiter.peek('honest')).remaining, LIMIT);
  });
});

describe('count: { status: [5xx] } counts the gateway’s own 502 and 504', () => {
  let login: LoginUpstream;
  let gw: Gateway;
  before(async () => {
    login = await startLogin();
    gw = await startGateway(`upstream: ${login.url}
proxy: { headersTimeout: 200ms }
rules:
  - name: circuit
    key: global
    policies: [{ limit: 3, window: 1h }]
    count: { status: [5xx] }
`);
  });
  after(async () => {
    await gw.shutdown();
    await login.close();
  });

  it('500 from the upstream and 504 from the gateway count; a 401 and a 200 do not', async () => {
    const limiter = (gw as unknown as { rules: RuleSet }).rules.rules[0]!.limiters[0]!;
    const used = async (): Promise<number> => {
      await sleep(50);
      const d = await limiter.peek('global');
      return d.limit - d.remaining;
    };
    assert.equal((await get(`${gw.url}/login`, { headers: { 'x-password': 'right' } })).status, 200);
    assert.equal((await get(`${gw.url}/login`)).status, 401);
    assert.equal(await used(), 0);
    assert.equal((await get(`${gw.url}/boom`)).status, 500);
    assert.equal(await used(), 1);
    assert.equal((await get(`${gw.url}/login?delay=1500`)).status, 504);
    assert.equal(await used(), 2);
    assert.equal((await get(`${gw.url}/boom`)).status, 500);
    assert.equal(await used(), 3);
    assert.equal((await get(`${gw.url}/login`, { headers: { 'x-password': 'right' } })).status, 429);
  });

  it('a client that leaves before an answer that never comes (504 after it left) keeps its unit: fail-closed', async () => {
    const own = await startGateway(`upstream: ${login.url}
proxy: { headersTimeout: 200ms }
rules:
  - name: logins
    key: header:x-client
    policies: [{ limit: 3, window: 1h }]
    count: { status: [401] }
`);
    try {
      const limiter = (own as unknown as { rules: RuleSet }).rules.rules[0]!.limiters[0]!;
      assert.equal(await guess(own.url, 'leaver', { path: '/login?delay=1500', leaveMs: 50 }), 'left');
      // The gateway's headers timeout (200 ms) ends the exchange; nobody received an answer, and no 504 was sent.
      await sleep(1200);
      assert.equal((await limiter.peek('leaver')).remaining, 2);
      // A 504 the client received is not a 401.
      assert.equal(await guess(own.url, 'stays', { path: '/login?delay=1500' }), '504');
      await sleep(50);
      assert.equal((await limiter.peek('stays')).remaining, 3);
    } finally {
      await own.shutdown();
    }
  });

  it('502 from the gateway (upstream unreachable) counts', async () => {
    // A port that was free a moment ago: nothing listens there.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const down = await startGateway(`upstream: http://127.0.0.1:${port}
rules:
  - name: circuit
    key: global
    policies: [{ limit: 2, window: 1h }]
    count: { status: [502, 503, 504] }
`);
    try {
      const seen: number[] = [];
      for (let i = 0; i < 4; i++) {
        seen.push((await get(`${down.url}/x`)).status);
        await sleep(30);
      }
      assert.deepEqual(seen, [502, 502, 429, 429]);
    } finally {
      await down.shutdown();
    }
  });
});
