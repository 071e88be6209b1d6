/** ClusterStore: the worker side of the cluster store; batches each event-loop turn's operations into one message to the primary, with a handshake, per-call timeouts and known refusals answered without IPC. */
import { isMainThread, parentPort, type MessagePort } from 'node:worker_threads';
import type { Clock } from '../../clock.js';
import { describe } from '../../duration.js';
import { ErrorCode, FloodgateError, type ErrorCodeValue } from '../../errors.js';
import { OP_CODE, type Operation, type Outcome, type Policy } from '../../policy.js';
import { assertKnownOptions } from '../../validate.js';
import type { Store } from '../store.js';
import { Leases, type Grant, type Lease } from './leases.js';
import { localPrimary } from './local.js';
import {
  LEASE_CODE,
  MAX_LEASE_MS,
  PROTOCOL_VERSION,
  encodePolicy,
  invalidates,
  openPrimaryEnvelope,
  readOutcome,
  refusalMs,
  revokesLeases,
  toPrimary,
  type InvalidateMessage,
  type PolicyTuple,
  type PrimaryMessage,
  type ResultMessage,
  type WorkerMessage,
} from './protocol.js';
import { KnownRefusals } from './refusals.js';

/**
 * How a {@link ClusterStore} reaches its primary:
 *
 * - `'process'`: this process's IPC channel (`process.send`): node:cluster
 *   workers, PM2 instances (cluster or fork mode), `child_process.fork`.
 * - a `MessagePort`: a worker thread's `parentPort`, or one end of a
 *   `MessageChannel` whose other end the primary {@link ClusterStorePrimary.attach}es.
 * - `'local'`: the {@link ClusterStorePrimary} of this very process.
 * - `'auto'` (default): `'local'` when this process runs a primary, else
 *   `'process'` when it has an IPC channel, else `parentPort` in a worker
 *   thread, else `'local'` (which waits for a primary to be created here).
 */
export type ClusterTransport = 'auto' | 'process' | 'local' | MessagePort;

/** Options of {@link ClusterStore}. */
export interface ClusterStoreOptions {
  /**
   * How long a call waits for the primary's answer, in ms, from the moment it
   * is made (a call made before the primary is up waits here too). Then it
   * rejects with `FLOODGATE_STORE_TIMEOUT`, which the limiter's `insurance`
   * or `onStoreFailure` turn into a decision. Default 1000.
   */
  timeoutMs?: number;
  /**
   * Time source sent with every operation; the primary then decides at this
   * time instead of its own. For deterministic tests and simulations (a
   * ManualClock driving real workers). Leave unset in production: workers'
   * clocks differ, the primary's does not. Default: the primary's clock.
   */
  clock?: Clock;
  /** How to reach the primary; see {@link ClusterTransport}. Default `'auto'`. */
  transport?: ClusterTransport;
  /**
   * Most keys this process remembers as refused: when the primary answers
   * that a key has no unit left until some time (its window ends, a block
   * ends), later consumes and peeks of that key are refused here, without
   * IPC, until then; the primary invalidates the key on every worker as soon
   * as a reward, penalty, block, reset or new policy touches it. The least
   * recently learned key is forgotten when full. 0 turns this off. Default
   * 10 000, or 0 with a `clock` (a simulation then sees every operation at
   * the primary, in the order its own messages impose). Stores on one
   * transport share one memory, as large as the largest of them asks.
   */
  knownRefusals?: number;
  /**
   * Leases for fixed-window limits, off by default (0). With `leaseMs: N`, a
   * consume the worker cannot cover asks the primary for about N ms of this
   * worker's recent demand on the key (at most a quarter of what remains),
   * and later consumes spend those units here, synchronously and without
   * IPC, topping up before they run out. The primary counts leased units as
   * consumed when it grants them, so the limit holds across workers; the
   * price is that `remaining` is approximate, and units leased to a worker
   * whose traffic stops stay unused until the window ends (another worker
   * may be refused meanwhile). A penalty, block or reset of the key revokes
   * every worker's lease (one IPC hop later; units spent before that hop
   * were counted in the window they were leased in). Other algorithms and
   * peeks go to the primary as usual. Not with `clock`. 100 is a good start.
   */
  leaseMs?: number;
}

