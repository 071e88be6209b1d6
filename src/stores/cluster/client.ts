/** The per-transport client every ClusterStore of a process shares. */
/**
 * The handshake, one batch message per turn, known refusals and leases, timeouts.
 */
import type { Clock } from '../../core/clock.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import type { Operation, Outcome } from '../../core/policy.js';
import { encodeBatch, readResult } from './codec.js';
import { PROTOCOL_VERSION, invalidates, readOutcome, revokesLeases, type PrimaryMessage, type ResultMessage } from './protocol.js';
import { WorkerMemory, type TopUp } from './worker-memory.js';
import type { Channel } from './channels.js';
import { Handshake } from './handshake.js';
import { type Pending, type Batch, toCode, ignore, gather, channelClosed, timedOut } from './pending.js';
import { KNOWN_REFUSALS } from './refusals.js';
import { slotCarrier } from './slot-ops.js';
import type { SlotCall } from './slot-call.js';
/** Operations per message at most, so one huge turn cannot stall the primary for everyone. */
const MAX_BATCH = 5000;
/** How long an idle store keeps listening, so a busy worker does not add and remove its listener on every call. */
const IDLE_LINGER_MS = 1000;

/**
 * The per-transport engine every ClusterStore of the process shares: the
 * queue, the handshake, one message per turn, and the timers.
 */
export class Client {
  /** ClusterStores using this client. */
  refs = 0;
  /** Known refusals and leases, shared by the stores on this transport. */
  readonly memory = new WorkerMemory(KNOWN_REFUSALS);
  private ready = false;
  private closed = false;
  /** Calls not sent yet: waiting for this turn's flush, or for the handshake. */
  private queue: Pending[] = [];
  private readonly inflight = new Map<number, Batch>();
  private nextId = 1;
  /** Calls not answered yet (queued or in flight). */
  private active = 0;
  private primaryId: string | undefined;
  private flushScheduled = false;
  private queueTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private stopListening: (() => void) | undefined;

  /** Says hello until the primary answers, while calls wait. */
  private readonly handshake: Handshake;

  constructor(
    private readonly channel: Channel,
    private readonly onClosed: () => void,
  ) {
    this.handshake = new Handshake(channel, () => !this.ready && this.queue.length > 0 && !this.closed);
  }

  /**
   * Spends from the key's lease when it covers the consume (and tops a
   * running-low lease up in the background); undefined when the primary
   * must be asked.
   */
  spendLease(operation: Operation, leaseMs: number, timeoutMs: number, remembers: boolean): Outcome | undefined {
    const admitted = this.memory.leases.spend(operation);
    if (admitted !== undefined) this.topUp(operation, leaseMs, timeoutMs, remembers);
    return admitted;
  }

  /**
   * A composite decided here, from leases and known refusals (see
   * WorkerMemory.decideAll), topping up the leases it spent from; undefined
   * when the primary must decide.
   */
  decideAll(
    operations: readonly Operation[],
    clock: Clock | undefined,
    leaseMs: number,
    timeoutMs: number,
    remembers: boolean,
  ): Outcome[] | undefined {
    const outcomes = this.memory.decideAll(operations, clock, leaseMs, remembers);
    if (outcomes !== undefined && outcomes.every((outcome) => outcome.allowed)) {
      for (const operation of operations) this.topUp(operation, leaseMs, timeoutMs, remembers);
    }
    return outcomes;
  }

  /** Asks for more units in the background when the key's lease runs low. */
  private topUp(operation: Operation, leaseMs: number, timeoutMs: number, remembers: boolean): void {
    const lease: TopUp | undefined = this.channel.isClosed() ? undefined : this.memory.topUp(operation.key, leaseMs);
    if (lease === undefined) return;
    // Nobody waits for it: its outcome only feeds the lease, and a failure leaves the next consume to ask.
    const topUp = { kind: 'consume' as const, key: operation.key, amount: 0, policy: operation.policy };
    this.enqueue({ operation: topUp, time: -1, clock: undefined, remembers, lease, timeoutMs, resolve: ignore, reject: ignore });
  }

