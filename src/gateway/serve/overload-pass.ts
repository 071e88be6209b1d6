/** A request's way through the overload gate: its slot or its refusal, the latency its upstream exchange gives, its end. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { HeaderPair } from '../../http/index.js';
import type { OverloadSlot } from '../../index.js';
import type { OverloadGate } from '../rules/overload-gate.js';
import { answerProblem } from './problem-answer.js';

/**
 * Asks the gate for a slot: `decided` gets it (admitted, or refused with a reason) at once or after a wait in the request's
 * class and tenant line. A client that leaves while it waits gives up its place at once: `left` runs instead, and nothing
 * is held for it.
 */
export function passGate(
  gate: OverloadGate,
  req: IncomingMessage,
  res: ServerResponse | Duplex,
  decided: (slot: OverloadSlot) => void,
  left: () => void,
): void {
  const request = gate.request(req);
  const now = gate.limiter.tryAcquire(request);
  if (now !== undefined) {
    decided(now);
    return;
  }
  const gone = new AbortController();
  const leave = (): void => gone.abort();
  res.once('close', leave);
  gate.limiter.acquire({ ...request, signal: gone.signal }).then(
    (slot) => {
      res.off('close', leave);
      decided(slot);
    },
    // Only an abort rejects: the client left while it waited, so nobody is answered.
    left,
  );
}

/** What the upstream's head says of its load: the latency from admission (or from the body's end) to it, and whether its status is an overload. */
export interface HeadSample {
  latencyMs: number;
  error: boolean;
}

/**
 * A request admitted by the overload gate: its slot, when the upstream's latency started, and the sample its head gave.
 * A head that came while the client was still sending its body (an upstream that answers 413 at its body limit, or 401
 * before reading) measured the client's upload as much as the upstream: it gives no latency sample (its slot ends as
 * cancelled), else a client that trickles its upload to such an endpoint would read as a slow upstream and shrink the
 * limit for everyone. An overload status still counts.
 */
export class Ticket {
  /** The slot as the proxy ends it: its release drops the sample of a head that came mid-upload. */
  readonly slot: OverloadSlot;
  /** When the upstream's latency started: admission, or the end of a streamed body. */
  since: number;
  private sample: HeadSample | undefined;
  private uploading: boolean;
  private early = false;

  /**
   * @param slot - the gate's slot
   * @param req - the request, whose streamed body may still be arriving
   * @param streaming - true when its body streams (larger than proxy.requestBuffer)
   */
  constructor(slot: OverloadSlot, req: IncomingMessage, streaming: boolean) {
    this.since = performance.now();
    this.uploading = streaming && !req.readableEnded;
    if (this.uploading)
      req.once('end', () => {
        this.uploading = false;
        this.since = Math.max(this.since, performance.now());
      });
    const release = slot.release;
    this.slot = {
      ...slot,
      release: (outcome) => (this.early && outcome?.error !== true ? slot.cancel() : release(outcome)),
    };
  }

  /** The sample the upstream's head gave; undefined until it came. */
  get outcome(): HeadSample | undefined {
    return this.sample;
  }

  set outcome(sample: HeadSample | undefined) {
    this.sample = sample;
    if (sample !== undefined && this.uploading) this.early = true;
  }
}

/** The ticket of an admitted request. A streamed body is still arriving: the upstream's latency starts once the client has sent it all. */
export function openTicket(slot: OverloadSlot, req: IncomingMessage, streaming: boolean): Ticket {
  return new Ticket(slot, req, streaming);
}

/**
 * Ends the slot of an exchange that failed: with its sample when the head had come (the body failed after it), as
 * neither when the client's leaving cut it (not the upstream's doing), else as an overload (a timeout, a refused connection).
 */
export function endFailed(ticket: Ticket, error: unknown, res: ServerResponse): void {
  if (ticket.outcome !== undefined) {
    ticket.slot.release(ticket.outcome);
    return;
  }
  const code = (error as { code?: string; name?: string }).code ?? (error as { name?: string }).name ?? '';
  if (code === 'UND_ERR_ABORTED' || code === 'AbortError' || res.destroyed) ticket.slot.cancel();
  else ticket.slot.drop();
}

/** The gate refused the request: 503, and why (`Floodgate-Overload`), so a client can tell it from the upstream's own 503. */
export function refuseOverloaded(res: ServerResponse, extra: readonly HeaderPair[], slot: OverloadSlot): void {
  answerProblem(
    res,
    503,
    'Service Unavailable',
    slot.reason === 'timeout'
      ? 'The upstream is at its limit and no slot freed up in time; try again shortly.'
      : 'The upstream is at its limit; try again shortly.',
    extra,
    [
      ['Retry-After', '1'],
      ['Floodgate-Overload', slot.reason ?? 'limit'],
    ],
  );
}
