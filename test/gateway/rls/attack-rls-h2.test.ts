// A hostile client against the rate limit service's HTTP/2 transport and codec: every attack pinned, named for what it tries (each one that broke was fixed and is a regression test now).
import assert from 'node:assert/strict';
import { connect as netConnect, type Socket } from 'node:net';
import { connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { after, describe, test } from 'node:test';
import { listenHttp2 } from '../../../src/gateway/rls/rls-http2.js';
import { listenGrpcJs } from '../../../src/gateway/rls/rls-grpcjs.js';
import { GrpcStatus, type Transport, type UnaryMethod } from '../../../src/gateway/rls/rls-transport.js';
import { startRedis } from '../../support/redis-server.js';
import { startRls, type RlsFixture } from '../support/rls-harness.js';
import { runCli, writeTemp } from '../support/harness.js';
import {
  addend,
  descriptor,
  entries,
  entry,
  F,
  GRPC_HEAD,
  h2frame,
  HEALTH,
  hpack,
  len,
  limitOf,
  rawPeer,
  readResponse,
  request,
  SHOULD,
  tag,
  varint,
  frame,
} from '../support/rls-raw-h2.js';
import { dirname, join } from 'node:path';
import { writeFileSync } from 'node:fs';

/** Anything a request made the process throw or reject without a handler: every attack must leave this empty. */
const unhandled: unknown[] = [];
process.on('unhandledRejection', (e) => unhandled.push(e));
process.on('uncaughtExceptionMonitor', (e) => unhandled.push(e));

const ECHO = '/test.Echo/Echo';
const SLOW = '/test.Echo/Slow';
let calls = 0;
const held: Array<() => void> = [];
const methods = new Map<string, UnaryMethod>([
  [
    ECHO,
    (request, reply) => {
      calls += 1;
      reply(null, request);
    },
  ],
  [
    SLOW,
    (request, reply) => {
      calls += 1;
      held.push(() => reply(null, request));
    },
  ],
]);

const transports: Transport[] = [];
const sessions: ClientHttp2Session[] = [];
const sockets: Socket[] = [];
after(async () => {
  for (const release of held.splice(0)) release();
  for (const s of sessions) s.destroy();
  for (const s of sockets) s.destroy();
  for (const t of transports) await t.close(100);
  assert.deepEqual(unhandled, [], 'no unhandled rejection or exception');
});

async function start(kind: 'http2' | 'grpc-js' = 'http2', requestReadMs?: number, maxMessageBytes = 1024): Promise<Transport> {
  const listen = kind === 'http2' ? listenHttp2 : listenGrpcJs;
  const t = await listen({ host: '127.0.0.1', port: 0, tls: undefined, maxMessageBytes, methods, requestReadMs });
  transports.push(t);
  return t;
}

function session(t: Transport, options: Parameters<typeof connect>[1] = {}): ClientHttp2Session {
  const s = connect(`http://127.0.0.1:${t.port}`, options);
  s.on('error', () => {});
  sessions.push(s);
  return s;
}

interface Answer {
  status?: number;
  message?: string;
  data: Buffer;
  rst?: number;
  closed: boolean;
}

/** One call: the body written, then ended unless `end` is false; resolves when the stream closes or after `waitMs`. */
function call(
  s: ClientHttp2Session,
  body: Buffer,
  o: { path?: string; headers?: Record<string, string>; end?: boolean; waitMs?: number } = {},
): Promise<Answer> {
  const stream = s.request({
    ':method': 'POST',
    ':path': o.path ?? ECHO,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...o.headers,
  });
  const a: Answer = { data: Buffer.alloc(0), closed: false };
  let head: IncomingHttpHeaders = {};
  let trailers: IncomingHttpHeaders = {};
  stream.on('response', (h) => (head = h));
  stream.on('trailers', (t) => (trailers = t));
  stream.on('data', (d: Buffer) => (a.data = Buffer.concat([a.data, d])));
  stream.on('error', () => {});
  if (o.end === false) stream.write(body);
  else stream.end(body);
  return new Promise((resolve) => {
    const timer = o.waitMs === undefined ? undefined : setTimeout(() => resolve(a), o.waitMs);
    stream.on('close', () => {
      clearTimeout(timer);
      a.closed = true;
      if (stream.rstCode !== constants.NGHTTP2_NO_ERROR) a.rst = stream.rstCode;
      const src = trailers['grpc-status'] !== undefined ? trailers : head;
      if (src['grpc-status'] !== undefined) a.status = Number(src['grpc-status']);
      if (src['grpc-message'] !== undefined) a.message = decodeURIComponent(String(src['grpc-message']));
      resolve(a);
    });
  });
}

// ---------------------------------------------------------------------------------------------------------------
/** Whether a fresh connection gets a call answered within `ms`. */
async function serves(t: Transport, ms = 2_000): Promise<boolean> {
  const s = session(t);
  const a = await call(s, frame(Buffer.from('alive')), { waitMs: ms });
  s.destroy();
  return a.status === GrpcStatus.OK;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('HTTP/2-level abuse of the lean transport', () => {
  test('rapid reset (CVE-2023-44487): 20 000 streams opened with a whole request and reset at once cost no unbounded work', async (t2) => {
    const t = await start();
    const before = calls;
    const peer = await rawPeer(t.port, sockets);
    const body = frame(Buffer.from('x'));
    const block = hpack(GRPC_HEAD(ECHO));
    const started = Date.now();
    let id = 1;
    for (let burst = 0; burst < 20 && !peer.isClosed; burst++) {
      const out: Buffer[] = [];
      for (let i = 0; i < 1_000; i++, id += 2)
        out.push(
          h2frame(F.HEADERS, 0x4, id, block),
          h2frame(F.DATA, 0x1, id, body),
          h2frame(F.RST_STREAM, 0, id, Buffer.from([0, 0, 0, 8])),
        );
      peer.send(Buffer.concat(out));
      await sleep(1);
    }
    await Promise.race([peer.closed, sleep(1_500)]);
    const spent = calls - before;
    t2.diagnostic(`rapid reset: ${spent} method calls, GOAWAY ${String(peer.goaway)}, ${Date.now() - started} ms`);
    // nghttp2 answers a reset flood with GOAWAY (ENHANCE_YOUR_CALM) and the server goes on serving others.
    assert.ok(peer.goaway !== undefined || spent <= 20_000, `goaway ${peer.goaway}, method calls ${spent}`);
    assert.ok(await serves(t), 'a new connection is served');
    assert.ok(Date.now() - started < 8_000);
  });

  test('more streams than SETTINGS_MAX_CONCURRENT_STREAMS (1 000) from a peer that ignores it are refused, not queued', async (t2) => {
    const t = await start();
    const before = calls;
    const peer = await rawPeer(t.port, sockets);
    const block = hpack(GRPC_HEAD(SLOW));
    const out: Buffer[] = [];
    // 1 200 requests, all ended, all held by the slow method: past 1 000 the server must refuse the stream.
    for (let i = 0, id = 1; i < 1_200; i++, id += 2)
      out.push(h2frame(F.HEADERS, 0x4, id, block), h2frame(F.DATA, 0x1, id, frame(Buffer.from('s'))));
    peer.send(Buffer.concat(out));
    await Promise.race([peer.closed, sleep(1_000)]);
    const reached = calls - before;
    t2.diagnostic(`1 200 streams on one connection: ${reached} reached the method, GOAWAY ${String(peer.goaway)}`);
    assert.ok(reached <= 1_000, `the method was reached ${reached} times on one connection`);
    for (const release of held.splice(0)) release();
    assert.ok(await serves(t));
  });

  test('PING and SETTINGS floods from a peer that never reads are cut, not buffered without bound', async () => {
    const t = await start();
    const peer = await rawPeer(t.port, sockets);
    peer.socket.pause(); // never reads the PING ACKs
    const ping = h2frame(F.PING, 0, 0, Buffer.alloc(8));
    const settings = h2frame(F.SETTINGS, 0, 0);
    const flood = Buffer.concat(Array.from({ length: 5_000 }, (_, i) => (i % 2 === 0 ? ping : settings)));
    for (let i = 0; i < 40 && !peer.isClosed; i++) {
      peer.send(flood);
      await sleep(5);
    }
    await Promise.race([peer.closed, sleep(2_000)]);
    assert.ok(peer.isClosed, 'the flooding connection is closed');
    assert.ok(await serves(t));
  });

  test('CONTINUATION flood: a header block that never ends is cut (CVE-2024-27983 class), the server serves on', async () => {
    const t = await start();
    const peer = await rawPeer(t.port, sockets);
    peer.send(h2frame(F.HEADERS, 0, 1, hpack(GRPC_HEAD(ECHO))));
    const cont = h2frame(F.CONTINUATION, 0, 1, hpack([['x-pad', 'a'.repeat(1_000)]]));
    for (let i = 0; i < 2_000 && !peer.isClosed; i++) {
      peer.send(cont);
      if (i % 100 === 0) await sleep(1);
    }
    await Promise.race([peer.closed, sleep(2_000)]);
    assert.ok(peer.isClosed || peer.goaway !== undefined, 'the connection is closed');
    assert.ok(await serves(t));
  });

  test('a huge header list (2 000 headers, 64 KiB values) is refused on its stream or connection, the server serves on', async () => {
    const t = await start();
    const s = session(t, { maxSendHeaderBlockLength: 1 << 24, maxHeaderListPairs: 100_000 } as never);
    const headers: Record<string, string> = {};
    for (let i = 0; i < 2_000; i++) headers[`x-h${i}`] = 'v';
    const a = await call(s, frame(Buffer.from('x')), { headers, waitMs: 2_000 });
    assert.notEqual(a.status, GrpcStatus.OK);
    const b = await call(session(t), frame(Buffer.from('x')), { headers: { 'x-big': 'b'.repeat(64 * 1024) }, waitMs: 2_000 });
    assert.notEqual(b.status, GrpcStatus.OK);
    assert.ok(await serves(t));
  });

  test('a client that opens 300 calls with a zero receive window and never reads leaves the server serving others', async () => {
    const t = await start();
    const s = session(t, { settings: { initialWindowSize: 0 } });
    const pending = Array.from({ length: 300 }, () => call(s, frame(Buffer.from('y'.repeat(100))), { waitMs: 500 }));
    await Promise.all(pending);
    assert.ok(await serves(t));
    s.destroy();
  });

  test('HTTP/1.1, a TLS ClientHello and an h2c Upgrade on the plaintext port: each connection is closed, none crashes the server', async () => {
    const t = await start();
    const http1 = 'POST /test.Echo/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\nContent-Length: 6\r\n\r\n\0\0\0\0\x01x';
    const upgrade =
      'GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n';
    // A TLS 1.2 ClientHello record head: the server must not read it as an HTTP/2 preface.
    const hello = Buffer.from('16030100a5010000a10303' + '00'.repeat(32) + '000002c02f01000076', 'hex');
    for (const bytes of [Buffer.from(http1), Buffer.from(upgrade), hello]) {
      const socket = netConnect(t.port, '127.0.0.1');
      sockets.push(socket);
      socket.on('error', () => {});
      socket.on('data', () => {});
      socket.write(bytes);
      await Promise.race([new Promise((r) => socket.once('close', r)), sleep(2_000)]);
      assert.ok(socket.destroyed || socket.readableEnded, `closed after ${JSON.stringify(bytes.subarray(0, 16).toString('latin1'))}`);
    }
    assert.ok(await serves(t));
  });
  test('a connection that never sends the HTTP/2 preface (or nothing after it) is closed', async () => {
    const t = await start('http2', 300);
    const silent = await rawPeer(t.port, sockets); // preface and SETTINGS sent, then nothing
    const mute = netConnect(t.port, '127.0.0.1'); // nothing at all
    sockets.push(mute);
    mute.on('error', () => {});
    // Read (and drop) what the server sends: a socket that is never read never sees the server close it.
    mute.resume();
    const muteClosed = new Promise<void>((r) => mute.once('close', () => r()));
    await Promise.race([Promise.all([silent.closed, muteClosed]), sleep(1_500)]);
    assert.ok(
      silent.isClosed && mute.destroyed,
      `after 1.5 s (read limit 300 ms): silent closed ${silent.isClosed}, mute closed ${mute.destroyed}`,
    );
  });
});

describe('deadlines and half-open calls', () => {
  test('grpc-timeout 0n, 0S and 1n are DEADLINE_EXCEEDED at once; 99999999H is a normal call', async () => {
    const t = await start();
    const s = session(t);
    for (const v of ['0n', '0S', '1n']) {
      const a = await call(s, frame(Buffer.from('x')), { path: SLOW, headers: { 'grpc-timeout': v }, waitMs: 1_000 });
      assert.equal(a.status, GrpcStatus.DEADLINE_EXCEEDED, v);
    }
    for (const release of held.splice(0)) release();
    assert.equal((await call(s, frame(Buffer.from('x')), { headers: { 'grpc-timeout': '99999999H' } })).status, GrpcStatus.OK);
  });

  test('a trickle of one byte per 40 ms is cut at the read limit when it has no grpc-timeout, at its deadline when it has one', async () => {
    const t = await start('http2', 300);
    for (const timeout of [undefined, '200m']) {
      const s = session(t);
      const headers = timeout === undefined ? {} : { 'grpc-timeout': timeout };
      const stream = s.request({ ':method': 'POST', ':path': ECHO, 'content-type': 'application/grpc', ...headers });
      stream.on('error', () => {});
      let status: string | undefined;
      stream.on('response', (h) => (status = String(h['grpc-status'])));
      const started = Date.now();
      const bytes = frame(Buffer.alloc(200));
      for (let i = 0; i < bytes.length && !stream.closed && !stream.destroyed; i++) {
        stream.write(bytes.subarray(i, i + 1));
        await sleep(40);
      }
      const took = Date.now() - started;
      assert.equal(status, String(timeout === undefined ? GrpcStatus.CANCELLED : GrpcStatus.DEADLINE_EXCEEDED));
      assert.ok(took < 1_500, `cut after ${took} ms`);
    }
  });

  test('a whole message on a stream that never ends (no END_STREAM, no grpc-timeout) is cut at the read limit', async () => {
    const t = await start('http2', 300, 256 * 1024);
    const s = session(t);
    const body = frame(Buffer.alloc(256 * 1024 - 5));
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 50 }, () => call(s, body, { end: false, waitMs: 1_500 })));
    const open = answers.filter((a) => !a.closed).length;
    assert.equal(open, 0, `${open} of 50 calls (256 KiB each held) still open after ${Date.now() - started} ms; read limit 300 ms`);
  });

  test('a trickling client that sends grpc-timeout 99999999H is still cut at the read limit', async () => {
    const t = await start('http2', 300);
    const a = await call(session(t), frame(Buffer.from('abcdef')).subarray(0, 7), {
      headers: { 'grpc-timeout': '99999999H' },
      end: false,
      waitMs: 1_000,
    });
    assert.equal(a.status, GrpcStatus.CANCELLED);
  });

  test('grpc-js holds a half-open unary call the same way (no deadline: it waits for the end of the stream)', async () => {
    const t = await start('grpc-js', 300);
    const a = await call(session(t), frame(Buffer.from('x')), { end: false, waitMs: 800 });
    assert.equal(a.closed, false);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// The real service: protobuf lies, keys, health, and a stopped Redis.

const RLS_CONFIG = `
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
    descriptors:
      - key: tier
        rate_limit: { unit: hour, requests_per_unit: 5 }
`;

describe('the real service: codec lies and keys', () => {
  let f: RlsFixture;
  let s: ClientHttp2Session;
  const should = async (body: Buffer): Promise<Answer> => call(s, frame(body), { path: SHOULD, waitMs: 3_000 });
  test('start', async () => {
    f = await startRls(RLS_CONFIG);
    s = connect(`http://${f.rls.address}`);
    s.on('error', () => {});
    sessions.push(s);
  });
  after(() => f?.stop());

  test('hits_addend at 2^53 and 2^64 - 1 is refused (UNKNOWN) and counts nothing; at 2^53 - 1 it is over, not a crash', async () => {
    const d = (n: bigint): Buffer => descriptor(entries(entry('user', 'big')), addend(n));
    for (const n of [2n ** 53n, 2n ** 64n - 1n]) assert.equal((await should(request('edge', d(n)))).status, GrpcStatus.UNKNOWN, String(n));
    const a = await should(request('edge', d(2n ** 53n - 1n)));
    assert.equal(a.status, GrpcStatus.OK);
    assert.equal(readResponse(a.data).overall, 2);
    // Nothing was spent by any of them.
    assert.deepEqual(readResponse((await should(request('edge', descriptor(entries(entry('user', 'big')))))).data).remaining, [4]);
  });

  test('the request-level hits_addend at 2^32 - 1 and a varint past 64 bits are answered, not thrown', async () => {
    const a = await should(Buffer.concat([request('edge', descriptor(entries(entry('user', 'u32')))), tag(3, 0), varint(2 ** 32 - 1)]));
    assert.equal(readResponse(a.data).overall, 2);
    const eleven = Buffer.concat([tag(3, 0), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])]);
    assert.equal(
      (await should(Buffer.concat([request('edge', descriptor(entries(entry('user', 'v')))), eleven]))).status,
      GrpcStatus.UNKNOWN,
    );
  });

  test('wire types 3/4 (groups), 6, 7, field 0, lengths past the end and nested lengths that lie are UNKNOWN', async () => {
    const ok = descriptor(entries(entry('user', 'w')));
    const bad = [
      Buffer.concat([ok, tag(9, 3), tag(9, 4)]),
      Buffer.concat([ok, Buffer.from([(9 << 3) | 6])]),
      Buffer.concat([ok, Buffer.from([(9 << 3) | 7])]),
      Buffer.concat([ok, Buffer.from([0x00, 0x01])]),
      Buffer.concat([tag(2, 2), varint(200), entries(entry('user', 'w'))]),
      // An entry whose declared length runs past its descriptor's end.
      Buffer.concat([tag(2, 2), varint(4), tag(1, 2), varint(50), Buffer.from('ab')]),
      Buffer.concat([len(1, Buffer.from([0xc3, 0x28]))]),
    ];
    for (const [i, b] of bad.entries())
      assert.equal((await should(Buffer.concat([len(1, 'edge'), b]))).status, GrpcStatus.UNKNOWN, `case ${i}`);
  });

  test('20 000 nested unknown length-delimited fields are skipped flat, not recursed (no stack overflow)', async () => {
    // Each level is its prefix then the level inside: the prefixes, outermost first, are the whole thing.
    const prefixes: Buffer[] = [];
    let inner = 0;
    for (let i = 0; i < 20_000; i++) {
      const p = Buffer.concat([tag(15, 2), varint(inner)]);
      prefixes.push(p);
      inner += p.length;
    }
    const nested = Buffer.concat(prefixes.reverse());
    const a = await should(request('edge', descriptor(entries(entry('user', 'deep')), nested)));
    assert.equal(a.status, GrpcStatus.OK);
  });

  test('a value that is not UTF-8 is UNKNOWN; 1 024 three-byte characters pass, 1 025 and 1 024 astral ones (UTF-16 2 048) do not', async () => {
    assert.equal((await should(request('edge', descriptor(entries(entry('user', Buffer.from([0xff, 0xfe]))))))).status, GrpcStatus.UNKNOWN);
    assert.equal((await should(request('edge', descriptor(entries(entry('user', '€'.repeat(1_024))))))).status, GrpcStatus.OK);
    assert.equal((await should(request('edge', descriptor(entries(entry('user', '€'.repeat(1_025))))))).status, GrpcStatus.UNKNOWN);
    assert.equal((await should(request('edge', descriptor(entries(entry('user', '😀'.repeat(1_024))))))).status, GrpcStatus.UNKNOWN);
    assert.equal((await should(request('edge', descriptor(entries(entry('user', '😀'.repeat(512))))))).status, GrpcStatus.OK);
  });

  test('a limit sent twice merges field by field (proto3): requests_per_unit from one, unit from the other', async () => {
    const d = descriptor(
      entries(entry('user', 'merge')),
      len(2, Buffer.concat([tag(1, 0), varint(2)])),
      len(2, Buffer.concat([tag(2, 0), varint(3)])),
    );
    const remaining = [];
    for (let i = 0; i < 3; i++) remaining.push(readResponse((await should(request('edge', d))).data));
    assert.deepEqual(
      remaining.map((r) => r.overall),
      [1, 1, 2],
    );
  });

  test('override units 0 and 7 (WEEK is not a RateLimitUnit) are refused; 2^32 + 2 is unit 2 as grpc-go reads it; requests_per_unit 0 is over', async () => {
    for (const unit of [0, 7])
      assert.equal(
        (await should(request('edge', descriptor(entries(entry('user', 'o')), limitOf(1, unit))))).status,
        GrpcStatus.UNKNOWN,
        String(unit),
      );
    // An enum is the varint's low 32 bits (protobufjs and Go alike): 2^32 + 2 is MINUTE.
    const wide = await should(request('edge', descriptor(entries(entry('user', 'wide-unit')), limitOf(1, 2 ** 32 + 2))));
    assert.equal(wide.status, GrpcStatus.OK);
    assert.deepEqual(readResponse(wide.data), { overall: 1, remaining: [0] });
    const zero = await should(request('edge', descriptor(entries(entry('user', 'zero')), limitOf(0, 2))));
    assert.equal(zero.status, GrpcStatus.OK);
    assert.equal(readResponse(zero.data).overall, 2);
  });

  test("1 200 made-up overrides evict the victim's override limiter, not its count", async () => {
    const victim = descriptor(entries(entry('user', 'victim')), limitOf(2, 3));
    for (let i = 0; i < 2; i++) await should(request('edge', victim));
    for (let i = 0; i < 1_200; i += 60)
      await Promise.all(
        Array.from({ length: 60 }, (_, j) => should(request('edge', descriptor(entries(entry('user', 'flood')), limitOf(100 + i + j, 3))))),
      );
    assert.deepEqual(readResponse((await should(request('edge', victim))).data), { overall: 2, remaining: [0] });
  });

  test('a client hanging up at every point of a call (head, prefix, mid-message, whole, ended) leaves nothing behind', async () => {
    const whole = frame(request('edge', descriptor(entries(entry('user', 'hangup')))));
    const cuts = [0, 3, 5, 12, whole.length, -1];
    const s2 = connect(`http://${f.rls.address}`);
    s2.on('error', () => {});
    sessions.push(s2);
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        cuts.map(async (cut) => {
          const st = s2.request({ ':method': 'POST', ':path': SHOULD, 'content-type': 'application/grpc' });
          st.on('error', () => {});
          st.resume(); // an answer left unread would hold back 'close'
          const closed = new Promise((r) => st.once('close', r));
          if (cut === -1) st.end(whole);
          else st.write(whole.subarray(0, cut));
          await sleep(round % 3);
          st.close(constants.NGHTTP2_CANCEL);
          await closed;
        }),
      );
    }
    // Nothing spent past what the whole calls could spend, and the service answers on the same connection.
    const a = await call(s2, whole, { path: SHOULD, waitMs: 2_000 });
    assert.equal(a.status, GrpcStatus.OK);
  });

  test('65 descriptors are refused; 64 × 32 entries with 1 024-character values are decided within a second', async () => {
    const one = descriptor(entries(entry('user', 'x')));
    assert.equal((await should(request('edge', ...Array.from({ length: 65 }, () => one)))).status, GrpcStatus.UNKNOWN);
    const wide = descriptor(entries(...Array.from({ length: 32 }, (_, j) => entry(`k${j}`, 'v'.repeat(100)))));
    const body = request('edge', ...Array.from({ length: 64 }, () => wide));
    assert.ok(body.length < 256 * 1024, `${body.length} bytes`);
    const started = Date.now();
    assert.equal((await should(body)).status, GrpcStatus.OK);
    assert.ok(Date.now() - started < 1_000);
  });

  test('a value holding the separators (".tier_") reaches no other descriptor\'s configured counter', async () => {
    // user=eve.tier_gold is one entry; user=eve + tier=gold is two: different limits in the config, so different counters.
    for (let i = 0; i < 5; i++) await should(request('edge', descriptor(entries(entry('user', 'eve.tier_gold')))));
    const victim = readResponse((await should(request('edge', descriptor(entries(entry('user', 'eve'), entry('tier', 'gold')))))).data);
    assert.deepEqual(victim, { overall: 1, remaining: [4] });
  });

  test("a value holding the separators spends another descriptor's counter under the same Envoy limit override", async () => {
    const limit = limitOf(3, 3); // 3 an hour, Envoy's own
    // The attacker's one-entry descriptor is named user_mallory.tier_gold...
    for (let i = 0; i < 3; i++) await should(request('edge', descriptor(entries(entry('user', 'mallory.tier_gold')), limit)));
    // ...which is the name of the victim's two-entry descriptor: its quota is gone.
    const victim = readResponse(
      (await should(request('edge', descriptor(entries(entry('user', 'mallory'), entry('tier', 'gold')), limit)))).data,
    );
    assert.deepEqual(victim, { overall: 1, remaining: [2] });
  });

  test('countRefused: 64 descriptors naming one counter with hits_addend 2^53 - 1 are refused or over, not an internal error', async () => {
    const g = await startRls(RLS_CONFIG, 'rules: []\n', undefined, { countRefused: true });
    try {
      const s2 = connect(`http://${g.rls.address}`);
      s2.on('error', () => {});
      sessions.push(s2);
      const flood = request(
        'edge',
        ...Array.from({ length: 64 }, () => descriptor(entries(entry('user', 'summed')), addend(2n ** 53n - 1n))),
      );
      const a = await call(s2, frame(flood), { path: SHOULD, waitMs: 3_000 });
      assert.notEqual(a.status, GrpcStatus.INTERNAL, a.message);
      assert.deepEqual(
        g.logs.filter((l) => l.msg === 'internal error while deciding a rate limit request').length,
        0,
        'no internal error logged',
      );
    } finally {
      await g.stop();
    }
  });

  test('health: Check with garbage is INVALID_ARGUMENT, an unknown service NOT_FOUND, Watch UNIMPLEMENTED; the service serves on', async () => {
    assert.equal((await call(s, frame(Buffer.from([0x0a, 0x7f])), { path: HEALTH, waitMs: 2_000 })).status, GrpcStatus.INVALID_ARGUMENT);
    assert.equal((await call(s, frame(len(1, Buffer.from([0xff]))), { path: HEALTH, waitMs: 2_000 })).status, GrpcStatus.INVALID_ARGUMENT);
    assert.equal((await call(s, frame(len(1, 'nope')), { path: HEALTH, waitMs: 2_000 })).status, GrpcStatus.NOT_FOUND);
    assert.equal(
      (await call(s, frame(Buffer.alloc(0)), { path: '/grpc.health.v1.Health/Watch', waitMs: 2_000 })).status,
      GrpcStatus.UNIMPLEMENTED,
    );
    const ok = await call(s, frame(Buffer.alloc(0)), { path: HEALTH, waitMs: 2_000 });
    assert.equal(ok.status, GrpcStatus.OK);
    assert.deepEqual(ok.data, frame(Buffer.from([0x08, 0x01])));
  });
});