  /** `leaseMs` > 0: the call is a lease call (a fixed-window consume of a store with leases). */
  apply(operation: Operation, clock: Clock | undefined, timeoutMs: number, remembers: boolean, leaseMs = 0): Promise<Outcome> {
    if (this.channel.isClosed()) return Promise.reject(channelClosed());
    const time = clock ? clock() : -1;
    // Its own penalty, block or reset must stop this process spending what it leased before.
    if (revokesLeases(operation.kind)) this.memory.leases.revoke(operation.key);
    const lease = leaseMs > 0 ? this.memory.leases.ask(operation, performance.now(), leaseMs) : undefined;
    return new Promise<Outcome>((resolve, reject) =>
      this.enqueue({ operation, time, clock, remembers, lease, timeoutMs, resolve, reject }),
    );
  }

  /**
   * Sends a composite: its parts travel consecutively in one message, each
   * fixed-window part as a lease call when `leaseMs` > 0, and the promise
   * resolves with every part's outcome, or with the first failure of any part.
   */
  applyAll(
    operations: readonly Operation[],
    clock: Clock | undefined,
    timeoutMs: number,
    remembers: boolean,
    leaseMs: number,
  ): Promise<Outcome[]> {
    if (this.channel.isClosed()) return Promise.reject(channelClosed());
    // One time for every part: the primary decides the composite at one instant.
    const time = clock ? clock() : -1;
    const now = performance.now();
    return new Promise<Outcome[]>((resolve, reject) => {
      const parts = gather(operations.length, resolve, reject);
      operations.forEach((operation, k) => {
        const leases = leaseMs > 0 && operation.policy.algorithm === 'fixed-window';
        const lease = leases ? this.memory.leases.ask(operation, now, leaseMs) : undefined;
        this.enqueue({ operation, time, clock, remembers, lease, timeoutMs, composite: k === 0 ? operations.length : 0, ...parts[k]! });
      });
    });
  }

  /** Sends a concurrency-slot call; its answer travels as an outcome (see slot-ops.ts). */
  applySlot(key: string, slot: SlotCall, clock: Clock | undefined, timeoutMs: number): Promise<Outcome> {
    if (this.channel.isClosed()) return Promise.reject(channelClosed());
    const time = clock ? clock() : -1;
    return new Promise<Outcome>((resolve, reject) =>
      this.enqueue({ operation: slotCarrier(key), slot, time, clock, remembers: false, lease: undefined, timeoutMs, resolve, reject }),
    );
  }

  private enqueue(fields: Omit<Pending, 'held' | 'deadline' | 'answered' | 'composite'> & { composite?: number }): void {
    const { operation } = fields;
    const call: Pending = {
      ...fields,
      composite: fields.composite,
      held: false,
      deadline: performance.now() + fields.timeoutMs,
      answered: false,
    };
    // From now on this process's own calls must not be refused from what
    // the primary said before this operation (see KnownRefusals.hold).
    if (invalidates(operation.kind)) {
      this.memory.refusals.hold(operation.key);
      call.held = true;
    }
    this.active++;
    this.listen();
    this.queue.push(call);
    if (this.ready) {
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    } else {
      this.handshake.start();
      this.armQueueTimer();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClosed();
    this.failAll(new FloodgateError(ErrorCode.CLOSED, 'The ClusterStore was closed while this call was pending.'));
    this.handshake.stop();
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.stopListening?.();
    this.stopListening = undefined;
    this.memory.forgetAll();
  }

  /** Sends every queued call: one message per turn (split only past MAX_BATCH). */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (!this.ready || this.queue.length === 0) return;
    const calls = this.queue;
    this.queue = [];
    this.clearQueueTimer();
    for (let start = 0; start < calls.length;) {
      let end = Math.min(start + MAX_BATCH, calls.length);
      // A composite's parts travel in one message.
      while (end < calls.length && calls[end]!.composite === 0) end++;
      this.sendBatch(start === 0 && end === calls.length ? calls : calls.slice(start, end));
      start = end;
    }
  };