const OPTION_NAMES = ['timeoutMs', 'clock', 'transport', 'knownRefusals', 'leaseMs'] as const;
/** Default of {@link ClusterStoreOptions.knownRefusals}: the in-memory block list's default size. */
const KNOWN_REFUSALS = 10_000;
/** Largest timer Node schedules exactly (2^31 − 1 ms). */
const MAX_TIMEOUT_MS = 2_147_483_647;
/** Operations per message at most, so one huge turn cannot stall the primary for everyone. */
const MAX_BATCH = 5000;
/** First handshake retry, in ms; doubles up to HELLO_MAX_MS while calls wait. */
const HELLO_FIRST_MS = 5;
const HELLO_MAX_MS = 250;
/** How long an idle store keeps listening, so a busy worker does not add and remove its listener on every call. */
const IDLE_LINGER_MS = 1000;

/**
 * A store whose counters live in the primary process: the
 * {@link ClusterStorePrimary} applies every worker's operations to one
 * MemoryStore, so all workers of a host share their limits without Redis.
 *
 * Calls made in one event-loop turn, by every limiter and every ClusterStore
 * of this process on the same transport, travel in one message, and their
 * outcomes come back in one message.
 *
 * It cannot wedge. A call made before the primary answers (a worker that
 * starts first, a primary that starts late) is queued, never lost, while the
 * store repeats its handshake; it is sent once the primary answers, or
 * rejects with `FLOODGATE_STORE_TIMEOUT` after `timeoutMs`. A primary that
 * stops answering times calls out the same way, and the store then
 * handshakes again before sending more. A closed IPC channel rejects at once
 * with `FLOODGATE_STORE_ERROR`. Pair it with the limiter's `insurance` (a
 * limiter on a MemoryStore) to keep deciding while the primary is away.
 *
 * The store has no name and no per-limiter registration: each operation
 * carries its policy, and the primary refuses, with
 * `FLOODGATE_CONFLICTING_OPTIONS`, a key used under two different policies
 * (see {@link ClusterStorePrimary}).
 *
 * **Known refusals.** A key the primary reported exhausted or blocked until
 * some time is refused in this process, without IPC, until then (see
 * {@link ClusterStoreOptions.knownRefusals}): a saturated key costs the
 * primary nothing. Such a refusal is the primary's own answer replayed,
 * and it spends nothing, exactly as a refused consume; whatever could make
 * the key admissible earlier is invalidated by the primary on every worker
 * in the same turn, so it never admits more than the primary, and refuses
 * longer only while that invalidation is on its way. {@link applyNow}
 * answers from it synchronously.
 *
 * While calls are pending, and for a second after, it listens on the
 * channel; otherwise it holds nothing that keeps a process alive (and
 * forgets its known refusals, since it would not hear their invalidation).
 */
export class ClusterStore implements Store {
  /** @inheritDoc */
  readonly name = 'cluster';
  /** The timeout of each call, in ms. */
  readonly timeoutMs: number;
  private readonly clock: Clock | undefined;
  /** Whether this store answers from, and feeds, the known refusals. */
  private readonly remembers: boolean;
  /** The lease horizon in ms; 0 without leases. */
  private readonly leaseMs: number;
  private client: Client | undefined;

