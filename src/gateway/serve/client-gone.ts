/** The signal a waiting request's limiter listens to: it aborts when the client goes away before its response is done. */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

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