describe('what reaches the answer', () => {
  test('serve --grpc with headers and exposeLimitNames: an override whose entry key is not ASCII is answered, and the process lives', async () => {
    const gatewayFile = writeTemp(
      'floodgate.yaml',
      'grpc:\n  listen: 127.0.0.1:0\n  config: ./ratelimit.yaml\n  headers: ietf\n  exposeLimitNames: true\n',
    );
    writeFileSync(join(dirname(gatewayFile), 'ratelimit.yaml'), RLS_CONFIG);
    const cli = runCli(['serve', '--config', gatewayFile, '--listen', '127.0.0.1:0']);
    try {
      const line = await cli.waitForLog((l) => l.msg === 'floodgate rls listening');
      const s = connect(`http://${String(line.grpc)}`);
      s.on('error', () => {});
      sessions.push(s);
      const a = await call(s, frame(request('edge', descriptor(entries(entry('ü', 'x')), limitOf(5, 3)))), {
        path: SHOULD,
        headers: { 'grpc-timeout': '2S' },
        waitMs: 3_000,
      });
      await sleep(200);
      assert.equal(cli.child.exitCode, null, `the process exited: ${cli.stderr().slice(0, 300)}`);
      assert.equal(a.status, GrpcStatus.OK, 'answered, its policy name percent-encoded (edge.%C3%BC)');
      assert.ok(a.data.includes(Buffer.from('edge.%C3%BC')), 'the RateLimit field names the limit in printable ASCII');
    } finally {
      cli.child.kill('SIGKILL');
      await cli.exited;
    }
  });
});