  /** @param options - see {@link ClusterStoreOptions}; invalid ones throw a FloodgateError. */
  constructor(options: ClusterStoreOptions = {}) {
    assertKnownOptions(options, OPTION_NAMES, 'ClusterStore');
    const timeoutMs = options.timeoutMs ?? 1000;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) {
      throw new FloodgateError(
        ErrorCode.INVALID_DURATION,
        `ClusterStore timeoutMs must be a whole number of ms from 1 to ${MAX_TIMEOUT_MS}; got ${describe(timeoutMs)}.`,
      );
    }
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStore clock must be a function returning ms; got ${describe(options.clock)}.`,
      );
    }
    const knownRefusals = options.knownRefusals ?? (options.clock === undefined ? KNOWN_REFUSALS : 0);
    if (!Number.isSafeInteger(knownRefusals) || knownRefusals < 0) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStore knownRefusals must be a whole number of keys, 0 or more; got ${describe(knownRefusals)}.`,
      );
    }
    const leaseMs = options.leaseMs ?? 0;
    if (!Number.isSafeInteger(leaseMs) || leaseMs < 0 || leaseMs > MAX_LEASE_MS) {
      throw new FloodgateError(
        ErrorCode.INVALID_DURATION,
        `ClusterStore leaseMs must be a whole number of ms from 0 (no leases) to ${MAX_LEASE_MS}; got ${describe(leaseMs)}.`,
      );
    }
    if (leaseMs > 0 && options.clock !== undefined) {
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        "ClusterStore leaseMs needs real time: leases expire on this process's clock, which a custom clock does not drive. Drop leaseMs or clock.",
      );
    }
    this.timeoutMs = timeoutMs;
    this.clock = options.clock;
    this.remembers = knownRefusals > 0;
    this.leaseMs = leaseMs;
    this.client = acquireClient(options.transport ?? 'auto', knownRefusals);
  }

  /** @inheritDoc */
  apply(operation: Operation): Promise<Outcome> {
    const client = this.client;
    if (client === undefined) {
      return Promise.reject(new FloodgateError(ErrorCode.CLOSED, 'This ClusterStore was closed; create a new one.'));
    }
    const now = this.answerHere(client, operation);
    if (now !== undefined) return Promise.resolve(now);
    return client.apply(operation, this.clock, this.timeoutMs, this.remembers, this.leases(operation) ? this.leaseMs : 0);
  }

  /**
   * Answers synchronously, as `apply` would, a consume the lease in hand
   * covers (see {@link ClusterStoreOptions.leaseMs}) and a consume or peek
   * of a key known to be refused (see {@link ClusterStoreOptions.knownRefusals});
   * undefined otherwise, and then nothing was applied.
   */
  applyNow(operation: Operation): Outcome | undefined {
    const client = this.client;
    return client === undefined ? undefined : this.answerHere(client, operation);
  }

  private answerHere(client: Client, operation: Operation): Outcome | undefined {
    if (this.leases(operation)) {
      const admitted = client.spendLease(operation, this.leaseMs, this.timeoutMs, this.remembers);
      if (admitted !== undefined) return admitted;
    }
    return this.remembers ? client.known(operation, this.clock) : undefined;
  }

  /** Whether this operation is served by leases. */
  private leases(operation: Operation): boolean {
    return this.leaseMs > 0 && operation.kind === 'consume' && operation.policy.algorithm === 'fixed-window';
  }

  /**
   * Stops using the transport. Calls still pending complete normally unless
   * this was the last store on it; then they reject with `FLOODGATE_CLOSED`.
   * Idempotent.
   */
  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) releaseClient(client);
  }
}

/** One way to exchange messages with the primary. */
interface Channel {
  /** Delivers the primary's messages to `onMessage` until the returned function is called. */
  listen(onMessage: (message: PrimaryMessage) => void, onClose: () => void): () => void;
  /** Sends `message`; reports a failure to send through `onError`. */
  send(message: WorkerMessage, onError: (error: Error) => void): void;
  /** True when nothing can be sent any more. */
  isClosed(): boolean;
}

const processChannel: Channel = {
  listen(onMessage, onClose) {
    const handler = (value: unknown): void => {
      const message = openPrimaryEnvelope(value);
      if (message) onMessage(message);
    };
    process.on('message', handler);
    process.on('disconnect', onClose);
    return () => {
      process.off('message', handler);
      process.off('disconnect', onClose);
    };
  },
  send(message, onError) {
    if (!process.connected || typeof process.send !== 'function') {
      onError(new Error('the IPC channel to the primary is closed'));
      return;
    }
    // With a callback, a send that fails reports here instead of emitting an
    // unhandled 'error' on process.
    process.send(toPrimary(message), undefined, undefined, (error: Error | null) => {
      if (error) onError(error);
    });
  },
  isClosed() {
    return !process.connected;
  },
};

// One channel per port for the port's lifetime: its 'close' watcher is
// registered once, however many stores come and go on the port.
const portChannels = new WeakMap<MessagePort, Channel>();

function portChannel(port: MessagePort): Channel {
  const known = portChannels.get(port);
  if (known) return known;
  const channel = newPortChannel(port);
  portChannels.set(port, channel);
  return channel;
}

function newPortChannel(port: MessagePort): Channel {
  let closed = false;
  port.once('close', () => {
    closed = true;
  });
  return {
    listen(onMessage, onClose) {
      const handler = (value: unknown): void => {
        const message = openPrimaryEnvelope(value);
        if (message) onMessage(message);
      };
      port.on('message', handler);
      port.on('close', onClose);
      return () => {
        port.off('message', handler);
        port.off('close', onClose);
      };
    },
    send(message, onError) {
      try {
        port.postMessage(toPrimary(message));
      } catch (error) {
        onError(error instanceof Error ? error : new Error(String(error)));
      }
    },
    isClosed() {
      return closed;
    },
  };
}

