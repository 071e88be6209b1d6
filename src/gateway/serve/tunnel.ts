/** Upgrade tunnels: which upgrade requests may become one, and the byte pipe after the upstream's 101. */
/**
 * By default a well-formed WebSocket handshake may become a tunnel.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Duplex } from 'node:stream';
import type { HeaderPair } from '../../http/index.js';
import { HOP_BY_HOP } from './forward-headers.js';

/** Why an upgrade request is refused before any decision: the status to answer and a line of explanation. */
export interface UpgradeRefusal {
  /** 400 for a malformed handshake, 403 for a protocol the gateway does not tunnel. */
  readonly status: 400 | 403;
  /** The reason, sent as the text body. */
  readonly detail: string;
}

/** RFC 6455 §4.1: the key is 16 random bytes in base64. */
const WEBSOCKET_KEY = /^[A-Za-z0-9+/]{22}==$/;

/**
 * Checks an upgrade request against the allowed protocols. A tunnel carries
 * bytes the rules never see again, so only one protocol may be asked for, it
 * must be on the list, and a WebSocket handshake must be complete (GET,
 * `Connection: upgrade`, `Sec-WebSocket-Key`, `Sec-WebSocket-Version`).
 * @returns the protocol token to tunnel, or the refusal
 */
export function checkUpgrade(req: IncomingMessage, allowed: readonly string[]): string | UpgradeRefusal {
  const offered = String(req.headers.upgrade ?? '')
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '');
  if (offered.length !== 1) return { status: 400, detail: 'an upgrade request must name exactly one protocol' };
  const protocol = offered[0]!;
  if (!allowed.includes(protocol)) return { status: 403, detail: `upgrades to ${protocol} are not tunnelled by this gateway` };
  const connection = String(req.headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((t) => t.trim());
  if (!connection.includes('upgrade')) return { status: 400, detail: 'an upgrade request must list upgrade in Connection' };
  if (protocol === 'websocket') {
    if (req.method !== 'GET') return { status: 400, detail: 'a WebSocket handshake must be a GET' };
    if (!WEBSOCKET_KEY.test(String(req.headers['sec-websocket-key'] ?? '')))
      return { status: 400, detail: 'a WebSocket handshake needs a valid Sec-WebSocket-Key' };
    if (!/^\d{1,3}$/.test(String(req.headers['sec-websocket-version'] ?? '')))
      return { status: 400, detail: 'a WebSocket handshake needs Sec-WebSocket-Version' };
  }
  return protocol;
}

/** What {@link openTunnel} needs to know about the request. */
export interface TunnelRequest {
  /** Path (with query) to ask the upstream for. */
  readonly path: string;
  /** Method of the upgrade request. */
  readonly method: string;
  /** Headers to send upstream. */
  readonly headers: Record<string, string | string[]>;
  /** The upgrade protocol token. */
  readonly protocol: string;
  /** Bytes the client sent after its head. */
  readonly head: Buffer;
  /** The RateLimit fields to add to the 101. */
  readonly extra: readonly HeaderPair[];
}

/**
 * Asks the upstream to upgrade on a connection of its own (outside the
 * pool: a tunnel never returns to it) and, on its 101, pipes bytes both ways
 * until either side closes. A client that leaves before the 101 destroys
 * the upstream connection at once, whether it is still connecting or
 * waiting: nothing may hold an upstream socket for a client that is gone.
 * An answer other than 101 (an app refusing the handshake) is relayed as it is.
 * @param upstream - the upstream origin
 * @param timeoutMs - the upstream must answer within this (connect included), else `failed` with `timeout` true
 * @param failed - called when the upstream fails or times out (not when the client left)
 * @param ended - called once when the handshake is over: with the upstream's status (101, or an answer relayed as it is),
 *   `failed` when the upstream failed or timed out, `left` when the client went first (the overload gate's slot ends with it)
 */
export function openTunnel(
  upstream: URL,
  socket: Duplex,
  request: TunnelRequest,
  timeoutMs: number,
  failed: (error: unknown, timeout: boolean) => void,
  ended?: (how: { status: number } | 'failed' | 'left') => void,
): void {
  let finished = false;
  const outgoing = (upstream.protocol === 'https:' ? httpsRequest : httpRequest)({
    protocol: upstream.protocol,
    hostname: upstream.hostname.replace(/^\[|\]$/g, ''),
    port: upstream.port === '' ? undefined : Number(upstream.port),
    path: request.path,
    method: request.method,
    headers: { ...request.headers, connection: 'Upgrade', upgrade: request.protocol },
    agent: false,
  });
  const finish = (): void => {
    finished = true;
    clearTimeout(timer);
    socket.off('close', clientLeft);
  };
  const fail = (error: unknown, timeout: boolean): void => {
    if (finished) return;
    finish();
    outgoing.destroy();
    ended?.('failed');
    failed(error, timeout);
  };
  const timer = setTimeout(() => fail(new Error(`no upgrade answer within ${timeoutMs} ms`), true), timeoutMs);
  const clientLeft = (): void => {
    if (finished) return;
    finish();
    outgoing.destroy();
    ended?.('left');
  };
  socket.once('close', clientLeft);
  socket.on('error', () => socket.destroy());
  outgoing.on('error', (error) => fail(error, false));
  outgoing.on('response', (res) => {
    if (finished) return void res.destroy();
    finish();
    ended?.({ status: res.statusCode ?? 502 });
    socket.write(
      `HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ''}\r\nConnection: close\r\n${fieldLines(res.rawHeaders, request.extra)}\r\n`,
    );
    res.on('error', () => socket.destroy());
    res.pipe(socket);
  });
  outgoing.on('upgrade', (res: IncomingMessage, upstreamSocket: Duplex, upstreamHead: Buffer) => {
    if (finished || socket.destroyed || !socket.writable) {
      upstreamSocket.destroy();
      if (!finished) {
        finish();
        ended?.('left');
      }
      return;
    }
    finish();
    ended?.({ status: 101 });
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${request.protocol}\r\n${fieldLines(res.rawHeaders, request.extra)}\r\n`,
    );
    if (upstreamHead.length > 0) socket.write(upstreamHead);
    if (request.head.length > 0) upstreamSocket.write(request.head);
    upstreamSocket.on('error', () => socket.destroy());
    socket.on('error', () => upstreamSocket.destroy());
    upstreamSocket.on('close', () => socket.destroy());
    socket.on('close', () => upstreamSocket.destroy());
    upstreamSocket.pipe(socket);
    socket.pipe(upstreamSocket);
  });
  outgoing.end();
}

/** The upstream's header lines without hop-by-hop ones (or those `extra` names), then `extra` (the RateLimit fields). */
function fieldLines(raw: readonly string[], extra: readonly HeaderPair[]): string {
  const ours = extra.map((pair) => pair[0].toLowerCase());
  let lines = '';
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!HOP_BY_HOP.has(name) && !ours.includes(name)) lines += `${raw[i]}: ${raw[i + 1]}\r\n`;
  }
  for (const [name, value] of extra) lines += `${name}: ${value}\r\n`;
  return lines;
}
