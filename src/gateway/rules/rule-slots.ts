/** A request admitted by a rule with `concurrency`. */
/**
 * The slot it holds until the upstream exchange ends (not the client's connection), or until it turns out not to be
 * forwarded.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { HttpLimiter, RateLimitInfo } from '../../http/index.js';

/** What an admitted request holds in a rule until its response ends: a concurrency slot, perhaps a reservation too. */
export interface Hold {
  /**
   * Lets the rule's HttpLimiter free what the request holds when the
   * upstream exchange behind `res` ends: when `res` finishes, or, when the
   * client left first, when the proxy ends the closed response after
   * draining the answer, at most `boundMs` after the client left.
   */
  watch(req: IncomingMessage, res: ServerResponse, boundMs: number): void;
  /** The request will not be forwarded after all (a later rule refused it, the decision endpoint answered it, a tunnel ended): free its slot now. */
  abandon(req: IncomingMessage): void;
}

/** The slot of a request admitted by a rule with `concurrency` and no `cost` (a rule with cost holds its slot through its Charge). */
export class SlotHold implements Hold {
  /**
   * @param limiter - the rule's HttpLimiter, which took the slot
   * @param info - what it counted for the request
   */
  constructor(
    private readonly limiter: HttpLimiter<IncomingMessage>,
    private readonly info: RateLimitInfo,
  ) {}

  watch(req: IncomingMessage, res: ServerResponse, boundMs: number): void {
    this.limiter.watchResponse(req, res, this.info, boundMs);
  }

  abandon(req: IncomingMessage): void {
    this.limiter.release(req, this.info);
  }
}

/** Frees the slots of requests that will not be forwarded (see {@link Hold.abandon}). */
export function abandonAll(req: IncomingMessage, holds: readonly Hold[] | undefined): void {
  if (holds === undefined) return;
  for (const hold of holds) hold.abandon(req);
}

/** A tunnel's slots are held while it is open: freed when its socket closes, however it closes. */
export function freeWhenClosed(
  req: IncomingMessage,
  socket: Duplex,
  verdict: { readonly holds?: readonly Hold[] | undefined; readonly charges?: readonly Hold[] | undefined },
): void {
  if (verdict.holds === undefined && verdict.charges === undefined) return;
  const free = (): void => {
    abandonAll(req, verdict.holds);
    abandonAll(req, verdict.charges);
  };
  if (socket.destroyed) free();
  else socket.once('close', free);
}
