/** Helpers for adapters that answer through node:http objects (node:http itself and Express). */
/**
 * Request view, headers, response writing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestView } from './types.js';
import { combinedValue, type HeaderPair } from './headers.js';

/**
 * Builds the framework-neutral view of a node:http request.
 *
 * @param req - the incoming message
 * @param raw - the object user callbacks receive (often `req` itself)
 * @param url - the URL to take the path from (Express rewrites `req.url` under a mount path; pass `originalUrl`)
 * @param frameworkIp - the framework's idea of the client address, if any
 */
export function viewOf<Raw>(req: IncomingMessage, raw: Raw, url = req.url ?? '/', frameworkIp?: string): RequestView<Raw> {
  const q = url.indexOf('?');
  return {
    raw,
    socketAddress: req.socket?.remoteAddress,
    frameworkIp,
    headers: req.headers,
    method: req.method ?? 'GET',
    path: q < 0 ? url : url.slice(0, q),
  };
}

/** Sets each header on `res` (appending to IETF list fields already there), unless the response has already started. */
export function setHeaders(res: ServerResponse, headers: readonly HeaderPair[]): void {
  if (res.headersSent) return;
  for (const pair of headers) {
    // Only IETF list fields combine with an earlier value (another floodgate middleware's); the rest need no lookup.
    res.setHeader(pair[0], pair[2] === true ? combinedValue(pair, res.getHeader(pair[0])) : pair[1]);
  }
}

/** Writes a complete response; a no-op if one has already started (the client is gone or another handler answered). */
export function writeResponse(
  res: ServerResponse,
  status: number,
  headers: readonly HeaderPair[],
  contentType: string,
  body: string,
): void {
  if (res.headersSent || res.writableEnded) return;
  res.statusCode = status;
  setHeaders(res, headers);
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
