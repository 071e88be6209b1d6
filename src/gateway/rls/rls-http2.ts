/** The rate limit service's lean transport: gRPC's unary calls framed on node:http2, with no gRPC library. */
/**
 * A unary gRPC call is one HTTP/2 stream: a POST with `content-type: application/grpc`, one length-prefixed message
 * (a flag byte, then four bytes of big-endian length), then a response head, one message and trailers carrying
 * `grpc-status`. That is all ShouldRateLimit and Health/Check need, and @grpc/grpc-js's generality (interceptors,
 * channelz, streaming, compression) cost about as much per call as the decision itself. What it must still do is
 * here: deadlines (`grpc-timeout`), the message-size limit (answered before the message is read), status codes and
 * messages (percent-encoded), refusing compressed messages, never writing to a call its client hung up on, and
 * bounds on what a client that trickles, stays silent or never ends its stream can hold.
 */
import { constants, createSecureServer, createServer, type Http2Server, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { IncomingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import { printableAscii } from './printable-ascii.js';
import { GrpcStatus, type GrpcFailure, type Transport, type TransportOptions, type UnaryMethod } from './rls-transport.js';

/** Streams one connection may have open at once (grpc-js leaves it unbounded; Envoy opens another connection past it). */
const MAX_CONCURRENT_STREAMS = 1_000;
/**
 * A call must have sent its whole request, its stream's end included, within this, whatever its `grpc-timeout`; and a
 * connection must start a call within it. A trickling or silent client holds nothing longer.
 */
const DEFAULT_REQUEST_READ_MS = 10_000;
/** The longest `grpc-timeout` honoured as a timer (larger ones would overflow setTimeout; a call that long has no deadline to speak of). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** A connection with no activity at all (calls, pings, window updates) this long is closed; Envoy opens another when it needs one. */
const IDLE_MS = 300_000;
/** After GOAWAY, how long an idle connection has to close itself before it is destroyed. */
const CLOSE_GRACE_MS = 1_000;
/** After the GOAWAY of `maxConnectionAge`, how long calls in flight have by default (grpc-go's default is infinite; the decision takes ms). */
const DEFAULT_AGE_GRACE_MS = 10_000;
/** The gRPC message prefix: a compressed flag and a 32-bit length. */
const PREFIX_BYTES = 5;

const noop = (): void => {};

/** `grpc-timeout`'s units, in milliseconds per unit. */
const TIMEOUT_UNITS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * A `grpc-timeout` value (at most 8 digits and a unit) in milliseconds; undefined when absent; NaN when malformed.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^\d{1,8}[HMSmun]$/.test(value)) return Number.NaN;
  return Number(value.slice(0, -1)) * TIMEOUT_UNITS[value.slice(-1)]!;
}

