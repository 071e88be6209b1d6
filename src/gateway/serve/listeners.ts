/** The gateway's listeners. */
/**
 * The proxy server and the admin server with their client-side limits (header timeout checked promptly, a connection
 * cap, a pipelining bound, one body read at a time per connection), and listen/close helpers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import { ErrorCode, FloodgateError } from '../../index.js';
import type { ListenAddress, ProxySettings } from '../config/settings.js';
import { hasBody } from './request-body.js';

/**
 * How often Node looks for connections over the header or request timeout.
 * Node's default (30 s) lets a 10 s header timeout fire up to 40 s late; a
 * quarter of the timeout, at most a second, keeps the cut close to it.
 */
function checkingIntervalMs(p: ProxySettings): number {
  return Math.max(10, Math.min(1000, Math.floor(p.clientHeadersTimeoutMs / 4)));
}

/**
 * Requests one connection may have unanswered at once. Node parses every
 * pipelined request it has read and queues an answer for each, reading on
 * until an answer is written: a client that pipelines thousands of requests
 * and reads nothing held about 160 MB per proxy connection (forwarded) or
 * 10 MB per admin one (`/metrics`). Browsers and common clients do not
 * pipeline at all.
 */
export const MAX_PIPELINED = 32;

/** One connection's unanswered requests, and those held back behind one with a body. */
interface Pipeline {
  readonly socket: Duplex;
  /**
   * Answers not yet closed, in order (at most {@link MAX_PIPELINED}). An array, not a Set: a connection lives long, and
   * a long-lived Set that gains and loses an entry per request makes V8 replace its table every few requests, each dead
   * table keeping the next (and the answers in it) alive through young-generation collections.
   */
  readonly answers: ServerResponse[];
  /** The answer of the unanswered request that has a body, if any: no later request is handled until it closes. */
  body: ServerResponse | undefined;
  /** Requests read behind it, handled in order once it is answered. */
  held: Array<readonly [IncomingMessage, ServerResponse]> | undefined;
  /** True while this code has stopped reading the socket (see {@link stopReading}). */
  stopped: boolean;
}

/**
 * `onRequest`, with a connection cut once more than {@link MAX_PIPELINED}
 * of its requests are unanswered, and every answer of a closed connection
 * ended. Node emits `close` only on the answer the connection is writing:
 * those queued behind it would never end, and what waits for their end
 * (the in-flight count, a rule's concurrency slots) would wait for good.
 *
 * A request pipelined behind an unanswered one that has a body is held,
 * unread, until that one is answered: each connection then buffers one
 * body at a time (`proxy.requestBuffer`), not 32 of them, and the socket
 * is not read while a request is held, so the client's further bytes wait
 * in TCP (see {@link stopReading}). Node may read on early when an answer
 * drains (its own flow control); a request read then is held all the same. Answers go out in order
 * anyway; only the upstream work of a pipelined burst is no longer
 * parallel, as with nginx, which reads a connection's next request only
 * after answering the last.
 */
function pipelineBounded(
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  const pipelines = new WeakMap<Duplex, Pipeline>();
  const handle = (line: Pipeline, req: IncomingMessage, res: ServerResponse): void => {
    if (hasBody(req)) line.body = res;
    onRequest(req, res);
  };
  const answered = (line: Pipeline): void => {
    line.body = undefined;
    const held = line.held;
    // A closed connection's held requests are never handled: nobody is there to answer.
    if (held === undefined || line.socket.destroyed) return;
    while (held.length > 0 && line.body === undefined) {
      const [req, res] = held.shift()!;
      handle(line, req, res);
    }
    // Read on: a request handed on with a body needs its bytes, and any request read past it is held again.
    if (line.stopped) {
      line.stopped = false;
      readAgain(line.socket);
    }
  };
  return (req, res) => {
    const socket = req.socket;
    let line = pipelines.get(socket);
    if (line === undefined) {
      const created: Pipeline = { socket, answers: [], body: undefined, held: undefined, stopped: false };
      pipelines.set(socket, created);
      socket.once('close', () => {
        created.held = undefined;
        // Never given the socket, so node will not close them; the one it was writing it closes itself.
        // Taken out first: each 'close' emitted here would otherwise remove its answer from the list being walked.
        for (const queued of created.answers.splice(0))
          if (queued.socket === null) {
            queued.destroy();
            queued.emit('close');
          }
      });
      line = created;
    }
    if (line.answers.length >= MAX_PIPELINED) {
      socket.destroy();
      return;
    }
    const current = line;
    current.answers.push(res);
    res.once('close', () => {
      const at = current.answers.indexOf(res);
      if (at >= 0) current.answers.splice(at, 1);
      if (current.body === res) answered(current);
    });
    if (current.body === undefined) {
      handle(current, req, res);
      return;
    }
    (current.held ??= []).push([req, res]);
    // Again after node read on by itself (an answer drained): each request read then is held, and reading stops anew.
    current.stopped = true;
    stopReading(socket);
  };
}

