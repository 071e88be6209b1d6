/** Upgrade tunnels: which upgrade requests may become one (a well-formed WebSocket handshake by default), and the byte pipe after the upstream's 101. */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Pool } from 'undici';
import type { HeaderPair } from '../http/headers.js';
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
  const connection = String(req.headers.connection ?? '').toLowerCase().split(',').map((t) => t.trim());
  if (!connection.includes('upgrade')) return { status: 400, detail: 'an upgrade request must list upgrade in Connection' };
  if (protocol === 'websocket') {
    if (req.method !== 'GET') return { status: 400, detail: 'a WebSocket handshake must be a GET' };
    if (!WEBSOCKET_KEY.test(String(req.headers['sec-websocket-key'] ?? ''))) return { status: 400, detail: 'a WebSocket handshake needs a valid Sec-WebSocket-Key' };
    if (!/^\d{1,3}$/.test(String(req.headers['sec-websocket-version'] ?? ''))) return { status: 400, detail: 'a WebSocket handshake needs Sec-WebSocket-Version' };
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
 * Asks the upstream to upgrade and, on its 101, pipes bytes both ways until
 * either side closes. A client that leaves before the 101 aborts the pending
 * upgrade, and an upstream socket that still arrives is destroyed: nothing
 * may keep an upstream connection for a client that is gone.
 * @param failed - called with the error when the upstream refuses or fails (not when the client left)
 */
export function openTunnel(pool: Pool, socket: Duplex, request: TunnelRequest, failed: (error: unknown) => void): void {
  const controller = new AbortController();
  let settled = false;
  const clientLeft = (): void => {
    if (!settled) controller.abort();
  };
  socket.once('close', clientLeft);
  socket.on('error', () => socket.destroy());
  pool
    .upgrade({ path: request.path, method: request.method, headers: request.headers, protocol: request.protocol, signal: controller.signal })
    .then(
      ({ headers: upstreamHeaders, socket: upstream }) => {
        settled = true;
        socket.off('close', clientLeft);
        if (socket.destroyed || !socket.writable) {
          upstream.destroy();
          return;
        }
        let head101 = `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${request.protocol}\r\n`;
        for (const [name, value] of Object.entries(upstreamHeaders)) {
          if (value === undefined || HOP_BY_HOP.has(name)) continue;
          for (const v of Array.isArray(value) ? value : [value]) head101 += `${name}: ${v}\r\n`;
        }
        for (const [name, value] of request.extra) head101 += `${name}: ${value}\r\n`;
        socket.write(`${head101}\r\n`);
        if (request.head.length > 0) upstream.write(request.head);
        upstream.on('error', () => socket.destroy());
        socket.on('error', () => upstream.destroy());
        upstream.on('close', () => socket.destroy());
        socket.on('close', () => upstream.destroy());
        upstream.pipe(socket);
        socket.pipe(upstream);
      },
      (error: unknown) => {
        settled = true;
        socket.off('close', clientLeft);
        if (controller.signal.aborted) return;
        failed(error);
      },
    );
}