/** The head of every gRPC answer. */
const RESPONSE_HEAD = { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity' } as const;
const OK_TRAILERS = { 'grpc-status': '0' } as const;

/** One call in progress: its request as it arrives, its timer, and whether it was answered. */
class UnaryCall {
  private chunks: Buffer[] = [];
  private received = 0;
  /** The request message's length, once its prefix has arrived. */
  private expected = -1;
  private answered = false;
  /** The whole request is in (its stream ended): the read limit no longer applies. */
  private requestIn = false;
  private timer: NodeJS.Timeout | undefined;
  /** When the client's deadline (`grpc-timeout`) passes, epoch ms; undefined without one. */
  private readonly deadlineAt: number | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly method: UnaryMethod,
    private readonly maxMessageBytes: number,
    deadlineMs: number | undefined,
    private readonly requestReadMs: number,
  ) {
    const now = Date.now();
    this.deadlineAt = deadlineMs === undefined ? undefined : now + deadlineMs;
    // One timer: the request must be in by the read limit whatever deadline the client chose, and the answer out by
    // the deadline; when the first of the two passes with the request in, the timer is set again for the deadline.
    this.arm(Math.min(deadlineMs ?? Infinity, requestReadMs));
    stream.on('data', (chunk: Buffer) => this.read(chunk));
    stream.once('end', () => this.ended());
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.expire(), Math.min(Math.max(0, Math.ceil(ms)), MAX_TIMER_MS));
  }

  private read(chunk: Buffer): void {
    if (this.answered) return;
    this.chunks.push(chunk);
    this.received += chunk.length;
    if (this.expected < 0 && this.received >= PREFIX_BYTES) {
      const head = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks);
      if (head[0] !== 0) {
        // Compression is not offered (grpc-accept-encoding says identity), so a compressed message cannot be read.
        this.fail({ code: GrpcStatus.UNIMPLEMENTED, details: 'compressed messages are not supported; send grpc-encoding identity' });
        return;
      }
      this.expected = head.readUInt32BE(1);
      if (this.expected > this.maxMessageBytes) {
        this.fail({
          code: GrpcStatus.RESOURCE_EXHAUSTED,
          details: `request message larger than ${this.maxMessageBytes} bytes (${this.expected})`,
        });
        return;
      }
    }
    if (this.expected >= 0 && this.received > PREFIX_BYTES + this.expected)
      // A unary call has one message: anything past it is a second one (or garbage); no need to wait for the end.
      this.fail({ code: GrpcStatus.UNIMPLEMENTED, details: 'a unary call takes exactly one request message' });
  }

  private ended(): void {
    if (this.answered) return;
    if (this.expected < 0 || this.received !== PREFIX_BYTES + this.expected) {
      this.fail({
        code: this.received === 0 ? GrpcStatus.UNIMPLEMENTED : GrpcStatus.INTERNAL,
        details: this.received === 0 ? 'a unary call takes exactly one request message' : 'the request message was cut short',
      });
      return;
    }
    const whole = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.received);
    this.chunks = [];
    this.requestIn = true;
    if (this.timer !== undefined && this.deadlineAt === undefined) {
      // The request is in: the read limit is over, and no deadline was asked for.
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.method(whole.subarray(PREFIX_BYTES), (failure, message) =>
      failure === null ? this.succeed(message ?? Buffer.alloc(0)) : this.fail(failure),
    );
  }

  private expire(): void {
    this.timer = undefined;
    if (this.answered) return;
    const left = this.deadlineAt === undefined ? Infinity : this.deadlineAt - Date.now();
    if (left <= 0) this.fail({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'deadline exceeded' });
    // Not ended by the read limit: trickled, cut short, or a whole message on a stream left open.
    else if (!this.requestIn)
      this.fail({ code: GrpcStatus.CANCELLED, details: `the request was not received within ${this.requestReadMs} ms` });
    else if (left !== Infinity) this.arm(left);
  }

  /** Marks the call answered; false when it already was, or its client is gone (nothing more is written then). */
  private claim(): boolean {
    if (this.answered) return false;
    this.answered = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.chunks = [];
    return !this.stream.destroyed && !this.stream.closed;
  }

  private succeed(message: Buffer): void {
    if (!this.claim()) return;
    const frame = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
    frame[0] = 0;
    frame.writeUInt32BE(message.length, 1);
    message.copy(frame, PREFIX_BYTES);
    const stream = this.stream;
    stream.respond(RESPONSE_HEAD, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
    stream.end(frame);
  }

  /**
   * A trailers-only answer; then, unless the client is done sending, RST_STREAM with NO_ERROR: HTTP/2's way to say
   * the rest of a request is not wanted once the response is complete (RFC 9113, 8.1).
   */
  private fail(failure: GrpcFailure): void {
    if (!this.claim()) return;
    respondFailure(this.stream, failure);
    if (!this.stream.readableEnded) this.stream.close(constants.NGHTTP2_NO_ERROR);
  }
}

/** Answers with a status and no message: one HEADERS frame that ends the stream. */
function respondFailure(stream: ServerHttp2Stream, failure: GrpcFailure): void {
  if (stream.headersSent || stream.destroyed || stream.closed) return;
  stream.respond(
    { ...RESPONSE_HEAD, 'grpc-status': String(failure.code), 'grpc-message': printableAscii(failure.details) },
    { endStream: true },
  );
}

/**
 * The connections of a server by their peer's address and port, as raw sockets: a session's own socket is a proxy
 * that may not be destroyed, and a session closed before the client's preface leaves its socket half-open for as long
 * as the client does not read. So a quiet connection is ended here, on the socket itself.
 */
class Connections {
  private readonly byPeer = new Map<string, Socket>();

  add(socket: Socket): string {
    const peer = `${socket.remoteAddress}|${socket.remotePort}`;
    this.byPeer.set(peer, socket);
    socket.once('close', () => {
      if (this.byPeer.get(peer) === socket) this.byPeer.delete(peer);
    });
    return peer;
  }

  /** The peer key of `session`'s connection (read while the session still holds its socket). */
  static peerOf(session: Http2Session): string | undefined {
    try {
      return `${session.socket.remoteAddress}|${session.socket.remotePort}`;
    } catch {
      return undefined;
    }
  }

  /**
   * GOAWAY to `session` when it has one (calls in flight finish; no new ones start), then its connection destroyed after
   * `graceMs` (at once without a session).
   */
  end(peer: string | undefined, session?: Http2Session, graceMs = CLOSE_GRACE_MS): void {
    if (session !== undefined && !session.closed && !session.destroyed) session.close();
    const socket = peer === undefined ? undefined : this.byPeer.get(peer);
    if (socket === undefined) return;
    if (session === undefined) socket.destroy();
    else setTimeout(() => socket.destroy(), graceMs).unref();
  }
}

