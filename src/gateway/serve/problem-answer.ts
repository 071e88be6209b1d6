/** The gateway's own error answers on the proxy path: an RFC 9457 problem document with the rules' RateLimit fields. */
import type { ServerResponse } from 'node:http';
import type { HeaderPair } from '../../http/index.js';

/**
 * Answers `res` with `status` and a problem document (`title`, `detail`), the RateLimit fields in `extra` and any `more`
 * header fields (Retry-After, Floodgate-Overload). Does nothing once the head is sent or the client is gone.
 */
export function answerProblem(
  res: ServerResponse,
  status: number,
  title: string,
  detail: string,
  extra: readonly HeaderPair[],
  more: readonly HeaderPair[] = [],
): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify({ type: 'about:blank', title, status, detail });
  res.statusCode = status;
  for (const pair of extra) res.setHeader(pair[0], pair[1]);
  for (const pair of more) res.setHeader(pair[0], pair[1]);
  res.setHeader('Content-Type', 'application/problem+json');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
