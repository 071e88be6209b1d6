/** ClusterStorePrimary: the counters of every worker, kept in the primary on the MemoryStore's code. */
/**
 * It answers node:cluster, worker_threads and PM2 workers, and invalidates the refusals they remember.
 */
import type { ChildProcess } from 'node:child_process';
import type { Cluster } from 'node:cluster';
import * as clusterModule from 'node:cluster';
import { randomBytes } from 'node:crypto';
import type { MessagePort, Worker as ThreadWorker } from 'node:worker_threads';
import { systemClock } from '../../core/clock.js';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { assertKnownOptions } from '../../core/validate.js';
import type { MemorySnapshot } from '../memory-snapshot.js';
import { MemoryStore, memoryOptions } from '../memory.js';
import { claimLocalPrimary, releaseLocalPrimary, type LocalPrimary } from './local.js';
import { PROTOCOL_VERSION, type PrimaryMessage, type WorkerMessage } from './protocol.js';
import { BatchApplier } from './primary-batches.js';
import { type PeerHost, attachTarget, attachPm2Bus, listenCluster } from './primary-peers.js';
import type { ClusterStorePrimaryOptions, ClusterPrimaryStats, Pm2Api, Peer } from './primary-types.js';
// The CommonJS build has no esModuleInterop, so `import cluster from` would
// read a missing `.default`; the namespace works in both builds.
const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);

const OPTION_NAMES = ['maxKeys', 'sweepIntervalMs', 'clock', 'cluster', 'onFull', 'overflowCells', 'restore'] as const;

/**
 * The primary side of the cluster store: one {@link MemoryStore} that every
 * worker's {@link ClusterStore} reaches over IPC. Each batch is applied
 * synchronously with `MemoryStore.applySync`, so the algorithms are exactly
 * the memory store's and every operation is atomic across workers.
 *
 * Create one per process, before or after forking: workers that start first
 * keep their requests queued and repeat their handshake until it answers.
 * It answers node:cluster workers on its own (see
 * {@link ClusterStorePrimaryOptions.cluster}); {@link attach} adds worker
 * threads or message ports and {@link attachPm2} a PM2 bus.
 *
 * **Conflicting options fail loudly.** The store holds no limiter
 * configuration (each operation carries its policy), so the primary checks
 * where sharing would bite: it remembers, per key, the policy that last
 * touched it for as long as that usage matters (its `resetMs`). An operation
 * on the same key with different options (two limiters given the same
 * `prefix` but different limits, say) is refused with
 * `FLOODGATE_CONFLICTING_OPTIONS` instead of silently sharing, or corrupting,
 * the counter; the primary also emits one process warning per conflict. The
 * check is per key rather than per prefix because a key does not say where
 * its prefix ends (prefixes and keys may both contain ':'), and per key it is
 * exact: no false alarm for limiters that merely look alike, and it also
 * catches prefixes that collide, such as `"a"` + `"b:c"` and `"a:b"` + `"c"`.
 * The remembered policies are bounded by `maxKeys` like the keys.
 *
 * A worker that dies leaves nothing behind: node:cluster workers have no
 * per-worker state here at all, and attached threads are detached on exit.
 */
export class ClusterStorePrimary {
  /** A random id of this primary, sent in the handshake; PM2 workers address their batches to it. */
  readonly id: string = randomBytes(6).toString('hex');
  private readonly store: MemoryStore;
  /** Applies the batches, and keeps what they told workers. */
  private readonly applier: BatchApplier;
  private readonly detachers = new Set<() => void | Promise<void>>();
  private readonly attachments = new Set<() => void>();
  /** Every worker that was sent a hint or a lease and is still reachable: each gets every invalidation. */
  private readonly subscribers = new Set<Peer>();
  private invalidations = 0;
  private readonly local: LocalPrimary;
  /** What the peer code (primary-peers.ts) reaches of this primary. */
  private readonly host: PeerHost;
  private sweeper: NodeJS.Timeout | undefined;
  private closed = false;

