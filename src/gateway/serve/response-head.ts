/** What the proxy writes around an upstream's answer. */
/**
 * The response head it passes on (hop-by-hop fields out, RateLimit fields in), and the minimal raw responses of
 * upgrade requests.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import { combinedValue, type HeaderPair } from '../../http/index.js';
import { connectionTokens, HOP_BY_HOP } from './forward-headers.js';

/**
 * The upstream's response fields without hop-by-hop ones, then `extra` (the
 * RateLimit fields), as the flat name/value list `writeHead` takes. An
 * upstream field `extra` also names is replaced, or for IETF list fields
 * combined with it, so the client sees every policy, the app's included.
 */
export function responseHead(headers: IncomingHttpHeaders | OutgoingHttpHeaders, extra: readonly HeaderPair[]): string[] {
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

const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  429: 'Too Many Requests',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** Writes a complete minimal HTTP response on a raw socket (upgrade requests have no ServerResponse) and closes it. */
export function writeRaw(socket: Duplex, status: number, headers: readonly HeaderPair[], body = ''): void {
  if (socket.destroyed) return;
  const reason = REASONS[status] ?? 'Error';
  let text = `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  for (const [name, value] of headers) text += `${name}: ${value}\r\n`;
  socket.end(`${text}\r\n${body}`);
}
