/** TurnPipeline: the script calls of one event-loop turn sent as one Redis pipeline. */
/**
 * Each call is answered once, and all are timed out together.
 */
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import type { RedisAdapter, ScriptCall } from './client-adapter.js';

/** A script call queued on a {@link TurnPipeline}, with who to tell about its reply. */
export interface PipelineCall extends ScriptCall {
  /**
   * Told once: the reply, or an error (the client's own, STORE_ERROR when the
   * client is down, STORE_TIMEOUT, or whatever {@link TurnPipeline.abort} passes).
   */
  answer(error: unknown, reply: unknown): void;
  /** A reply that came after the call timed out; a late lease grant is still valid. */
  late?(reply: unknown): void;
  /** Runs when the call is sent, to fill in what should reflect that moment. */
  prepare?(): void;
}

/** How a {@link TurnPipeline} words its failures, and what it tells its owner. */
export interface TurnPipelineOptions {
  /** The Redis client to send through. */
  readonly adapter: RedisAdapter;
  /** How long one turn's calls wait for Redis, in ms. */
  readonly timeoutMs: number;
  /** The error for every call of a turn sent while the client is down. */
  readonly downError: (reason: string) => FloodgateError;
  /** The STORE_TIMEOUT of a turn that Redis did not answer in time. */
  readonly timeoutMessage: string;
  /** Runs as a turn's queue is taken, so the owner stops adding to calls already on their way. */
  readonly onTake?: () => void;
}

interface Slot<C extends PipelineCall> {
  readonly call: C;
  answered: boolean;
  timedOut: boolean;
}

interface Flight<C extends PipelineCall> {
  readonly slots: Slot<C>[];
  pending: number;
  timer: NodeJS.Timeout | undefined;
  readonly done: Promise<void>;
  finish(): void;
}

/**
 * Batches the calls of one event-loop turn into one pipeline: a store queues
 * calls with {@link TurnPipeline.push} and the turn's end sends them all,
 * so a burst of operations costs one round trip. Every call is answered
 * exactly once, even when the client throws or a handler does.
 */
export class TurnPipeline<C extends PipelineCall> {
  private queue: C[] = [];
  private immediate: NodeJS.Immediate | undefined;
  /**
   * The turns sent and not yet answered, oldest first (a few at a time). An array, not a Set: a long-lived Set that
   * gains and loses an entry per turn has V8 replace its table every few turns, and each dead table keeps the next,
   * with the calls in it, alive through young-generation collections.
   */
  private flights: Flight<C>[] = [];

  /** @param options - see {@link TurnPipelineOptions} */
  constructor(private readonly options: TurnPipelineOptions) {}

  /** Queues a call for this turn's flush. */
  push(call: C): void {
    this.queue.push(call);
    this.immediate ??= setImmediate(this.flush);
  }

  /** Sends what is queued now rather than at the turn's end. */
  flushNow(): void {
    if (this.immediate === undefined) return;
    clearImmediate(this.immediate);
    this.flush();
  }

  /** Resolves once every call sent so far has been answered or timed out. */
  async drained(): Promise<void> {
    await Promise.all(this.flights.map((f) => f.done));
  }

  /** Answers every queued and in-flight call with `error` now, without sending the queued ones. */
  abort(error: FloodgateError): void {
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.immediate = undefined;
    const queued = this.queue;
    this.queue = [];
    this.options.onTake?.();
    for (const call of queued) answer({ call, answered: false, timedOut: false }, error, undefined);
    const flights = this.flights;
    this.flights = [];
    for (const flight of flights) {
      clearTimeout(flight.timer);
      for (const slot of flight.slots) answer(slot, error, undefined);
      flight.finish();
    }
  }

  private readonly flush = (): void => {
    this.immediate = undefined;
    const calls = this.queue;
    this.queue = [];
    this.options.onTake?.();
    if (calls.length === 0) return;
    const slots = calls.map((call) => ({ call, answered: false, timedOut: false }));
    const down = this.options.adapter.unavailable();
    if (down !== undefined) {
      const error = this.options.downError(down);
      for (const slot of slots) answer(slot, error, undefined);
      return;
    }
    for (const c of calls) c.prepare?.();
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const flight: Flight<C> = { slots, pending: slots.length, timer: undefined, done, finish };
    flight.timer = setTimeout(() => this.expire(flight), this.options.timeoutMs);
    this.flights.push(flight);
    const onReply = (index: number, error: unknown, reply: unknown): void => this.reply(flight, index, error, reply);
    // Adapters never throw; a throw here would be a bug, and must still answer every call.
    try {
      this.options.adapter.send(calls, onReply);
    } catch (error) {
      for (let i = 0; i < calls.length; i++) onReply(i, error, undefined);
    }
  };

  /** Drops an answered or expired turn from {@link flights}. */
  private forget(flight: Flight<C>): void {
    const at = this.flights.indexOf(flight);
    if (at >= 0) this.flights.splice(at, 1);
  }

  private reply(flight: Flight<C>, index: number, error: unknown, reply: unknown): void {
    const slot = flight.slots[index];
    if (slot === undefined) return;
    if (!slot.answered) answer(slot, error, reply);
    else if (slot.timedOut && error == null) slot.call.late?.(reply);
    if (--flight.pending === 0) {
      clearTimeout(flight.timer);
      this.forget(flight);
      flight.finish();
    }
  }

  private expire(flight: Flight<C>): void {
    const error = new FloodgateError(ErrorCode.STORE_TIMEOUT, this.options.timeoutMessage);
    for (const slot of flight.slots) {
      if (!slot.answered) slot.timedOut = true;
      answer(slot, error, undefined);
    }
    this.forget(flight);
    flight.finish();
  }
}

function answer<C extends PipelineCall>(slot: Slot<C>, error: unknown, reply: unknown): void {
  if (slot.answered) return;
  slot.answered = true;
  try {
    slot.call.answer(error, reply);
  } catch {
    // A handler bug must not leave the other calls of the turn unanswered.
  }
}
