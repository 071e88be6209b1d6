/** ClusterStore: the worker side of the cluster store. */
/**
 * It batches each event-loop turn's operations into one message to the primary, with a handshake, per-call timeouts
 * and known refusals answered without IPC.
 */
import { isMainThread, parentPort, type MessagePort } from 'node:worker_threads';
import type { Clock } from '../../core/clock.js';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import type { Operation, Outcome } from '../../core/policy.js';
import { assertKnownOptions, MAX_TIMER_MS } from '../../core/validate.js';
import type { Store } from '../store.js';
import { localPrimary } from './local.js';
import { MAX_LEASE_MS } from './protocol.js';
import { type Channel, processChannel, portChannel, localChannel } from './channels.js';
import { Client } from './client.js';
import { KNOWN_REFUSALS } from './refusals.js';
import { slotCallError, type SlotAcquisition } from '../../core/slots.js';
import { acquisitionOf } from './slot-ops.js';
import { SLOT_CODE, type SlotCall } from './slot-call.js';
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
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMER_MS) {
      throw new FloodgateError(
        ErrorCode.INVALID_DURATION,
        `ClusterStore timeoutMs must be a whole number of ms from 1 to ${MAX_TIMER_MS}; got ${describeValue(timeoutMs)}.`,
      );
    }
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStore clock must be a function returning ms; got ${describeValue(options.clock)}.`,
      );
    }
    const knownRefusals = options.knownRefusals ?? (options.clock === undefined ? KNOWN_REFUSALS : 0);
    if (!Number.isSafeInteger(knownRefusals) || knownRefusals < 0) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStore knownRefusals must be a whole number of keys, 0 or more; got ${describeValue(knownRefusals)}.`,
      );
    }
    const leaseMs = options.leaseMs ?? 0;
    if (!Number.isSafeInteger(leaseMs) || leaseMs < 0 || leaseMs > MAX_LEASE_MS) {
      throw new FloodgateError(
        ErrorCode.INVALID_DURATION,
        `ClusterStore leaseMs must be a whole number of ms from 0 (no leases) to ${MAX_LEASE_MS}; got ${describeValue(leaseMs)}.`,
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

  /**
   * A reservation's give-back (reward) or excess (penalty) settled in this
   * worker's lease of the key (with `leaseMs`), without IPC: a give-back
   * becomes spendable here (the primary still counts it, as the lease's
   * other units); an excess the lease covers is spent from it, so no lease
   * is revoked. Undefined, with nothing applied, when the primary must take
   * it. Never throws.
   */
  settleNow(operation: Operation): Outcome | undefined {
    const client = this.client;
    if (client === undefined || this.leaseMs === 0 || operation.policy.algorithm !== 'fixed-window') return undefined;
    return client.memory.leases.settleHere(operation, performance.now());
  }

  /**
   * Consumes every operation's amount if every key admits it, else spends
   * nothing (all or nothing; one outcome per part, in order). Decided here
   * when the leases in hand cover every part, or a part is known refused and
   * the others are leased (see {@link consumeAllNow}); otherwise the parts
   * travel to the primary in one message and it decides them in one
   * synchronous step, so no other operation runs in between. Fixed-window
   * parts take leases there as single consumes do.
   */
  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    const client = this.client;
    if (client === undefined) {
      return Promise.reject(new FloodgateError(ErrorCode.CLOSED, 'This ClusterStore was closed; create a new one.'));
    }
    const now = client.decideAll(operations, this.clock, this.leaseMs, this.timeoutMs, this.remembers);
    if (now !== undefined) return Promise.resolve(now);
    return client.applyAll(operations, this.clock, this.timeoutMs, this.remembers, this.leaseMs);
  }

  /**
   * {@link consumeAll} answered synchronously, without IPC, when every part
   * is answered here: every part's lease covers it (then every lease is
   * spent from), or some part is known refused and every other part is
   * leased with room (then nothing is spent). Undefined otherwise, and
   * nothing was applied.
   */
  consumeAllNow(operations: readonly Operation[]): Outcome[] | undefined {
    const client = this.client;
    return client === undefined ? undefined : client.decideAll(operations, this.clock, this.leaseMs, this.timeoutMs, this.remembers);
  }

  private answerHere(client: Client, operation: Operation): Outcome | undefined {
    if (this.leases(operation)) {
      const admitted = client.spendLease(operation, this.leaseMs, this.timeoutMs, this.remembers);
      if (admitted !== undefined) return admitted;
    }
    return this.remembers ? client.memory.known(operation, this.clock) : undefined;
  }

  /** Takes a concurrency slot (see SlotStore.acquireSlot), decided in the primary's slot table; slots are never leased. */
  acquireSlot(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition> {
    const bad = slotCallError('ClusterStore', key, owner, ttlMs, limit);
    return bad ? Promise.reject(bad) : this.slot(key, { code: SLOT_CODE.acquire, owner, ttlMs, limit }).then(acquisitionOf);
  }

  /** Frees `owner`'s unexpired slot of `key` in the primary (see SlotStore.releaseSlot). */
  releaseSlot(key: string, owner: string): Promise<boolean> {
    const bad = slotCallError('ClusterStore', key, owner);
    return bad ? Promise.reject(bad) : this.slot(key, { code: SLOT_CODE.release, owner, ttlMs: 0, limit: 0 }).then((o) => o.allowed);
  }

  /** Extends `owner`'s unexpired slot of `key` in the primary (see SlotStore.renewSlot). */
  renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const bad = slotCallError('ClusterStore', key, owner, ttlMs);
    return bad ? Promise.reject(bad) : this.slot(key, { code: SLOT_CODE.renew, owner, ttlMs, limit: 0 }).then((o) => o.allowed);
  }

  private slot(key: string, call: SlotCall): Promise<Outcome> {
    const client = this.client;
    if (client === undefined)
      return Promise.reject(new FloodgateError(ErrorCode.CLOSED, 'This ClusterStore was closed; create a new one.'));
    return client.applySlot(key, call, this.clock, this.timeoutMs);
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
      `ClusterStore transport must be 'auto', 'process', 'local' or a MessagePort; got ${describeValue(transport)}.`,
    );
  }
  let client = clients.get(key);
  if (client === undefined) {
    client = new Client(make(), () => clients.delete(key));
    clients.set(key, client);
  }
  client.refs++;
  client.memory.refusals.maxKeys = Math.max(client.memory.refusals.maxKeys, knownRefusals);
  return client;
}

function releaseClient(client: Client): void {
  if (--client.refs === 0) client.close();
}
