/** The signal a waiting request's limiter listens to. */
/**
 * It aborts when the client goes away before its response is done; and how an adapter tells a wait its client
 * abandoned.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCode, isFloodgateError } from '../core/errors.js';

/**
 * A source of the signal that aborts when `res` (or an upgrade's socket)
 * closes before it finished: the client left. The controller is made only
 * when a limiter asks for it, that is when a request is about to wait.
 */
export function abortOnClose(res: ServerResponse | Duplex): () => AbortSignal {
  let controller: AbortController | undefined;
  return () => {
    if (controller !== undefined) return controller.signal;
    const made = new AbortController();
    controller = made;
    if (res.destroyed) made.abort();
    else
      res.once('close', () => {
        if (!res.writableFinished) made.abort();
      });
    return made.signal;
  };
}

/**
 * True for the error of a wait whose client left (FLOODGATE_ABORTED): nothing
 * was spent and nobody is there to answer, so adapters drop the request
 * instead of handing the error to the framework's error handling.
 */
export function abandoned(error: unknown): boolean {
  return isFloodgateError(error, ErrorCode.ABORTED);
}

/**
 * True when `res`'s client left before the response began: a request
 * admitted to a route with an in-flight limit after that is not handed to
 * the app, whose work would then run without the slot its client gave up.
 */
export function goneBeforeAdmission(res: ServerResponse): boolean {
  return res.destroyed && !res.writableFinished;
}