describe('a stopped Redis', () => {
  for (const policy of ['fail-open', 'insurance'] as const)
    test(`quotaMode on Redis (${policy}): 64 descriptors of hits_addend 2^53 - 1 drive one counter past 2^63, and the store failure unlimits everyone`, async () => {
      const redis = await startRedis();
      let f: RlsFixture | undefined;
      try {
        f = await startRls(
          RLS_CONFIG,
          `rules: []\nstore: { type: redis, url: "${redis.url}", onFailure: ${policy}, timeout: 500ms, prefix: "fg:overflow" }\n`,
          undefined,
          { quotaMode: true },
        );
        const s = connect(`http://${f.rls.address}`);
        s.on('error', () => {});
        sessions.push(s);
        const send = async (body: Buffer): Promise<Answer> => call(s, frame(body), { path: SHOULD, waitMs: 3_000 });
        const victim = request('edge', descriptor(entries(entry('user', 'victim'))));
        for (let i = 0; i < 6; i++) await send(victim);
        assert.equal(readResponse((await send(victim)).data).overall, 2, 'the victim is over its limit');
        // Quota descriptors are counted one by one, past their limit: 64 × (2^53 - 1) a request.
        const flood = request(
          'edge',
          ...Array.from({ length: 64 }, () => descriptor(entries(entry('user', 'mallory')), addend(2n ** 53n - 1n))),
        );
        for (let i = 0; i < 20; i++) await send(flood);
        const m = await send(request('edge', descriptor(entries(entry('user', 'mallory')))));
        const v = await send(victim);
        const overall = (a: Answer): number => (a.status === GrpcStatus.OK ? readResponse(a.data).overall : -(a.status ?? 99));
        assert.deepEqual({ mallory: overall(m), victim: overall(v) }, { mallory: 2, victim: 2 }, 'both are still over (2)');
      } finally {
        await f?.stop();
        await redis.stop();
      }
    });

  test('calls in flight on a SIGSTOPped redis-server: deadlines answer, hang-ups write nothing, and all is well after SIGCONT', async () => {
    const redis = await startRedis();
    let f: RlsFixture | undefined;
    try {
      f = await startRls(
        RLS_CONFIG,
        `rules: []\nstore: { type: redis, url: "${redis.url}", onFailure: reject, timeout: 300ms, prefix: "fg:h2" }\n`,
      );
      const s = connect(`http://${f.rls.address}`);
      s.on('error', () => {});
      sessions.push(s);
      const body = frame(request('edge', descriptor(entries(entry('user', 'stopped')))));
      assert.equal((await call(s, body, { path: SHOULD, waitMs: 3_000 })).status, GrpcStatus.OK);
      redis.pause();
      const deadline = call(s, body, { path: SHOULD, headers: { 'grpc-timeout': '100m' }, waitMs: 3_000 });
      const cut = s.request({ ':method': 'POST', ':path': SHOULD, 'content-type': 'application/grpc' });
      cut.on('error', () => {});
      cut.end(body);
      const store = call(s, body, { path: SHOULD, waitMs: 3_000 });
      await sleep(50);
      cut.close(constants.NGHTTP2_CANCEL);
      assert.equal((await deadline).status, GrpcStatus.DEADLINE_EXCEEDED);
      assert.equal((await store).status, GrpcStatus.UNAVAILABLE);
      redis.resume();
      await sleep(300);
      let last: Answer | undefined;
      for (let i = 0; i < 20 && last?.status !== GrpcStatus.OK; i++) {
        last = await call(s, body, { path: SHOULD, waitMs: 3_000 });
        if (last.status !== GrpcStatus.OK) await sleep(100);
      }
      assert.equal(last?.status, GrpcStatus.OK);
    } finally {
      redis.resume();
      await f?.stop();
      await redis.stop();
    }
  });
});