function localChannel(): Channel {
  let deliver: ((message: PrimaryMessage) => void) | undefined;
  // One reply function for the channel's life: the primary recognizes its
  // peers by it, to send them invalidations.
  const reply = (message: PrimaryMessage): void => deliver?.(message);
  return {
    listen(onMessage) {
      deliver = onMessage;
      return () => {
        deliver = undefined;
        localPrimary()?.forget?.(reply);
      };
    },
    send(message) {
      // Asynchronous like real IPC, so no reply re-enters the sender. With no
      // primary here (yet) the message is dropped, as IPC nobody listens to.
      queueMicrotask(() => localPrimary()?.receive(message, reply));
    },
    isClosed() {
      return false;
    },
  };
}

interface Pending {
  readonly operation: Operation;
  /** The store's clock at call time, or -1 for the primary's clock. */
  readonly time: number;
  /** The store's clock (the basis its known refusals are read on), if it has one. */
  readonly clock: Clock | undefined;
  /** For a lease call: the lease the grant goes to, and the units wanted (the operation's amount is the need). */
  readonly lease: { readonly entry: Lease; readonly want: number } | undefined;
  /** Whether the store learns known refusals from the answer. */
  readonly remembers: boolean;
  /** True while this invalidating call holds its key in the known refusals. */
  held: boolean;
  /** performance.now() after which the call times out. */
  readonly deadline: number;
  readonly timeoutMs: number;
  readonly resolve: (outcome: Outcome) => void;
  readonly reject: (error: FloodgateError) => void;
  settled: boolean;
}

interface Batch {
  readonly calls: Pending[];
  /** performance.now() when sent: no later than the primary's decision, so refusals learned from it never outlast the primary's. */
  readonly sentAt: number;
  timer: NodeJS.Timeout | undefined;
}

const clients = new Map<unknown, Client>();

function acquireClient(transport: ClusterTransport, knownRefusals: number): Client {
  let key: unknown;
  let make: () => Channel;
  if (transport === 'auto') {
    if (localPrimary()) transport = 'local';
    else if (typeof process.send === 'function') transport = 'process';
    else if (!isMainThread && parentPort) transport = parentPort;
    else transport = 'local';
  }
  if (transport === 'process') {
    if (typeof process.send !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        "ClusterStore transport 'process' needs an IPC channel, and this process has none: start it with cluster.fork(), child_process.fork() or PM2, or use transport 'local' next to a ClusterStorePrimary.",
      );
    }
    key = 'process';
    make = () => processChannel;
  } else if (transport === 'local') {
    key = 'local';
    make = localChannel;
  } else if (
    typeof transport === 'object' &&
    transport !== null &&
    typeof transport.postMessage === 'function' &&
    typeof transport.on === 'function'
  ) {
    const port = transport;
    key = port;
    make = () => portChannel(port);
  } else {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `ClusterStore transport must be 'auto', 'process', 'local' or a MessagePort; got ${describe(transport)}.`,
    );
  }
  let client = clients.get(key);
  if (client === undefined) {
    client = new Client(make(), () => clients.delete(key));
    clients.set(key, client);
  }
  client.refs++;
  client.refusals.maxKeys = Math.max(client.refusals.maxKeys, knownRefusals);
  return client;
}

function releaseClient(client: Client): void {
  if (--client.refs === 0) client.close();
}

/**
 * The per-transport engine every ClusterStore of the process shares: the
 * queue, the handshake, one message per turn, and the timers.
 */
class Client {
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
  private helloTimer: NodeJS.Timeout | undefined;
  private helloDelay = HELLO_FIRST_MS;
  private queueTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private stopListening: (() => void) | undefined;

