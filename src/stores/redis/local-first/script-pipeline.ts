/** The per-turn pipeline of a Redis-backed store: the script calls of one event-loop turn go out as one pipeline, each settled once by its reply, its error or the timeout. */
import { ErrorCode, FloodgateError } from '../../../errors.js';
import type { RedisAdapter, ScriptCall } from '../clients.js';
/** A script call queued for the next flush, with who to tell about its reply. */
export interface Call extends ScriptCall {
  settled: boolean;
  timedOut: boolean;
  done(error: unknown, reply: unknown): void;
  /** A reply that came after the call timed out; a late grant is still a valid lease. */
  late?(reply: unknown): void;
  /** Runs when the flush sends the call, to fill in what should reflect that moment. */
  prepare?(): void;
}

interface Flight {
  calls: Call[];
  pending: number;
  timer: NodeJS.Timeout;
  settled: Promise<void>;
  finish(): void;
}

/** Script calls batched per event-loop turn, with one timeout per pipeline. */
export class ScriptPipeline {
  private outbox: Call[] = [];
  private immediate: NodeJS.Immediate | undefined;
  private readonly flights = new Set<Flight>();

  /**
   * @param adapter - the client the pipelines go through
   * @param storeName - the store's name, for error messages
   * @param timeoutMs - how long a pipeline may take before its unsettled calls fail with STORE_TIMEOUT
   */
  constructor(
    private readonly adapter: RedisAdapter,
    private readonly storeName: string,
    private readonly timeoutMs: number,
  ) {}

  /** Queues a script call for this turn's pipeline; `late` gets a reply that came after the call timed out, `prepare` runs as the pipeline is sent. */
  send(script: ScriptCall, done: (error: unknown, reply: unknown) => void, late?: (reply: unknown) => void, prepare?: () => void): void {
    this.outbox.push({ ...script, settled: false, timedOut: false, done, ...(late ? { late } : {}), ...(prepare ? { prepare } : {}) });
    this.immediate ??= setImmediate(this.flush);
  }

  /** Sends every call queued this event-loop turn as one pipeline. */
  private readonly flush = (): void => {
    this.immediate = undefined;
    const calls = this.outbox;
    this.outbox = [];
    if (calls.length === 0) return;
    const down = this.adapter.unavailable();
    if (down !== undefined) {
      const error = new FloodgateError(ErrorCode.STORE_ERROR, `${this.storeName} store failed: ${down}.`);
      for (const c of calls) settle(c, error, undefined);
      return;
    }
    for (const c of calls) c.prepare?.();
    let finish!: () => void;
    const settled = new Promise<void>((resolve) => (finish = resolve));
    const flight: Flight = {
      calls,
      pending: calls.length,
      settled,
      finish,
      timer: setTimeout(() => {
        const error = new FloodgateError(
          ErrorCode.STORE_TIMEOUT,
          `${this.storeName} store: Redis did not answer within ${this.timeoutMs} ms; raise timeoutMs if Redis is slow but healthy.`,
        );
        for (const c of calls) {
          if (!c.settled) c.timedOut = true;
          settle(c, error, undefined);
        }
        this.flights.delete(flight);
        finish();
      }, this.timeoutMs),
    };
    this.flights.add(flight);
    const onReply = (index: number, error: unknown, reply: unknown): void => {
      const c = calls[index];
      if (c === undefined) return;
      if (c.settled) {
        if (c.timedOut && error == null && c.late) c.late(reply);
      } else {
        settle(c, error, reply);
      }
      if (--flight.pending === 0) {
        clearTimeout(flight.timer);
        this.flights.delete(flight);
        flight.finish();
      }
    };
    try {
      this.adapter.send(calls, onReply);
    } catch (error) {
      for (let i = 0; i < calls.length; i++) onReply(i, error, undefined);
    }
  };

  /** Sends what is queued now, and settles once every pipeline in flight has (answered or timed out). */
  async drain(): Promise<void> {
    if (this.immediate !== undefined) {
      clearImmediate(this.immediate);
      this.flush();
    }
    await Promise.all([...this.flights].map((f) => f.settled));
  }
}

function settle(c: Call, error: unknown, reply: unknown): void {
  if (c.settled) return;
  c.settled = true;
  try {
    c.done(error, reply);
  } catch {
    // A handler bug must not leave the other calls of the flush unanswered.
  }
}
