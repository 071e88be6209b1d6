/** The admin API's HTTP pieces. */
/**
 * Its error answer, method checks, path segments decoded, JSON bodies read (bounded) and JSON answers written.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Largest request body the admin API reads. */
const MAX_BODY = 4096;

/** An answer with a status and a JSON body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(String(body.error));
  }
}

/** A 400 answer naming the field that is wrong. */
export const badField = (field: string, error: string): ApiError => new ApiError(400, { error, field });

/**
 * A request as the admin API's handlers read it: its method, and its body as
 * JSON when they need it. In one process it is the HTTP request; under
 * `--workers` the primary reads the body and each worker gets it over IPC.
 */
export interface AdminRequest {
  readonly method: string | undefined;
  /** The body as JSON (an empty body reads as `{}`); rejects with 413 past the size limit, 400 when it is not JSON. */
  json(): Promise<unknown>;
}

/** Throws 405 unless `req` uses `method` (GET also admits HEAD). */
export function allow(req: Pick<AdminRequest, 'method'>, method: 'GET' | 'POST' | 'PUT' | 'DELETE'): void {
  if (req.method === method || (method === 'GET' && req.method === 'HEAD')) return;
  throw new ApiError(
    405,
    { error: `use ${method} here; got ${req.method ?? 'no method'}.` },
    { Allow: method === 'GET' ? 'GET, HEAD' : method },
  );
}

/**
 * Marks a path segment written as `=` + base64url of the UTF-8 text. Keys `.`
 * and `..` cannot travel percent-encoded: URL parsers (browsers, fetch, curl)
 * remove dot segments, `%2E` included, before the request is sent. A raw `=`
 * never comes out of encodeURIComponent (it writes `%3D`), so no segment
 * encoded the usual way starts with it.
 */
const BASE64_SEGMENT = '=';

/** The segment that names `text` in an admin path: encodeURIComponent, or {@link BASE64_SEGMENT} form for `.` and `..`. */
export function encodeSegment(text: string): string {
  return text === '.' || text === '..' ? BASE64_SEGMENT + Buffer.from(text, 'utf8').toString('base64url') : encodeURIComponent(text);
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A path segment percent-decoded, or base64url-decoded after {@link BASE64_SEGMENT}; 400 naming `field` when the encoding is broken. */
export function decode(segment: string, field: string): string {
  if (segment.startsWith(BASE64_SEGMENT)) {
    const text = segment.slice(BASE64_SEGMENT.length);
    const bytes = /^[A-Za-z0-9_-]*$/.test(text) ? Buffer.from(text, 'base64url') : undefined;
    // Only the canonical form: one text, one segment.
    if (bytes !== undefined && bytes.toString('base64url') === text) {
      try {
        return UTF8.decode(bytes);
      } catch {
        // Not UTF-8: answered below.
      }
    }
    throw badField(
      field,
      `the ${field} after "=" is not base64url of UTF-8 text (unpadded); write "=" followed by base64url, or encode it with encodeURIComponent.`,
    );
  }
  try {
    return decodeURIComponent(segment);
  } catch {
    throw badField(field, `the ${field} is not valid percent-encoding; encode it with encodeURIComponent.`);
  }
}

/** The 413 of a body over {@link MAX_BODY} bytes. */
export const bodyTooLarge = (): ApiError => new ApiError(413, { error: `the body is over ${MAX_BODY} bytes.`, field: 'body' });

/** A body's text as JSON (an empty body reads as `{}`); 400 when it is not JSON. */
export function parseJsonBody(text: string): unknown {
  try {
    return text.trim() === '' ? {} : JSON.parse(text);
  } catch {
    throw badField('body', 'the body is not valid JSON; send e.g. {"duration":"10m"}.');
  }
}

/**
 * The request body's text, or undefined as soon as it is over {@link MAX_BODY}
 * bytes (the rest is not read: the admin listener closes a connection with a
 * body after its answer).
 */
export function readBodyText(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    // A connection cut mid-body (the client gave up, or the listener's timeout cut it) ends no promise otherwise.
    req.on('close', () => reject(new Error('the connection closed before the body ended')));
  });
}

/** The request body as JSON (an empty body reads as `{}`); 413 past the size limit, 400 when it is not JSON. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const text = await readBodyText(req);
  // Not destroyed past the limit: that would lose the 413. The admin listener closes a connection with a body after its answer.
  if (text === undefined) throw bodyTooLarge();
  return parseJsonBody(text);
}

/** Writes `body` as JSON with `status`, uncached. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
  });
  res.end(text);
}