  constructor(
    private readonly channel: Channel,
    private readonly onClosed: () => void,
  ) {}

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
      this.handshake();
      this.armQueueTimer();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClosed();
    this.failAll(new FloodgateError(ErrorCode.CLOSED, 'The ClusterStore was closed while this call was pending.'));
    this.stopHandshake();
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
    const indexOf = new Map<Policy, number>();
    const p: PolicyTuple[] = [];
    const o: (number | string)[] = [];
    const times: number[] = [];
    let wants: number[] | undefined;
    let timed = false;
    let remembers = false;
    let deadline = Infinity;
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!;
      const { kind, key, amount, policy } = call.operation;
      let index = indexOf.get(policy);
      if (index === undefined) {
        index = p.push(encodePolicy(policy)) - 1;
        indexOf.set(policy, index);
      }
      if (call.lease === undefined) {
        o.push(OP_CODE[kind], index, key, amount);
      } else {
        o.push(LEASE_CODE, index, key, amount);
        (wants ??= []).push(i, call.lease.want);
      }
      times.push(call.time);
      if (call.time >= 0) timed = true;
      if (call.remembers) remembers = true;
      if (call.deadline < deadline) deadline = call.deadline;
    }
    const batch: Batch = { calls, sentAt: performance.now(), timer: undefined };
    // Registered before sending: a local primary may answer before send returns.
    this.inflight.set(id, batch);
    this.armBatchTimer(id, batch, deadline);
    this.channel.send(
      {
        floodgate: PROTOCOL_VERSION,
        t: 'batch',
        id,
        ...(this.primaryId === undefined ? {} : { to: this.primaryId }),
        p,
        o,
        ...(timed ? { n: times } : {}),
        ...(remembers ? { c: 1 as const } : {}),
        ...(wants ? { w: wants } : {}),
      },
      (error) => this.failBatch(id, new FloodgateError(ErrorCode.STORE_ERROR, `cluster store failed: ${error.message}`, error)),
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
        this.stopHandshake();
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
          const queued = this.queue;
          this.queue = [];
          this.clearQueueTimer();
          for (const call of queued) this.settle(call, undefined, error);
          this.stopHandshake();
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
    let errors: Map<number, [string, string]> | undefined;
    if (Array.isArray(message.e)) {
      errors = new Map();
      for (const [index, code, text] of message.e) errors.set(index, [code, text]);
    }
    const r = Array.isArray(message.r) ? message.r : [];
    const hints = Array.isArray(message.h) ? message.h : undefined;
    const grants = Array.isArray(message.g) ? grantsOf(message.g) : undefined;
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
    if (message.all === 1) {
      this.forgetAll();
      return;
    }
    if (Array.isArray(message.k)) for (const key of message.k) if (typeof key === 'string') this.refusals.forget(key);
    if (Array.isArray(message.l)) {
      for (const key of message.l) {
        if (typeof key !== 'string') continue;
        this.leases.revoke(key);
        this.refusals.forget(key);
      }
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
          this.handshake();
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
  private handshake(): void {
    if (this.helloTimer !== undefined) return;
    this.helloDelay = HELLO_FIRST_MS;
    this.hello();
  }

  private hello(): void {
    this.channel.send({ floodgate: PROTOCOL_VERSION, t: 'hello' }, () => {
      // The channel is closed: 'disconnect' fails the waiting calls.
    });
    this.helloTimer = setTimeout(() => {
      this.helloTimer = undefined;
      if (!this.ready && this.queue.length > 0 && !this.closed) this.hello();
    }, this.helloDelay);
    this.helloDelay = Math.min(this.helloDelay * 2, HELLO_MAX_MS);
  }

  private stopHandshake(): void {
    if (this.helloTimer) clearTimeout(this.helloTimer);
    this.helloTimer = undefined;
  }

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
    this.stopHandshake();
    this.failAll(new FloodgateError(ErrorCode.STORE_ERROR, 'cluster store failed: the IPC channel to the primary closed.'));
  };

  private failAll(error: FloodgateError): void {
    const queued = this.queue;
    this.queue = [];
    this.clearQueueTimer();
    for (const call of queued) this.settle(call, undefined, error);
    for (const id of [...this.inflight.keys()]) this.failBatch(id, error);
  }
}

const ignore = (): void => {};

/** The grants of a result's `g` triples, by operation index; malformed triples are skipped (those leases keep no surplus). */
function grantsOf(g: readonly unknown[]): Map<number, Grant> {
  const grants = new Map<number, Grant>();
  for (let k = 0; k + 2 < g.length; k += 3) {
    const [index, granted, windowEnd] = [g[k], g[k + 1], g[k + 2]];
    if (Number.isSafeInteger(index) && Number.isSafeInteger(granted) && typeof windowEnd === 'number') {
      grants.set(index as number, { granted: granted as number, windowEnd });
    }
  }
  return grants;
}

const CODES = new Set<string>(Object.values(ErrorCode));

/** A code from the primary, kept when floodgate knows it. */
function toCode(code: unknown): ErrorCodeValue {
  return typeof code === 'string' && CODES.has(code) ? (code as ErrorCodeValue) : ErrorCode.STORE_ERROR;
}
