// The rate limit service's lean gRPC transport (node:http2) on real sockets: what a gRPC client expects of a unary call, and what a client that lies, trickles or hangs up gets; the @grpc/grpc-js transport beside it where gRPC defines the answer.
import assert from 'node:assert/strict';
import { connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { after, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { listenHttp2, parseGrpcTimeout } from '../../../src/gateway/rls/rls-http2.js';
import { printableAscii } from '../../../src/gateway/rls/printable-ascii.js';
import { frame } from '../support/rls-raw-h2.js';
import { listenGrpcJs } from '../../../src/gateway/rls/rls-grpcjs.js';
import { GrpcStatus, type Transport, type UnaryMethod, type UnaryReply } from '../../../src/gateway/rls/rls-transport.js';

const ECHO = '/test.Echo/Echo';
const SLOW = '/test.Echo/Slow';
const FAIL = '/test.Echo/Fail';

/** Replies of the slow method, held until the test releases them. */
const held: Array<() => void> = [];
/** How many times a method was called (a request that is refused before it is read must not reach it). */
let calls = 0;

const echo: UnaryMethod = (request, reply) => {
  calls += 1;
  reply(null, Buffer.concat([Buffer.from('echo:'), request]));
};
const slow: UnaryMethod = (request, reply) => {
  calls += 1;
  held.push(() => reply(null, request));
};
const fail: UnaryMethod = (_request, reply: UnaryReply) => {
  calls += 1;
  reply({ code: GrpcStatus.UNAVAILABLE, details: 'store down: naïve 100% ✓' });
};
const methods = new Map([
  [ECHO, echo],
  [SLOW, slow],
  [FAIL, fail],
]);

const MAX = 1024;
const transports: Array<[string, Transport]> = [];
after(async () => {
  for (const release of held.splice(0)) release();
  for (const [, t] of transports) await t.close(100);
});

async function start(
  kind: 'http2' | 'grpc-js',
  requestReadMs?: number,
  age?: { maxConnectionAgeMs: number; maxConnectionAgeGraceMs: number },
): Promise<Transport> {
  const listen = kind === 'http2' ? listenHttp2 : listenGrpcJs;
  const t = await listen({ host: '127.0.0.1', port: 0, tls: undefined, maxMessageBytes: MAX, methods, requestReadMs, ...age });
  transports.push([kind, t]);
  return t;
}

interface RawAnswer {
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders;
  data: Buffer;
  /** The stream was reset by the server (its code), or undefined. */
  reset?: number;
  /** grpc-status, from the trailers or a trailers-only head. */
  status?: number;
  message?: string;
}

/** One call on a raw HTTP/2 stream: the head given, the body chunks written with `gapMs` between them, then ended unless told not to. */
function rawCall(
  session: ClientHttp2Session,
  options: { path?: string; method?: string; headers?: Record<string, string>; chunks?: Buffer[]; end?: boolean; gapMs?: number },
): Promise<RawAnswer> {
  const stream = session.request({
    ':method': options.method ?? 'POST',
    ':path': options.path ?? ECHO,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...options.headers,
  });
  const answer: RawAnswer = { headers: {}, trailers: {}, data: Buffer.alloc(0) };
  stream.on('response', (h) => (answer.headers = h));
  stream.on('trailers', (t) => (answer.trailers = t));
  stream.on('data', (d: Buffer) => (answer.data = Buffer.concat([answer.data, d])));
  const chunks = options.chunks ?? [];
  void (async () => {
    for (const [i, chunk] of chunks.entries()) {
      if (stream.destroyed) return;
      stream.write(chunk);
      if (options.gapMs !== undefined && i < chunks.length - 1) await new Promise((r) => setTimeout(r, options.gapMs));
    }
    if (options.end !== false && !stream.destroyed) stream.end();
  })();
  return new Promise((resolve) => {
    stream.on('error', () => {});
    stream.on('close', () => {
      if (stream.rstCode !== constants.NGHTTP2_NO_ERROR) answer.reset = stream.rstCode;
      const source = answer.trailers['grpc-status'] !== undefined ? answer.trailers : answer.headers;
      if (source['grpc-status'] !== undefined) answer.status = Number(source['grpc-status']);
      if (source['grpc-message'] !== undefined) answer.message = decodeURIComponent(String(source['grpc-message']));
      resolve(answer);
    });
  });
}

const sessions: ClientHttp2Session[] = [];
after(() => {
  for (const s of sessions) s.destroy();
});
function session(t: Transport): ClientHttp2Session {
  const s = connect(`http://127.0.0.1:${t.port}`);
  s.on('error', () => {});
  sessions.push(s);
  return s;
}

describe('both transports, where gRPC defines the answer', () => {
  for (const kind of ['http2', 'grpc-js'] as const) {
    test(`${kind}: a call is answered with the method's bytes, framed, and grpc-status 0 in the trailers`, async () => {
      const t = await start(kind);
      const a = await rawCall(session(t), { chunks: [frame(Buffer.from('hi'))] });
      assert.equal(a.headers[':status'], 200);
      assert.equal(a.status, GrpcStatus.OK);
      assert.deepEqual(a.data, frame(Buffer.from('echo:hi')));
    });

    test(`${kind}: maxConnectionAge sends GOAWAY to an old connection, and the call in flight still gets its answer`, async () => {
      const t = await start(kind, undefined, { maxConnectionAgeMs: 400, maxConnectionAgeGraceMs: 2_000 });
      const s = session(t);
      const goaway = new Promise<number>((resolve) => s.once('goaway', () => resolve(Date.now())));
      const opened = Date.now();
      const pending = rawCall(s, { path: SLOW, chunks: [frame(Buffer.from('in-flight'))] });
      const at = await goaway;
      assert.ok(at - opened >= 300 && at - opened < 1_500, `GOAWAY after ${at - opened} ms (age 400 ms ± 10 %)`);
      for (const release of held.splice(0)) release();
      assert.equal((await pending).status, GrpcStatus.OK);
    });

    test(`${kind}: an unknown method is UNIMPLEMENTED and reaches no method`, async () => {
      const t = await start(kind);
      const before = calls;
      const a = await rawCall(session(t), { path: '/test.Echo/Nope', chunks: [frame(Buffer.from('x'))] });
      assert.equal(a.status, GrpcStatus.UNIMPLEMENTED);
      assert.equal(calls, before);
    });

    test(`${kind}: a message over the size limit is RESOURCE_EXHAUSTED and reaches no method`, async () => {
      const t = await start(kind);
      const before = calls;
      const a = await rawCall(session(t), { chunks: [frame(Buffer.alloc(MAX + 1))] });
      assert.equal(a.status, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.equal(calls, before);
    });

    test(`${kind}: a failure's status and its non-ASCII message reach the client`, async () => {
      const t = await start(kind);
      const a = await rawCall(session(t), { path: FAIL, chunks: [frame(Buffer.from('x'))] });
      assert.equal(a.status, GrpcStatus.UNAVAILABLE);
      assert.equal(a.message, 'store down: naïve 100% ✓');
    });

    test(`${kind}: a grpc-js client on the same connection gets its answers (message, status, details)`, async () => {
      const t = await start(kind);
      const client = new grpc.Client(`127.0.0.1:${t.port}`, grpc.credentials.createInsecure());
      const unary = (path: string, body: string) =>
        new Promise<Buffer>((resolve, reject) =>
          client.makeUnaryRequest(
            path,
            (b: Buffer) => b,
            (b: Buffer) => b,
            Buffer.from(body),
            (error, value) => (error === null ? resolve(value!) : reject(error as Error)),
          ),
        );
      try {
        assert.equal((await Promise.all(Array.from({ length: 50 }, (_, i) => unary(ECHO, `m${i}`))))[49]!.toString(), 'echo:m49');
        await assert.rejects(unary(FAIL, ''), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE && e.details.includes('naïve'));
      } finally {
        client.close();
      }
    });
  }
});

describe('the http2 transport against a client that lies, trickles or hangs up', () => {
  test('a message that declares 4 GiB is refused from its five-byte prefix, without waiting for the body', async () => {
    const t = await start('http2');
    const a = await rawCall(session(t), { chunks: [frame(Buffer.alloc(0), 0, 0xffffffff)], end: false });
    assert.equal(a.status, GrpcStatus.RESOURCE_EXHAUSTED);
  });

  test('a compressed message (flag 1) is UNIMPLEMENTED: compression is not offered', async () => {
    const t = await start('http2');
    const a = await rawCall(session(t), { headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(Buffer.from('x'), 1)] });
    assert.equal(a.status, GrpcStatus.UNIMPLEMENTED);
    assert.equal(a.headers['grpc-accept-encoding'], 'identity');
  });

  test('two messages on a unary call are refused, and the method is not called', async () => {
    const t = await start('http2');
    const before = calls;
    const a = await rawCall(session(t), { chunks: [frame(Buffer.from('a')), frame(Buffer.from('b'))] });
    assert.equal(a.status, GrpcStatus.UNIMPLEMENTED);
    assert.equal(calls, before);
  });

  test('no message at all, and a message cut short, are refused without calling the method', async () => {
    const t = await start('http2');
    const before = calls;
    const s = session(t);
    assert.equal((await rawCall(s, { chunks: [] })).status, GrpcStatus.UNIMPLEMENTED);
    assert.equal((await rawCall(s, { chunks: [frame(Buffer.from('abcdef')).subarray(0, 8)] })).status, GrpcStatus.INTERNAL);
    assert.equal((await rawCall(s, { chunks: [Buffer.from([0, 0])] })).status, GrpcStatus.INTERNAL);
    assert.equal(calls, before);
  });

  test('a request trickled one byte at a time is read whole', async () => {
    const t = await start('http2');
    const bytes = frame(Buffer.from('slowly'));
    const a = await rawCall(session(t), { chunks: [...bytes].map((b) => Buffer.from([b])), gapMs: 5 });
    assert.equal(a.status, GrpcStatus.OK);
    assert.deepEqual(a.data, frame(Buffer.from('echo:slowly')));
  });

  test('a client that never finishes its request is cut at the read limit (no grpc-timeout)', async () => {
    const t = await start('http2', 300);
    const started = Date.now();
    const a = await rawCall(session(t), { chunks: [frame(Buffer.from('abcdef')).subarray(0, 7)], end: false });
    assert.equal(a.status, GrpcStatus.CANCELLED);
    assert.ok(Date.now() - started < 3_000);
  });

  test('grpc-timeout: a call not answered by its deadline is DEADLINE_EXCEEDED, and the late answer is dropped', async () => {
    const t = await start('http2');
    const s = session(t);
    const started = Date.now();
    const a = await rawCall(s, { path: SLOW, headers: { 'grpc-timeout': '150m' }, chunks: [frame(Buffer.from('late'))] });
    assert.equal(a.status, GrpcStatus.DEADLINE_EXCEEDED);
    assert.ok(Date.now() - started >= 140);
    for (const release of held.splice(0)) release();
    // The connection still serves.
    assert.equal((await rawCall(s, { chunks: [frame(Buffer.from('next'))] })).status, GrpcStatus.OK);
  });

  test('a malformed grpc-timeout is refused, not taken as no deadline', async () => {
    const t = await start('http2');
    for (const bad of ['10', '123456789S', '1x', '-1S', '1.5S']) {
      const a = await rawCall(session(t), { headers: { 'grpc-timeout': bad }, chunks: [frame(Buffer.from('x'))] });
      assert.equal(a.status, GrpcStatus.INTERNAL, bad);
    }
  });

  test('a client that hangs up while its call is decided: nothing is written to it, and the server serves on', async () => {
    const t = await start('http2');
    const s = session(t);
    const stream = s.request({ ':method': 'POST', ':path': SLOW, 'content-type': 'application/grpc' });
    stream.on('error', () => {});
    stream.end(frame(Buffer.from('gone')));
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    stream.close(constants.NGHTTP2_CANCEL);
    await new Promise((r) => stream.once('close', r));
    for (const release of held.splice(0)) release();
    assert.equal((await rawCall(s, { chunks: [frame(Buffer.from('after'))] })).status, GrpcStatus.OK);
  });

  test('a whole connection that drops with calls in flight leaves the server serving others', async () => {
    const t = await start('http2');
    const s = session(t);
    for (let i = 0; i < 20; i++) {
      const stream = s.request({ ':method': 'POST', ':path': SLOW, 'content-type': 'application/grpc' });
      stream.on('error', () => {});
      stream.end(frame(Buffer.from(`c${i}`)));
    }
    while (held.length < 20) await new Promise((r) => setTimeout(r, 5));
    s.destroy();
    for (const release of held.splice(0)) release();
    assert.equal((await rawCall(session(t), { chunks: [frame(Buffer.from('ok'))] })).status, GrpcStatus.OK);
  });

  test('not a POST is 405; not application/grpc is 415; neither reaches a method', async () => {
    const t = await start('http2');
    const before = calls;
    const s = session(t);
    assert.equal((await rawCall(s, { method: 'GET' })).headers[':status'], 405);
    assert.equal(
      (await rawCall(s, { headers: { 'content-type': 'application/json' }, chunks: [frame(Buffer.from('x'))] })).headers[':status'],
      415,
    );
    assert.equal(
      (await rawCall(s, { headers: { 'content-type': 'application/grpcx' }, chunks: [frame(Buffer.from('x'))] })).headers[':status'],
      415,
    );
    assert.equal(calls, before);
  });

  test('close waits for calls in flight (up to its grace), then the port is closed', async () => {
    const t = await listenHttp2({ host: '127.0.0.1', port: 0, tls: undefined, maxMessageBytes: MAX, methods });
    const s = session(t);
    const pending = rawCall(s, { path: SLOW, chunks: [frame(Buffer.from('in-flight'))] });
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    const closed = t.close(5_000);
    await new Promise((r) => setTimeout(r, 50));
    for (const release of held.splice(0)) release();
    assert.equal((await pending).status, GrpcStatus.OK);
    await closed;
  });
});

test('parseGrpcTimeout reads every unit and refuses what the spec does not allow', () => {
  assert.equal(parseGrpcTimeout(undefined), undefined);
  assert.equal(parseGrpcTimeout('1H'), 3_600_000);
  assert.equal(parseGrpcTimeout('2M'), 120_000);
  assert.equal(parseGrpcTimeout('3S'), 3_000);
  assert.equal(parseGrpcTimeout('20m'), 20);
  assert.equal(parseGrpcTimeout('1500u'), 1.5);
  assert.equal(parseGrpcTimeout('99999999n'), 99.999999);
  assert.ok(Number.isNaN(parseGrpcTimeout('123456789m')));
  assert.ok(Number.isNaN(parseGrpcTimeout('')));
});

test('printableAscii percent-encodes what grpc-message may not carry, and only that', () => {
  assert.equal(printableAscii('plain text: ok'), 'plain text: ok');
  assert.equal(printableAscii('100%'), '100%25');
  assert.equal(printableAscii('é\n'), '%C3%A9%0A');
});
