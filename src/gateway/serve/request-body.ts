/** Request bodies on their way upstream: small ones read whole from the client first, larger ones streamed under a minimum rate. */
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

/** What to send upstream as the body: none, the whole body read already, or a stream still arriving from the client. */
export type OutgoingBody = null | Buffer | Readable;

/** A streamed body must average the minimum rate only after this long: a TCP slow start or a client that pauses to think should not be cut. */
export const BODY_RATE_GRACE_MS = 5_000;

/** True when the request announces a body. */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Reads a body of at most `limit` bytes whole before it goes upstream, so a
 * client trickling it holds only its own socket, never an upstream
 * connection. A body declared larger, or a chunked one that grows past the
 * limit, is streamed (what was read already first).
 * @param ready - called once with the body and whether it is still streaming; never when the client leaves first
 * @param gone - called once when the client leaves (or fails) before the body is ready
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  ready: (body: OutgoingBody, streaming: boolean) => void,
  gone: () => void,
): void {
  if (!hasBody(req)) {
    ready(null, false);
    return;
  }
  const declared = req.headers['content-length'];
  if (limit === 0 || (declared !== undefined && Number(declared) > limit)) {
    ready(req, true);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const cleanup = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onGone);
    req.off('close', onGone);
  };
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    size += chunk.length;
    if (size <= limit) return;
    // Only a chunked body can get here: node ends a declared one at its length.
    req.pause();
    cleanup();
    ready(Readable.from(prefixThen(chunks, req), { objectMode: false }), true);
  };
  const onEnd = (): void => {
    cleanup();
    ready(Buffer.concat(chunks, size), false);
  };
  const onGone = (): void => {
    cleanup();
    gone();
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onGone);
  req.on('close', onGone);
}

async function* prefixThen(prefix: readonly Buffer[], rest: IncomingMessage): AsyncIterable<Buffer> {
  yield* prefix;
  for await (const chunk of rest) yield chunk as Buffer;
}

/**
 * Watches a body streaming upstream: once {@link BODY_RATE_GRACE_MS} has
 * passed, the bytes the client sent must average `minRate` per second, or
 * `slow` is called (once). A client that trickles a large body would
 * otherwise hold an upstream connection for as long as it likes.
 * @returns a function that stops the watch
 */
export function watchBodyRate(req: IncomingMessage, minRate: number, slow: () => void): () => void {
  if (minRate <= 0) return () => undefined;
  const socket = req.socket;
  const startBytes = socket.bytesRead;
  const startTime = Date.now();
  const timer = setInterval(() => {
    const elapsed = Date.now() - startTime;
    if (elapsed < BODY_RATE_GRACE_MS) return;
    if (socket.bytesRead - startBytes < (minRate * elapsed) / 1000) {
      stop();
      slow();
    }
  }, 1_000);
  timer.unref();
  const stop = (): void => {
    clearInterval(timer);
    req.off('end', stop);
    req.off('close', stop);
  };
  req.once('end', stop);
  req.once('close', stop);
  return stop;
}
