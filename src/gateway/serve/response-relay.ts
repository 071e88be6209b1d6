/** The body of a forwarded answer that something waits on (a concurrency slot, a cost read from it). */
/**
 * Passed to the client while it is there, then read on (and discarded), within bounds, once it leaves, so the slot
 * ends with the upstream's work and the usage is still learned.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { CostWatch } from './response-cost.js';

/** How much of an answer is drained after its client left: bytes read from then on, and ms from then on. */
export interface DrainBounds {
  /** Bytes of body read after the client left; past them the upstream request is cut. */
  readonly bytes: number;
  /** Ms after the client left until the upstream request is cut, whatever it still sends. */
  readonly ms: number;
}

/** The error a drain past its byte bound ends with (undici then cuts the upstream request). */
class DrainBound extends Error {
  readonly code = 'DRAIN_BOUND';
}

/**
 * One forwarded answer whose end matters. While the client is there the
 * body goes to it with its backpressure (as `pipe` would); once it left
 * (see {@link left}) the body is read and discarded, still shown to the
 * cost readers, until the upstream ends it, or until {@link DrainBounds}
 * are spent and the upstream request is cut. {@link ended} then ends the
 * closed response, which is what frees the request's slots and settles its
 * cost (whenHandlerDone): the slot ends when the upstream exchange ends,
 * not when the client hangs up.
 */
export class ResponseRelay {
  private gone = false;
  private over = false;
  private drained = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * @param res - the client's response
   * @param watch - the cost readers, when a rule reads the cost from the response
   * @param bounds - how much is drained after the client left
   */
  constructor(
    private readonly res: ServerResponse,
    readonly watch: CostWatch | undefined,
    private readonly bounds: DrainBounds,
  ) {}

  /** Ms after the client leaves that the exchange may still run: what those waiting on it may wait, at most. */
  get boundMs(): number {
    return this.bounds.ms;
  }

  /** The client left before the answer ended: the exchange runs on, cut by `abort` once it outlasts the bounds. */
  left(abort: () => void): void {
    if (this.gone || this.over) return;
    this.gone = true;
    this.timer = setTimeout(abort, this.bounds.ms);
    this.timer.unref();
  }

  /** The upstream's head: shown to the cost readers; returns where its body goes. */
  body(status: number, headers: IncomingHttpHeaders): Writable {
    this.watch?.head(status, headers);
    const res = this.res;
    const watch = this.watch;
    return new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        watch?.data(chunk);
        if (!res.destroyed) {
          if (res.write(chunk)) done();
          else afterDrain(res, done);
          return;
        }
        this.drained += chunk.length;
        done(this.drained > this.bounds.bytes ? new DrainBound(`drained ${this.bounds.bytes} bytes after the client left`) : null);
      },
      final: (done) => {
        // The body is whole: the readers read the usage before the response ends and settles.
        watch?.whole();
        if (!res.destroyed) res.end();
        done();
      },
      destroy: (error, done) => {
        // Whatever cut the body (an upstream failure, an abort) cuts the client's response too: it must not look whole.
        if (error !== null && !res.destroyed) res.destroy();
        done(error);
      },
    });
  }

  /** The upstream exchange is over (whole, failed or cut): a response whose client left is ended, freeing what waits on it. */
  ended(): void {
    if (this.over) return;
    this.over = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.watch?.done();
    if (this.res.destroyed && !this.res.writableEnded) this.res.end();
  }
}

/** Calls `done` once `res` can take more, or once it closed (the client left: the body is drained from then on). */
function afterDrain(res: ServerResponse, done: () => void): void {
  const go = (): void => {
    res.off('drain', go);
    res.off('close', go);
    done();
  };
  res.once('drain', go);
  res.once('close', go);
}
