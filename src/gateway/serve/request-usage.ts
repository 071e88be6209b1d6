/** `cost.requestUsage`: a streamed JSON request is made to ask for its usage too. */
/**
 * A buffered JSON request that asks for a stream is made to ask for its usage too (`stream_options.include_usage`), so
 * an OpenAI-style upstream reports what the stream cost.
 */
import type { IncomingMessage } from 'node:http';
import type { OutgoingBody } from './request-body.js';

/** `body` as forwarded: asking for the usage (see {@link withUsageAsked}) when `asks` and the body was buffered whole. */
export function askingUsage(req: IncomingMessage, body: OutgoingBody, asks: boolean): OutgoingBody {
  return asks && Buffer.isBuffer(body) ? withUsageAsked(req, body) : body;
}

/**
 * The buffered `body` of `req`, asking for the stream's usage: a JSON object
 * with `"stream": true` gets `stream_options.include_usage: true` (other
 * `stream_options` kept), and `req`'s Content-Length is set to the new
 * length. Anything else (not JSON, not a streaming request, usage already
 * asked for) is returned as it is. Other AI gateways do the same: the
 * request decides whether an OpenAI-style stream reports its usage, and
 * one that does not is charged `cost.missing`.
 */
function withUsageAsked(req: IncomingMessage, body: Buffer): Buffer {
  if (!String(req.headers['content-type'] ?? '').includes('json')) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return body;
  const request = parsed as Record<string, unknown>;
  if (request.stream !== true) return body;
  const options = request.stream_options;
  if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) return body;
  if ((options as Record<string, unknown> | undefined)?.include_usage === true) return body;
  request.stream_options = { ...(options as Record<string, unknown> | undefined), include_usage: true };
  const asked = Buffer.from(JSON.stringify(request), 'utf8');
  if (req.headers['content-length'] !== undefined) req.headers['content-length'] = String(asked.length);
  return asked;
}