/** Routes one stream: to its method, or answers it without reading it. */
function onStream(options: TransportOptions, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  stream.on('error', noop);
  if (headers[':method'] !== 'POST') {
    stream.respond({ ':status': 405, allow: 'POST' }, { endStream: true });
    stream.close(constants.NGHTTP2_NO_ERROR);
    return;
  }
  const type = headers['content-type'];
  if (
    typeof type !== 'string' ||
    !(type === 'application/grpc' || type.startsWith('application/grpc+') || type.startsWith('application/grpc;'))
  ) {
    stream.respond({ ':status': 415, accept: 'application/grpc' }, { endStream: true });
    stream.close(constants.NGHTTP2_NO_ERROR);
    return;
  }
  const path = headers[':path'];
  const method = path === undefined ? undefined : options.methods.get(path);
  if (method === undefined) {
    respondFailure(stream, { code: GrpcStatus.UNIMPLEMENTED, details: `unknown method ${path ?? ''}` });
    stream.close(constants.NGHTTP2_NO_ERROR);
    return;
  }
  const timeout = parseGrpcTimeout(headers['grpc-timeout']);
  if (Number.isNaN(timeout)) {
    respondFailure(stream, { code: GrpcStatus.INTERNAL, details: `malformed grpc-timeout ${JSON.stringify(headers['grpc-timeout'])}` });
    stream.close(constants.NGHTTP2_NO_ERROR);
    return;
  }
  new UnaryCall(stream, method, options.maxMessageBytes, timeout, options.requestReadMs ?? DEFAULT_REQUEST_READ_MS);
}

/**
 * Listens with node:http2 (h2c, or TLS with ALPN h2 and, with a CA, client certificates required) and serves
 * `options.methods`.
 * @throws the listen error (a port in use, an address not on this host)
 */
export async function listenHttp2(options: TransportOptions): Promise<Transport> {
  const settings = { maxConcurrentStreams: MAX_CONCURRENT_STREAMS };
  const tls = options.tls;
  const server: Http2Server =
    tls === undefined
      ? createServer({ settings })
      : createSecureServer({
          settings,
          cert: tls.cert,
          key: tls.key,
          ...(tls.ca === undefined ? {} : { ca: tls.ca, requestCert: true, rejectUnauthorized: true }),
        });
  const sessions = new Set<Http2Session>();
  const connections = new Connections();
  /** Peers (address and port) of connections that have made a call: from then on only a long silence closes them. */
  const calling = new Set<string>();
  const readMs = options.requestReadMs ?? DEFAULT_REQUEST_READ_MS;
  // Silent connections would otherwise be held until the process ends (only the file-descriptor limit bounds them):
  // a connection must start a call within the time a call has to send its request, preface included.
  server.on('connection', (socket: Socket) => {
    const peer = connections.add(socket);
    socket.once('close', () => calling.delete(peer));
    setTimeout(() => {
      if (!calling.has(peer)) connections.end(peer);
    }, readMs).unref();
  });
  server.on('secureConnection', (socket: Socket) => connections.add(socket));
  const maxAge = options.maxConnectionAgeMs;
  server.on('session', (session: Http2Session) => {
    sessions.add(session);
    session.on('error', noop);
    if (maxAge !== undefined) {
      // Spread by ±10 %: connections opened together (a fleet of Envoys started at once) do not all reconnect together.
      const peer = Connections.peerOf(session);
      const aged = setTimeout(
        () => connections.end(peer, session, options.maxConnectionAgeGraceMs ?? DEFAULT_AGE_GRACE_MS),
        maxAge * (0.9 + Math.random() * 0.2),
      );
      aged.unref();
      session.once('close', () => clearTimeout(aged));
    }
    session.once('close', () => sessions.delete(session));
  });
  // A TLS handshake that fails (no client certificate, a plaintext client) is the client's problem, not the server's.
  server.on('tlsClientError', noop);
  const called = new WeakSet<Http2Session>();
  server.on('stream', (stream, headers) => {
    const session = stream.session;
    // Once per connection: its peer is looked up on its first call only.
    if (session !== undefined && !called.has(session)) {
      called.add(session);
      const peer = Connections.peerOf(session);
      if (peer !== undefined) calling.add(peer);
      session.setTimeout(IDLE_MS, () => connections.end(peer, session));
    }
    onStream(options, stream, headers);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', noop);
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  return {
    port,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        // GOAWAY to every connection: calls in progress finish, no new ones start.
        const timer = setTimeout(() => {
          for (const session of sessions) session.destroy();
        }, graceMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        for (const session of sessions) session.close();
      }),
  };
}