/** The parts of node's HTTP server socket its own flow control uses (node:_http_server). */
type ServerSocket = Duplex & { _paused?: boolean; parser?: { resume(): void } | null };

/**
 * Stops reading a client connection the way node's HTTP server does when
 * answers back up: `pause()` alone is undone at the end of every parsed
 * message (node reads on for the next one) unless `_paused` is set, and
 * with it node also pauses its parser once the bytes it has (one read, at
 * most 64 KiB) are parsed. {@link readAgain} undoes it as node's drain does.
 */
function stopReading(socket: Duplex): void {
  const s = socket as ServerSocket;
  if (s._paused === true) return;
  s._paused = true;
  socket.pause();
}

/** Reads a connection {@link stopReading} stopped again. */
function readAgain(socket: Duplex): void {
  const s = socket as ServerSocket;
  if (s._paused !== true || s.destroyed) return;
  s._paused = false;
  s.parser?.resume();
  socket.resume();
}

/** Creates the proxy listener's server (not yet listening) with the client-side limits of `p`. */
export function createProxyServer(p: ProxySettings, onRequest: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer(
    {
      maxHeaderSize: p.maxHeaderSize,
      headersTimeout: p.clientHeadersTimeoutMs,
      requestTimeout: p.clientRequestTimeoutMs,
      keepAliveTimeout: p.clientKeepAliveTimeoutMs,
      connectionsCheckingInterval: checkingIntervalMs(p),
    },
    pipelineBounded(onRequest),
  );
  server.maxConnections = p.maxConnections;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // Node answers 431 for oversized headers and 408 for slow ones only when told to; a bare socket close would hide why.
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    if (socket.writable && !(socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
      socket.end(
        `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`,
      );
    } else {
      socket.destroy();
    }
  });
  return server;
}

/**
 * Connections the admin listener holds at once. Its clients are a few
 * operators, dashboards and scrapers; without a cap, idle or slow
 * connections to it would take the file descriptors the proxy port needs.
 */
export const ADMIN_MAX_CONNECTIONS = 64;

/** Longest an admin request may take when the proxy's `clientRequestTimeout` is 0 (off): long uploads are the proxy's, not the admin's. */
const ADMIN_REQUEST_TIMEOUT_MS = 60_000;

/**
 * The admin listener's limits: the proxy's header size (the admin API must
 * address any key the proxy counts) and client timeouts, never an unbounded
 * request, and its own small connection cap.
 */
export function adminLimits(p: ProxySettings): ProxySettings {
  const requestTimeout =
    p.clientRequestTimeoutMs > 0 ? p.clientRequestTimeoutMs : Math.max(ADMIN_REQUEST_TIMEOUT_MS, p.clientHeadersTimeoutMs);
  return { ...p, clientRequestTimeoutMs: requestTimeout, maxConnections: ADMIN_MAX_CONNECTIONS };
}

/** Creates the admin listener's server (not yet listening) with {@link adminLimits}: a slow or idle client is cut as on the proxy port. */
export function createAdminServer(p: ProxySettings, onRequest: (req: IncomingMessage, res: ServerResponse) => void): Server {
  return createProxyServer(adminLimits(p), onRequest);
}

/** Applies the client-side limits of `p` that a running server can change (the checking interval and header size cannot). */
export function applyClientLimits(server: Server, p: ProxySettings): void {
  server.headersTimeout = p.clientHeadersTimeoutMs;
  server.requestTimeout = p.clientRequestTimeoutMs;
  server.keepAliveTimeout = p.clientKeepAliveTimeoutMs;
  server.maxConnections = p.maxConnections;
}

/**
 * Listens on `address` (on `port` instead of its port when given, and as a
 * member of a SO_REUSEPORT group with `reusePort`); a failure (port in use,
 * address not on this host) names the setting `what`.
 */
export function listen(
  server: NetServer,
  address: ListenAddress,
  what: string,
  group: { port?: number; reusePort?: boolean } = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (error: NodeJS.ErrnoException): void =>
      reject(
        new FloodgateError(
          ErrorCode.LISTEN_FAILED,
          `cannot listen on ${address.host}:${address.port} (${what}): ${error.code ?? error.message}${error.code === 'EADDRINUSE' ? ', the port is in use' : error.code === 'EADDRNOTAVAIL' ? ", the address is not one of this host's" : ''}.`,
          error,
        ),
      );
    server.once('error', fail);
    const options = { port: group.port ?? address.port, host: address.host, ...(group.reusePort === true ? { reusePort: true } : {}) };
    server.listen(options, () => {
      server.off('error', fail);
      resolve();
    });
  });
}

/** Closes `server` (http's close: idle connections go at once) and resolves once every connection has ended. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** `http://host:port` of a listening server. */
export function urlOf(server: Server): string {
  const a = server.address() as AddressInfo | null;
  if (a === null) return '(not listening)';
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}

/** Whether two (optional) listen addresses are the same. */
export function sameAddress(a: ListenAddress | undefined, b: ListenAddress | undefined): boolean {
  return a?.host === b?.host && a?.port === b?.port;
}