  private sendBatch(calls: Pending[]): void {
    const id = this.nextId;
    this.nextId = this.nextId >= 2 ** 31 ? 1 : this.nextId + 1;
    let deadline = Infinity;
    for (const call of calls) if (call.deadline < deadline) deadline = call.deadline;
    const batch: Batch = { calls, sentAt: performance.now(), timer: undefined };
    // Registered before sending: a local primary may answer before send returns.
    this.inflight.set(id, batch);
    this.armBatchTimer(id, batch, deadline);
    this.channel.send(encodeBatch(id, this.primaryId, calls), (error) =>
      this.failBatch(id, new FloodgateError(ErrorCode.STORE_ERROR, `cluster store failed: ${error.message}`, error)),
    );
  }

  private readonly onMessage = (message: PrimaryMessage): void => {
    // The error shape is the same in every version, so a primary of another
    // release can still say why it refuses; anything else it sends is not ours to read.
    if (message.floodgate !== PROTOCOL_VERSION && message.t !== 'error') return;
    switch (message.t) {
      case 'ready':
        // A second primary's answer (PM2 bus) is ignored: batches go to the first.
        if (this.ready) return;
        this.ready = true;
        this.primaryId = typeof message.id === 'string' ? message.id : undefined;
        this.handshake.stop();
        this.flush();
        return;
      case 'result':
        this.answerBatch(message);
        return;
      case 'inv':
        this.memory.invalidate(message);
        return;
      case 'error': {
        const error = new FloodgateError(toCode(message.code), String(message.message));
        if (typeof message.id === 'number') {
          this.failBatch(message.id, error);
        } else {
          // The handshake itself was refused (a protocol mismatch): fail the waiting calls now rather than at their timeout.
          this.failQueued(error);
          this.handshake.stop();
        }
        return;
      }
    }
  };

