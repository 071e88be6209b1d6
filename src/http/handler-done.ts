/** When the app is done with a response. */
/**
 * Finished, or, for a client that left first, when the handler ends it (res.end()), bounded; what an in-flight slot
 * and a settlement wait for.
 */
import type { ServerResponse } from 'node:http';

/** Most ms a response whose client left is waited on for its handler to end it, when the caller gives no bound. */
const DEFAULT_HANDLER_WAIT_MS = 30_000;

/**
 * Calls `done` once, when the work behind `res` is over: when it finishes,
 * or, when its client left first, when the handler ends it (`res.end()`, as
 * Express, Fastify and node:http handlers do whether or not the client is
 * still there; the Koa adapter ends it for Koa, see {@link endAbandoned}),
 * but at most `boundMs` after the client left, so a handler that never ends
 * cannot hold what waits on it for ever. Frameworks keep running a handler
 * after its socket closed: a concurrency slot freed at the close would let a
 * client that hangs up at once start as many jobs as it likes.
 */
export function whenHandlerDone(res: ServerResponse, done: () => void, boundMs: number = DEFAULT_HANDLER_WAIT_MS): void {
  if (res.writableFinished || res.writableEnded) {
    queueMicrotask(done);
    return;
  }
  let called = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const once = (): void => {
    if (called) return;
    called = true;
    if (timer !== undefined) clearTimeout(timer);
    res.off('finish', once);
    res.off('close', closed);
    done();
  };
  const closed = (): void => {
    if (res.writableEnded) {
      once();
      return;
    }
    // The client left before the handler ended the response: wait for the handler's end, bounded. Patched on this
    // response only, and outermost (a compression middleware's own patch runs inside it).
    const end = res.end;
    res.end = function (this: ServerResponse, ...args: Parameters<ServerResponse['end']>): ServerResponse {
      const result = end.apply(this, args);
      once();
      return result;
    } as ServerResponse['end'];
    timer = setTimeout(once, boundMs);
    timer.unref?.();
  };
  res.once('finish', once);
  // A client that left while the decision was pending (a store round trip, a wait) closed the response already.
  if (res.destroyed) closed();
  else res.once('close', closed);
}

/**
 * Ends a response whose client left, for a framework that skips ending
 * one (Koa does not respond on a closed socket): the handler is done, so
 * what waits for it (see {@link whenHandlerDone}) is released. Does nothing
 * to a response whose client is still there.
 */
export function endAbandoned(res: ServerResponse): void {
  if (res.destroyed && !res.writableEnded) res.end();
}
