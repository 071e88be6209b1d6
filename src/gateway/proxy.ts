/** The reverse proxy: an undici keep-alive pool to the upstream, streamed bodies both ways, hop-by-hop headers removed, X-Forwarded-* set, 502/504 on upstream failure, WebSocket upgrades passed through. */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { Pool } from 'undici';
import { combinedValue, type HeaderPair } from '../http/headers.js';
import { AddressMatcher, parseIp, type TrustProxy } from '../http/keys.js';
import type { Undici } from './deps.js';
import type { GatewayLogger } from './log.js';
import type { GatewayMetrics, LatencyChild } from './metrics.js';
import type { ProxySettings } from './settings.js';

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1); never forwarded in either direction. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Upstream error codes that mean "the upstream took too long" (504) rather than "the upstream is broken" (502). */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

/** Forwards requests to one upstream origin. */
export class UpstreamProxy {
  /** The upstream origin, e.g. `http://127.0.0.1:3000`. */
  readonly origin: string;
  private readonly pool: Pool;
  /** Path the upstream URL carries (e.g. `/v1`), prepended to every request path; empty for `/`. */
  private readonly basePath: string;
  private readonly trusted: (peer: string | undefined) => boolean;
  private lastWarning = 0;
  private readonly responseLatency: LatencyChild;

  /**
   * @param undici - the undici module
   * @param upstream - the upstream URL
   * @param settings - timeouts and pool size
   * @param trustProxy - whose X-Forwarded-Proto/-Host to keep (everyone else's are replaced)
   */
  constructor(
    undici: Undici,
    upstream: URL,
    settings: ProxySettings,
    trustProxy: TrustProxy,
    private readonly metrics: GatewayMetrics,
    private readonly log: GatewayLogger,
    /** True once the gateway drains: a response whose head is written then closes its connection. */
    private readonly draining: () => boolean = () => false,
  ) {
    this.origin = upstream.origin;
    this.basePath = upstream.pathname === '/' ? '' : upstream.pathname.replace(/\/$/, '');
    this.pool = new undici.Pool(this.origin, {
      connections: settings.connections,
      connect: { timeout: settings.connectTimeoutMs },
      headersTimeout: settings.headersTimeoutMs,
      bodyTimeout: settings.bodyTimeoutMs,
      keepAliveTimeout: settings.idleTimeoutMs,
      keepAliveMaxTimeout: Math.max(settings.idleTimeoutMs, 600_000),
    });
    this.trusted = trustCheck(trustProxy);
    this.responseLatency = metrics.upstreamLatencyChild('response');
  }

