/** The per-transport client every ClusterStore of a process shares: the handshake, one batch message per turn, known refusals and leases, timeouts. */
import type { Clock } from '../../clock.js';
import { ErrorCode, FloodgateError } from '../../errors.js';
import type { Operation, Outcome } from '../../policy.js';
import { Leases } from './leases.js';
import {
  readInvalidation,
  readResult,
  PROTOCOL_VERSION,
  invalidates,
  readOutcome,
  refusalMs,
  revokesLeases,
  type InvalidateMessage,
  type PrimaryMessage,
  type ResultMessage,
  encodeBatch,
} from './protocol.js';
import { KnownRefusals } from './refusals.js';
import type { Channel } from './channels.js';
import { Handshake } from './handshake.js';
import { type Pending, type Batch, toCode, ignore } from './pending.js';
import { KNOWN_REFUSALS } from './worker.js';
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
  /** Keys known to be refused, shared by the stores on this transport. */
  readonly refusals = new KnownRefusals(0);
  /** Leases held, shared by the stores on this transport. */
  private readonly leases = new Leases(KNOWN_REFUSALS);
  private ready = false;
  private closed = false;
  /** Calls not sent yet: waiting for this turn's flush, or for the handshake. */
  private queue: Pending[] = [];
  private readonly inflight = new Map<number, Batch>();
  private nextId = 1;
  /** Calls not settled yet (queued or in flight). */
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

  /** The answer to a consume or peek of a key known to be refused; undefined when the primary must decide. */
  known(operation: Operation, clock: Clock | undefined): Outcome | undefined {
    if (operation.kind !== 'consume' && operation.kind !== 'peek') return undefined;
    return this.refusals.answer(operation, clock);
  }

  /**
   * Spends from the key's lease when it covers the consume (and tops a
   * running-low lease up in the background); undefined when the primary
   * must be asked.
   */
  spendLease(operation: Operation, leaseMs: number, timeoutMs: number, remembers: boolean): Outcome | undefined {
    const admitted = this.leases.spend(operation);
    if (admitted === undefined) return undefined;
    const now = this.leases.lastSpendAt;
    const topUp = this.channel.isClosed() ? undefined : this.leases.topUp(operation.key, now, leaseMs);
    if (topUp !== undefined) {
      // Nobody waits for it: its outcome only feeds the lease, and a failure leaves the next consume to ask.
      this.enqueue(
        { kind: 'consume', key: operation.key, amount: 0, policy: operation.policy },
        -1,
        undefined,
        remembers,
        topUp,
        timeoutMs,
        ignore,
        ignore,
      );
    }
    return admitted;
  }

  /** `leaseMs` > 0: the call is a lease call (a fixed-window consume of a store with leases). */
  apply(operation: Operation, clock: Clock | undefined, timeoutMs: number, remembers: boolean, leaseMs = 0): Promise<Outcome> {
    if (this.channel.isClosed()) {
      return Promise.reject(new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the IPC channel to the primary is closed.'));
    }
    const time = clock ? clock() : -1;
    // Its own penalty, block or reset must stop this process spending what it leased before.
    if (revokesLeases(operation.kind)) this.leases.revoke(operation.key);
    const lease = leaseMs > 0 ? this.leases.ask(operation, performance.now(), leaseMs) : undefined;
    return new Promise<Outcome>((resolve, reject) => this.enqueue(operation, time, clock, remembers, lease, timeoutMs, resolve, reject));
  }

  private enqueue(
    operation: Operation,
    time: number,
    clock: Clock | undefined,
    remembers: boolean,
    lease: Pending['lease'],
    timeoutMs: number,
    resolve: (outcome: Outcome) => void,
    reject: (error: FloodgateError) => void,
  ): void {
    const call: Pending = {
      operation,
      time,
      clock,
      lease,
      remembers,
      held: false,
      deadline: performance.now() + timeoutMs,
      timeoutMs,
      resolve,
      reject,
      settled: false,
    };
    // From now on this process's own calls must not be refused from what
    // the primary said before this operation (see KnownRefusals.hold).
    if (invalidates(operation.kind)) {
      this.refusals.hold(operation.key);
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
    this.forgetAll();
  }

  /** Sends every queued call: one message per turn (split only past MAX_BATCH). */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (!this.ready || this.queue.length === 0) return;
    const calls = this.queue;
    this.queue = [];
    this.clearQueueTimer();
    for (let start = 0; start < calls.length; start += MAX_BATCH) {
      this.sendBatch(start === 0 && calls.length <= MAX_BATCH ? calls : calls.slice(start, start + MAX_BATCH));
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
        this.settleBatch(message);
        return;
      case 'inv':
        this.invalidate(message);
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

  private settleBatch(message: ResultMessage): void {
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
        this.settle(call, undefined, new FloodgateError(toCode(failure[0]), failure[1]));
      } else if (r.length < (index + 1) * 5) {
        this.settle(call, undefined, new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the primary sent a short answer.'));
      } else {
        const outcome = readOutcome(r, index);
        while (hints !== undefined && nextHint < hints.length && (hints[nextHint] as number) < index) nextHint++;
        if (hints !== undefined && hints[nextHint] === index && call.remembers) this.learn(call, outcome, batch.sentAt);
        const lease = call.lease?.entry;
        this.settle(
          call,
          lease === undefined
            ? outcome
            : this.leases.settle(call.operation.key, lease, call.operation.amount, outcome, grants?.get(index), batch.sentAt, receivedAt),
        );
      }
    });
  }

  /** Keeps a hinted outcome as a known refusal, on the clock the call was decided at. */
  private learn(call: Pending, outcome: Outcome, sentAt: number): void {
    // The worker applies the primary's rule itself too: a hint it cannot
    // honour exactly (a primary of another release) is not kept.
    // A top-up (need 0) decided nothing about a consume: it reads like a peek.
    const kind = call.lease !== undefined && call.operation.amount === 0 ? 'peek' : call.operation.kind;
    const ms = refusalMs(kind, call.operation.policy, outcome);
    if (ms <= 0) return;
    if (call.time >= 0) this.refusals.learn(call.operation, outcome, ms, call.time, call.clock);
    else this.refusals.learn(call.operation, outcome, ms, sentAt, undefined);
  }

  private release(call: Pending): void {
    if (!call.held) return;
    call.held = false;
    this.refusals.release(call.operation.key);
  }

  /** The primary says keys may be admissible earlier than it said: forget them. */
  private invalidate(message: InvalidateMessage): void {
    const { all, refusals, leases } = readInvalidation(message);
    if (all) {
      this.forgetAll();
      return;
    }
    for (const key of refusals) this.refusals.forget(key);
    for (const key of leases) {
      this.leases.revoke(key);
      this.refusals.forget(key);
    }
  }

  /** Forgets every known refusal and drops every lease: what the primary said is no longer vouched for, or would not be heard revoked. */
  private forgetAll(): void {
    this.refusals.clear();
    this.leases.clear();
  }

  private failBatch(id: number, error: FloodgateError): void {
    const batch = this.inflight.get(id);
    if (batch === undefined) return;
    this.inflight.delete(id);
    if (batch.timer) clearTimeout(batch.timer);
    for (const call of batch.calls) this.settle(call, undefined, error);
  }

  private settle(call: Pending, outcome: Outcome | undefined, error?: FloodgateError): void {
    if (call.settled) return;
    call.settled = true;
    this.release(call);
    if (call.lease !== undefined) this.leases.finished(call.lease.entry);
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
        this.forgetAll();
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
        this.queue = this.queue.filter((call) => !call.settled);
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
      if (call.settled) continue;
      if (call.deadline <= now) {
        this.settle(
          call,
          undefined,
          new FloodgateError(
            ErrorCode.STORE_TIMEOUT,
            `cluster store: the primary did not answer within ${call.timeoutMs} ms. Is a ClusterStorePrimary running in the primary process (or attached to this thread, or to PM2)?`,
          ),
        );
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

  /** Stops listening a little after the last call settles (see IDLE_LINGER_MS). */
  private idle(delayMs = IDLE_LINGER_MS): void {
    if (this.idleTimer || this.stopListening === undefined) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.active > 0) return;
      // Still answering from a lease: keep listening (and the lease) until a second after the last local answer.
      const quiet = performance.now() - this.leases.lastSpendAt;
      if (quiet < IDLE_LINGER_MS) {
        this.idle(IDLE_LINGER_MS - quiet);
        return;
      }
      this.stopListening?.();
      this.stopListening = undefined;
      // Not listening, this process would miss invalidations: keep nothing it could not hear about.
      this.forgetAll();
    }, delayMs);
    this.idleTimer.unref();
  }

  private readonly onChannelClose = (): void => {
    this.ready = false;
    this.primaryId = undefined;
    this.forgetAll();
    this.handshake.stop();
    this.failAll(new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the IPC channel to the primary closed.'));
  };

  /** Fails every call not sent yet. */
  private failQueued(error: FloodgateError): void {
    const queued = this.queue;
    this.queue = [];
    this.clearQueueTimer();
    for (const call of queued) this.settle(call, undefined, error);
  }

  /** Fails every pending call, queued or in flight. */
  private failAll(error: FloodgateError): void {
    this.failQueued(error);
    for (const id of [...this.inflight.keys()]) this.failBatch(id, error);
  }
}