  private answerBatch(message: ResultMessage): void {
    const batch = this.inflight.get(message.id);
    if (batch === undefined) return; // timed out already
    this.inflight.delete(message.id);
    if (batch.timer) clearTimeout(batch.timer);
    const { failures: errors, outcomes: r, hints, grants } = readResult(message);
    const receivedAt = performance.now();
    let nextHint = 0;
    batch.calls.forEach((call, index) => {
      // In batch order: an invalidating call releases its key before the
      // hints of the calls after it (decided after it) are learned.
      this.release(call);
      const failure = errors?.get(index);
      if (failure) {
        this.answer(call, undefined, new FloodgateError(toCode(failure[0]), failure[1]));
      } else if (r.length < (index + 1) * 5) {
        this.answer(call, undefined, new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the primary sent a short answer.'));
      } else {
        const outcome = readOutcome(r, index);
        while (hints !== undefined && nextHint < hints.length && (hints[nextHint] as number) < index) nextHint++;
        if (hints !== undefined && hints[nextHint] === index && call.remembers) this.memory.learn(call, outcome, batch.sentAt);
        const lease = call.lease?.entry;
        this.answer(
          call,
          lease === undefined
            ? outcome
            : this.memory.leases.absorbReply(
                call.operation.key,
                lease,
                call.operation.amount,
                outcome,
                grants?.get(index),
                batch.sentAt,
                receivedAt,
              ),
        );
      }
    });
  }

  private release(call: Pending): void {
    if (!call.held) return;
    call.held = false;
    this.memory.refusals.release(call.operation.key);
  }

  private failBatch(id: number, error: FloodgateError): void {
    const batch = this.inflight.get(id);
    if (batch === undefined) return;
    this.inflight.delete(id);
    if (batch.timer) clearTimeout(batch.timer);
    for (const call of batch.calls) this.answer(call, undefined, error);
  }

  private answer(call: Pending, outcome: Outcome | undefined, error?: FloodgateError): void {
    if (call.answered) return;
    call.answered = true;
    this.release(call);
    if (call.lease !== undefined) this.memory.leases.finished(call.lease.entry);
    if (error) call.reject(error);
    else call.resolve(outcome!);
    if (--this.active === 0) this.idle();
  }

  /** Times out the calls of a batch the primary has not answered. */
  private armBatchTimer(id: number, batch: Batch, deadline: number): void {
    batch.timer = setTimeout(
      () => {
        batch.timer = undefined;
        const before = this.active;
        const next = this.expire(batch.calls);
        if (next === Infinity) this.inflight.delete(id);
        else this.armBatchTimer(id, batch, next);
        if (this.active === before) return;
        // The primary may be gone (a PM2 primary restarting) or stuck: ask
        // again before sending more, instead of feeding batches into the void.
        // What it said is no longer vouched for (a new primary knows none of
        // it, and would invalidate none of it).
        this.ready = false;
        this.primaryId = undefined;
        this.memory.forgetAll();
        if (this.queue.length > 0) {
          this.handshake.start();
          this.armQueueTimer();
        }
      },
      Math.max(0, Math.ceil(deadline - performance.now())),
    );
  }

  /** Times out the queued calls while no primary has answered the handshake. */
  private armQueueTimer(): void {
    if (this.queueTimer !== undefined || this.queue.length === 0) return;
    let deadline = Infinity;
    for (const call of this.queue) if (call.deadline < deadline) deadline = call.deadline;
    this.queueTimer = setTimeout(
      () => {
        this.queueTimer = undefined;
        this.expire(this.queue);
        this.queue = this.queue.filter((call) => !call.answered);
        this.armQueueTimer();
      },
      Math.max(0, Math.ceil(deadline - performance.now())),
    );
  }

  private clearQueueTimer(): void {
    if (this.queueTimer) clearTimeout(this.queueTimer);
    this.queueTimer = undefined;
  }

  /** Rejects the calls whose deadline has passed; returns the earliest deadline left (Infinity if none). */
  private expire(calls: Pending[]): number {
    // Timers may fire a fraction of a millisecond early by performance.now().
    const now = performance.now() + 1;
    let next = Infinity;
    for (const call of calls) {
      if (call.answered) continue;
      if (call.deadline <= now) {
        this.answer(call, undefined, timedOut(call.timeoutMs));
      } else if (call.deadline < next) {
        next = call.deadline;
      }
    }
    return next;
  }

  /** Sends a hello now and again, backing off, while calls wait for a primary. */
  private listen(): void {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
    }
    this.stopListening ??= this.channel.listen(this.onMessage, this.onChannelClose);
  }

  /** Stops listening a little after the last call is answered (see IDLE_LINGER_MS). */
  private idle(delayMs = IDLE_LINGER_MS): void {
    if (this.idleTimer || this.stopListening === undefined) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.active > 0) return;
      // Still answering from a lease: keep listening (and the lease) until a second after the last local answer.
      const quiet = performance.now() - this.memory.leases.lastSpendAt;
      if (quiet < IDLE_LINGER_MS) {
        this.idle(IDLE_LINGER_MS - quiet);
        return;
      }
      this.stopListening?.();
      this.stopListening = undefined;
      // Not listening, this process would miss invalidations: keep nothing it could not hear about.
      this.memory.forgetAll();
    }, delayMs);
    this.idleTimer.unref();
  }

  private readonly onChannelClose = (): void => {
    this.ready = false;
    this.primaryId = undefined;
    this.memory.forgetAll();
    this.handshake.stop();
    this.failAll(new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the IPC channel to the primary closed.'));
  };

  /** Fails every call not sent yet. */
  private failQueued(error: FloodgateError): void {
    const queued = this.queue;
    this.queue = [];
    this.clearQueueTimer();
    for (const call of queued) this.answer(call, undefined, error);
  }

  /** Fails every pending call, queued or in flight. */
  private failAll(error: FloodgateError): void {
    this.failQueued(error);
    for (const id of [...this.inflight.keys()]) this.failBatch(id, error);
  }
}