  /**
   * @param options - see {@link ClusterStorePrimaryOptions}
   * @throws FloodgateError CONFLICTING_OPTIONS when another primary is open in
   *   this process: two would both answer every worker and count twice.
   */
  constructor(options: ClusterStorePrimaryOptions = {}) {
    assertKnownOptions(options, OPTION_NAMES, 'ClusterStorePrimary');
    if (options.cluster !== undefined && typeof options.cluster !== 'boolean') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStorePrimary cluster must be a boolean; got ${describeValue(options.cluster)}.`,
      );
    }
    const { maxKeys, sweepIntervalMs, clock, onFull, overflowCells } = memoryOptions(options, 'ClusterStorePrimary');
    const memory = { maxKeys, sweepIntervalMs, clock, onFull, overflowCells };
    this.store = options.restore === undefined ? new MemoryStore(memory) : MemoryStore.restore(options.restore, memory);
    this.applier = new BatchApplier(this.store, clock, maxKeys, clock === systemClock);
    this.local = {
      receive: (message, reply) => this.receive(message, reply, false),
      forget: (reply) => void this.subscribers.delete(reply),
    };
    if (!claimLocalPrimary(this.local)) {
      void this.store.close();
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        'A ClusterStorePrimary is already running in this process. Create one per process (it serves every limiter and worker), or close() the old one first.',
      );
    }
    if (sweepIntervalMs > 0) {
      this.sweeper = setInterval(() => this.applier.sweep(), sweepIntervalMs);
      this.sweeper.unref();
    }
    this.host = {
      receive: (message, reply, strict) => this.receive(message, reply, strict),
      ready: () => this.ready(),
      detachers: this.detachers,
      attachments: this.attachments,
      subscribers: this.subscribers,
      isClosed: () => this.closed,
    };
    if (options.cluster ?? cluster.isPrimary) listenCluster(this.host);
  }

  /** Counters for tests and metrics. */
  stats(): ClusterPrimaryStats {
    return {
      keys: this.store.size,
      overflows: this.store.overflows,
      bindings: this.applier.bindings.size,
      attached: this.attachments.size,
      batches: this.applier.batches,
      operations: this.applier.operations,
      refused: this.applier.hinted.size,
      invalidations: this.invalidations,
      leased: this.applier.leased.size,
      leaseCalls: this.applier.leaseCalls,
      unitsLeased: this.applier.unitsLeased,
    };
  }

  /**
   * Serves a worker thread (its `parentPort`), one end of a `MessageChannel`
   * whose other end a {@link ClusterStore} was given as `transport`, or a
   * `child_process.fork()` child (its IPC channel). Detaches by itself when
   * the thread or child exits or the port closes. (node:cluster workers need
   * no attaching.)
   * @returns a function that detaches it earlier
   */
  attach(target: ThreadWorker | MessagePort | ChildProcess): () => void {
    this.assertOpen();
    return attachTarget(this.host, target);
  }

  /**
   * Serves every process of a PM2 daemon: connects `pm2`, listens on its bus
   * for workers' batches and answers each with `pm2.sendDataToProcessId`.
   * Run it in one process per daemon, usually a small fork-mode app next to
   * the cluster-mode one (see docs/cluster.md). Two PM2 primaries do not
   * double-count: each worker addresses its batches to the primary that
   * answered its handshake, but their counters are then split, so run one.
   * {@link close} disconnects the bus and `pm2` itself, so give the primary
   * a pm2 connection of its own.
   */
  async attachPm2(pm2: Pm2Api): Promise<void> {
    this.assertOpen();
    return attachPm2Bus(this.host, pm2);
  }

  /** Stops answering, detaches every thread, port and PM2 bus, and frees the process's primary slot. Idempotent. */
  /** The counts, blocks and overflow sketches every worker shares, as {@link MemoryStore}'s snapshot; restore with the `restore` option. */
  snapshot(): MemorySnapshot {
    return this.store.snapshot();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Freed at once, so `close(); new ClusterStorePrimary()` works without an await: a closed primary answers nothing.
    releaseLocalPrimary(this.local);
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const detach of [...this.detachers]) await detach();
    this.subscribers.clear();
    this.applier.hinted.clear();
    this.applier.leased.clear();
    await this.store.close();
  }

  /**
   * Handles one message from a worker. `strict` (the PM2 bus, where every
   * primary sees every batch) ignores batches addressed to another primary.
   */
  private receive(message: WorkerMessage, reply: Peer, strict: boolean): void {
    if (this.closed) return;
    if (message.floodgate !== PROTOCOL_VERSION) {
      const id = (message as { id?: unknown }).id;
      reply({
        floodgate: PROTOCOL_VERSION,
        t: 'error',
        ...(typeof id === 'number' ? { id } : {}),
        code: ErrorCode.STORE_ERROR,
        message: `cluster store protocol mismatch: the worker speaks version ${describeValue(message.floodgate)}, this primary ${PROTOCOL_VERSION}. Run the same floodgate release in the primary and the workers.`,
      });
      return;
    }
    if (message.t === 'hello') {
      reply(this.ready());
    } else if (message.t === 'batch') {
      if (strict && message.to !== undefined && message.to !== this.id) return;
      const applied = this.applier.apply(message);
      // Subscribed before the broadcast: a worker leased to in this very batch must hear a revocation the batch makes.
      // Invalidations go out before the answer, so that on every channel they precede each answer computed after them.
      if (applied.subscribes) this.subscribers.add(reply);
      if (applied.invalidation !== undefined) this.broadcast(applied.invalidation);
      reply(applied.answer);
    }
  }

  private ready(): PrimaryMessage {
    return { floodgate: PROTOCOL_VERSION, t: 'ready', id: this.id };
  }

  /** Sends an invalidation to every worker that was ever hinted and is still reachable. */
  private broadcast(message: PrimaryMessage): void {
    this.invalidations++;
    for (const peer of this.subscribers) peer(message);
  }

  private assertOpen(): void {
    if (this.closed) throw new FloodgateError(ErrorCode.CLOSED, 'This ClusterStorePrimary was closed; create a new one.');
  }
}
