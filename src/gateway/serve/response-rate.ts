/** Cuts a response whose client reads it too slowly (`proxy.minResponseRate`) or too long (`proxy.responseTimeout`). */
/**
 * One timer per proxy looks at every connection with a response in flight once a second.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { GatewayLogger } from '../runtime/log.js';
import type { GatewayMetrics } from '../runtime/metrics.js';
import { throttled } from '../../util/throttle.js';

/** Why a response was cut. */
export type ResponseCut = 'slow_response' | 'response_timeout';

/**
 * Grace before a client that is behind must read at the minimum rate: a TCP
 * slow start, or a client that stops to parse a chunk, is not cut.
 */
const RESPONSE_RATE_GRACE_MS = 5_000;

/** How often the connections are looked at; the limits are kept to within this. */
const TICK_MS = 1_000;

/** One client connection's state, made once per connection and reused by every response on it. */
interface Relay {
  readonly socket: Socket;
  /** The response relayed last: a connection's answers end in order, so once it has ended all have. */
  res: ServerResponse | undefined;
  /** When the connection began relaying, ms since the epoch. */
  started: number;
  /** True when bytes for the client were queued at the last look. */
  behind: boolean;
  /** When the last look was, ms since the epoch. */
  lookedAt: number;
  /** Bytes the kernel had taken from this connection at the last look. */
  sent: number;
  /** Time between looks that both found the client behind, since the connection began relaying, ms. */
  behindMs: number;
  /** Bytes the kernel took in that time. */
  behindBytes: number;
}

/**
 * Watches responses on their way to clients. `proxy.clientWriteTimeout` is
 * an idle timer: a client that lets a write through now and then (reading a
 * few KB every 2 s) resets it for ever, and four such readers held a
 * 4-connection upstream pool while everyone else got 503. Only a client
 * that is behind is judged (bytes for it are queued in this process because
 * the kernel would not take them), so an upstream that is slow itself (a
 * server-sent event stream, a long poll) is never cut for it.
 *
 * Over the time the client has been behind (between two looks that both
 * found it so), the bytes the kernel took for it must average `minRate`
 * after a grace of {@link RESPONSE_RATE_GRACE_MS} (as `minBodyRate` for
 * request bodies, and Kestrel's MinResponseDataRate), or the response is
 * cut. Catching up for a moment stops the clock but does not start the
 * average over, so a client cannot buy a new grace with a burst. The kernel
 * is seen to take a write only once the whole write is in, so the bytes
 * still queued are counted in the client's favour: a client at `minRate` or
 * faster is never cut, and one at a fraction f of it is cut after about
 * (grace + queued / minRate) / (1 − f) of being behind. A response still
 * behind `timeoutMs` after its connection began relaying is cut whatever
 * its rate, which also bounds what a client that read fast first can bank.
 * Cutting destroys the response and its connection, which ends the
 * upstream exchange.
 *
 * The hot path only looks up the connection's state and adds it to a set;
 * the one timer runs while some response is relayed.
 */
export class ResponseRateWatch {
  private readonly relays = new WeakMap<Socket, Relay>();
  private readonly active = new Set<Relay>();
  /** Answers pipelined behind another, not yet given their connection: watched from the look that finds it. */
  private readonly queued = new Set<ServerResponse>();
  private timer: NodeJS.Timeout | undefined;
  /** A flood of slow readers must not log at its own rate: one line a second, with how many were held back. */
  private readonly logCut = throttled<ResponseCut>(1000, (reason, held) =>
    this.log.info(
      { reason, minResponseRate: this.minRate, responseTimeoutMs: this.timeoutMs, suppressed: held },
      reason === 'slow_response'
        ? 'client read its response too slowly; connection cut'
        : 'client still reading its response at proxy.responseTimeout; connection cut',
    ),
  );

  /**
   * @param minRate - `proxy.minResponseRate`, bytes per second; 0 for no floor
   * @param timeoutMs - `proxy.responseTimeout`; 0 for no limit
   * @param metrics - counts each cut in `floodgate_client_cuts_total`
   * @param log - told of cuts at info, at most once a second
   */
  constructor(
    private readonly minRate: number,
    private readonly timeoutMs: number,
    private readonly metrics: GatewayMetrics,
    private readonly log: GatewayLogger,
  ) {}

  /** False when neither limit is set: nothing need be watched. */
  get on(): boolean {
    return this.minRate > 0 || this.timeoutMs > 0;
  }

  /** Watches `res`, whose head is being written. */
  relaying(res: ServerResponse): void {
    const socket = res.socket as Socket | null;
    if (socket === null) this.queued.add(res);
    else this.attach(socket, res);
    if (this.timer === undefined) {
      this.timer = setInterval(this.tick, TICK_MS);
      this.timer.unref();
    }
  }

  private attach(socket: Socket, res: ServerResponse): void {
    let relay = this.relays.get(socket);
    if (relay === undefined) {
      relay = { socket, res: undefined, started: 0, behind: false, lookedAt: 0, sent: 0, behindMs: 0, behindBytes: 0 };
      this.relays.set(socket, relay);
    }
    // An answer pipelined behind one still relayed: the connection has been busy all along, its clock runs on.
    if (relay.res === undefined || ended(relay.res)) {
      relay.started = Date.now();
      relay.behind = false;
      relay.behindMs = 0;
      relay.behindBytes = 0;
    }
    relay.res = res;
    this.active.add(relay);
  }

  /** Stops the timer once no response is relayed. */
  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private readonly tick = (): void => {
    const now = Date.now();
    for (const res of this.queued) {
      if (ended(res)) this.queued.delete(res);
      else if (res.socket !== null) {
        this.queued.delete(res);
        this.attach(res.socket as Socket, res);
      }
    }
    for (const relay of this.active) {
      const res = relay.res!;
      if (ended(res)) {
        relay.res = undefined;
        this.active.delete(relay);
        continue;
      }
      const socket = relay.socket;
      const queued = socket.writableLength;
      if (queued === 0) {
        relay.behind = false;
        continue;
      }
      // bytesWritten counts what is queued too; what the kernel has taken is the rest.
      const sent = socket.bytesWritten - queued;
      const wasBehind = relay.behind;
      if (wasBehind) {
        relay.behindMs += now - relay.lookedAt;
        relay.behindBytes += sent - relay.sent;
      }
      relay.behind = true;
      relay.lookedAt = now;
      relay.sent = sent;
      // Behind at two looks in a row: not a burst the kernel was about to take.
      if (!wasBehind) continue;
      if (this.timeoutMs > 0 && now - relay.started >= this.timeoutMs) {
        this.end(relay, 'response_timeout');
        continue;
      }
      const judged = relay.behindMs - RESPONSE_RATE_GRACE_MS;
      if (this.minRate > 0 && judged > 0 && (relay.behindBytes + queued) * 1000 < this.minRate * judged) this.end(relay, 'slow_response');
    }
    if (this.active.size === 0 && this.queued.size === 0) this.stop();
  };

  private end(relay: Relay, reason: ResponseCut): void {
    const res = relay.res!;
    relay.res = undefined;
    this.active.delete(relay);
    res.destroy();
    // Answers pipelined behind it never had the socket; destroying it ends them too (listeners.ts).
    relay.socket.destroy();
    this.metrics.clientCut(reason);
    this.logCut(reason);
  }
}

function ended(res: ServerResponse): boolean {
  return res.writableFinished || res.destroyed;
}