  /**
   * Forwards `req` and streams the answer into `res`, adding `extra`
   * (the RateLimit fields) to the upstream's headers. Answers 502 or 504
   * itself when the upstream fails before its headers; after them, a failure
   * can only cut the response (the status is already sent).
   */
  forward(req: IncomingMessage, res: ServerResponse, extra: readonly HeaderPair[]): void {
    const started = performance.now();
    const controller = new AbortController();
    // A client that goes away must not keep an upstream request (and a pool slot) busy.
    res.once('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    let headersReceived = false;
    this.pool
      .stream(
        {
          path: this.basePath + (req.url ?? '/'),
          method: req.method as 'GET',
          headers: this.requestHeaders(req),
          body: hasBody(req) ? req : null,
          signal: controller.signal,
        },
        ({ statusCode, headers }) => {
          headersReceived = true;
          this.responseLatency.observe((performance.now() - started) / 1000);
          // One writeHead with a flat list: each setHeader would validate and store a field only to
          // have writeHead walk them again, which cost more than the limiter's whole decision.
          if (this.draining()) res.shouldKeepAlive = false;
          res.writeHead(statusCode, responseHead(headers, extra));
          return res;
        },
      )
      .then(undefined, (error: unknown) => this.failed(error, res, extra, started, headersReceived));
  }

  /**
   * Passes a WebSocket (or other) upgrade through: the upstream must answer
   * 101, after which bytes are copied both ways until either side closes.
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, extra: readonly HeaderPair[]): void {
    const headers = this.requestHeaders(req);
    const protocol = String(req.headers.upgrade ?? 'websocket');
    socket.on('error', () => socket.destroy());
    this.pool
      .upgrade({ path: this.basePath + (req.url ?? '/'), method: req.method ?? 'GET', headers, protocol })
      .then(
        ({ headers: upstreamHeaders, socket: upstream }) => {
          let head101 = `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${protocol}\r\n`;
          for (const [name, value] of Object.entries(upstreamHeaders)) {
            if (value === undefined || HOP_BY_HOP.has(name)) continue;
            for (const v of Array.isArray(value) ? value : [value]) head101 += `${name}: ${v}\r\n`;
          }
          for (const [name, value] of extra) head101 += `${name}: ${value}\r\n`;
          socket.write(`${head101}\r\n`);
          if (head.length > 0) upstream.write(head);
          upstream.on('error', () => socket.destroy());
          socket.on('error', () => upstream.destroy());
          upstream.on('close', () => socket.destroy());
          socket.on('close', () => upstream.destroy());
          upstream.pipe(socket);
          socket.pipe(upstream);
        },
        (error: unknown) => {
          const timeout = TIMEOUT_CODES.has((error as { code?: string }).code ?? '');
          this.warn(error, 'upstream upgrade failed');
          writeRaw(socket, timeout ? 504 : 502, extra);
        },
      );
  }

  /** Stops taking requests and resolves once those in flight are done. */
  close(): Promise<void> {
    return this.pool.close();
  }

  /** Aborts everything in flight. */
  destroy(): Promise<void> {
    return this.pool.destroy();
  }

  private failed(error: unknown, res: ServerResponse, extra: readonly HeaderPair[], started: number, headersReceived: boolean): void {
    const code = (error as { code?: string; name?: string }).code ?? (error as { name?: string }).name ?? '';
    // The client left; there is nobody to answer.
    if (code === 'UND_ERR_ABORTED' || code === 'AbortError' || res.destroyed) return;
    if (headersReceived || res.headersSent) {
      this.metrics.upstreamError('body');
      this.warn(error, 'upstream failed mid-response; closing the client connection');
      res.destroy();
      return;
    }
    const timeout = TIMEOUT_CODES.has(code);
    this.metrics.upstream(timeout ? 'timeout' : 'error', (performance.now() - started) / 1000);
    this.metrics.upstreamError(timeout ? 'timeout' : 'connect');
    this.warn(error, timeout ? 'upstream timed out' : 'upstream failed');
    const status = timeout ? 504 : 502;
    const body = JSON.stringify({
      type: 'about:blank',
      title: timeout ? 'Gateway Timeout' : 'Bad Gateway',
      status,
      detail: timeout ? 'The upstream did not answer in time.' : 'The upstream could not be reached.',
    });
    res.statusCode = status;
    for (const pair of extra) res.setHeader(pair[0], pair[1]);
    res.setHeader('Content-Type', 'application/problem+json');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(body);
  }

  /** Logs upstream trouble at most once per second, so an outage does not log at the request rate. */
  private warn(error: unknown, message: string): void {
    const now = Date.now();
    if (now - this.lastWarning < 1000) return;
    this.lastWarning = now;
    const e = error as { code?: string; message?: string };
    this.log.warn({ upstream: this.origin, code: e.code, error: e.message }, message);
  }

  /** The headers to send upstream: the client's, minus hop-by-hop ones, plus X-Forwarded-*. */
  private requestHeaders(req: IncomingMessage): Record<string, string | string[]> {
    const incoming = req.headers;
    const out: Record<string, string | string[]> = {};
    const listed = connectionTokens(incoming.connection);
    for (const name in incoming) {
      const value = incoming[name];
      if (value === undefined || HOP_BY_HOP.has(name) || name === 'host' || name === 'expect') continue;
      if (listed !== undefined && listed.has(name)) continue;
      out[name] = value;
    }
    const peer = stripMapped(req.socket.remoteAddress);
    const trusted = this.trusted(req.socket.remoteAddress);
    const forwardedFor = incoming['x-forwarded-for'];
    out['x-forwarded-for'] = forwardedFor === undefined || peer === undefined ? (peer ?? 'unknown') : `${forwardedFor}, ${peer}`;
    if (!(trusted && incoming['x-forwarded-proto'] !== undefined)) out['x-forwarded-proto'] = 'http';
    if (!(trusted && incoming['x-forwarded-host'] !== undefined) && incoming.host !== undefined) out['x-forwarded-host'] = incoming.host;
    return out;
  }
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function connectionTokens(value: string | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  const tokens = new Set<string>();
  for (const t of value.split(',')) {
    const name = t.trim().toLowerCase();
    if (name !== '' && name !== 'close' && name !== 'keep-alive') tokens.add(name);
  }
  return tokens.size === 0 ? undefined : tokens;
}

/**
 * The upstream's response fields without hop-by-hop ones, then `extra` (the
 * RateLimit fields), as the flat name/value list `writeHead` takes. An
 * upstream field `extra` also names is replaced, or for IETF list fields
 * combined with it, so the client sees every policy, the app's included.
 */
function responseHead(headers: IncomingHttpHeaders | OutgoingHttpHeaders, extra: readonly HeaderPair[]): string[] {
  const listed = connectionTokens(headers.connection as string | undefined);
  const ours = extra.length === 0 ? undefined : extra.map((pair) => pair[0].toLowerCase());
  const flat: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    if (listed !== undefined && listed.has(name)) continue;
    if (ours !== undefined && ours.includes(name)) continue;
    if (Array.isArray(value)) for (const item of value) flat.push(name, item);
    else flat.push(name, String(value));
  }
  for (let i = 0; i < extra.length; i++) {
    const pair = extra[i]!;
    flat.push(pair[0], combinedValue(pair, headers[ours![i]!]));
  }
  return flat;
}

function stripMapped(address: string | undefined): string | undefined {
  return address !== undefined && address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function trustCheck(trust: TrustProxy): (peer: string | undefined) => boolean {
  if (trust === false) return () => false;
  if (typeof trust === 'number') return () => true;
  if (trust === 'framework') return () => false;
  const matcher = new AddressMatcher(trust, 'trustProxy');
  return (peer) => {
    const ip = peer === undefined ? undefined : parseIp(peer);
    return ip !== undefined && matcher.matches(ip);
  };
}

/** Writes a complete minimal HTTP response on a raw socket (upgrade requests have no ServerResponse) and closes it. */
export function writeRaw(socket: Duplex, status: number, headers: readonly HeaderPair[], body = ''): void {
  if (socket.destroyed) return;
  const reason = status === 429 ? 'Too Many Requests' : status === 502 ? 'Bad Gateway' : status === 504 ? 'Gateway Timeout' : status === 401 ? 'Unauthorized' : 'Error';
  let text = `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  for (const [name, value] of headers) text += `${name}: ${value}\r\n`;
  socket.end(`${text}\r\n${body}`);
}
