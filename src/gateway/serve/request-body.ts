/** Request bodies on their way upstream. */
/**
 * Small ones read whole from the client first (within the process's budget), larger ones streamed under a minimum
 * rate.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { RequestBufferBudget } from './request-buffer-budget.js';

/** What to send upstream as the body: none, the whole body read already, or a stream still arriving from the client. */
export type OutgoingBody = null | Buffer | Readable;

/** A streamed body must average the minimum rate only after this long: a TCP slow start or a client that pauses to think should not be cut. */
const BODY_RATE_GRACE_MS = 5_000;

/** True when the request announces a body. */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** How request bodies are buffered: the largest one read whole, and the budget every buffered body of the process shares. */
export interface BodyBuffering {
  /** `proxy.requestBuffer`: bodies up to this many bytes are read whole; 0 streams every body. */
  readonly limit: number;
  /** `proxy.requestBufferTotal`, shared by every request of the gateway. */
  readonly budget: RequestBufferBudget;
}

/**
 * Reads a body of at most `buffering.limit` bytes whole before it goes
 * upstream, so a client trickling it holds only its own socket, never an
 * upstream connection. A body declared larger, or a chunked one that grows
 * past the limit, is streamed (what was read already first); so is one that
 * does not fit in what is left of the process's budget, which then holds
 * no more than `proxy.requestBufferTotal` however many clients send bodies.
 * Streaming is always possible (no rule reads a request body), and keeps
 * the request served rather than refused; a streamed body must keep
 * `proxy.minBodyRate`, so a flood past the budget can hold an upstream
 * connection only as long as a large body could anyway. What a body took
 * from the budget is given back when `res` closes: the buffer is the
 * upstream request's until its exchange ends.
 * @param ready - called once with the body and whether it is still streaming; never when the client leaves first
 * @param gone - called once when the client leaves (or fails) before the body is ready
 */
export function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  buffering: BodyBuffering,
  ready: (body: OutgoingBody, streaming: boolean) => void,
  gone: () => void,
): void {
  if (!hasBody(req)) {
    ready(null, false);
    return;
  }
  const { limit, budget } = buffering;
  const declared = req.headers['content-length'];
  const length = declared === undefined ? -1 : Number(declared);
  // A declared body takes its whole length at once; a chunked one takes each chunk as it comes.
  if (limit === 0 || length > limit || (length >= 0 && !budget.take(length))) {
    ready(req, true);
    return;
  }
  let held = length >= 0 ? length : 0;
  let closed = false;
  const giveBack = (): void => {
    closed = true;
    budget.give(held);
    held = 0;
  };
  res.once('close', giveBack);
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
    if (size <= limit) {
      // Declared bodies took their length already; once the answer has closed, what still arrives is nobody's.
      if (length >= 0 || closed) return;
      if (budget.take(chunk.length)) {
        held += chunk.length;
        return;
      }
    }
    // Only a chunked body can get here (past the limit, or past the budget): node ends a declared one at its length.
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
