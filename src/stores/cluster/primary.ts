/** ClusterStorePrimary: the counters of every worker, kept in the primary on the MemoryStore's code, answering node:cluster, worker_threads and PM2 workers, and invalidating the refusals they remember. */
import type { ChildProcess } from 'node:child_process';
import type { Cluster } from 'node:cluster';
import * as clusterModule from 'node:cluster';
import { randomBytes } from 'node:crypto';
import type { MessagePort, Worker as ThreadWorker } from 'node:worker_threads';
import { systemClock, type Clock } from '../../clock.js';
import { describe } from '../../duration.js';
import { ErrorCode, FloodgateError } from '../../errors.js';
import type { Outcome, Policy } from '../../policy.js';
import { assertKnownOptions } from '../../validate.js';
import { MemoryStore, memoryOptions } from '../memory.js';
import { claimLocalPrimary, releaseLocalPrimary, type LocalPrimary } from './local.js';
import {
  OPERATION_WIDTH,
  readBatch,
  KIND_BY_CODE,
  LEASE_CODE,
  LEASE_SHARE,
  PROTOCOL_VERSION,
  invalidates,
  refusalMs,
  revokesLeases,
  type BatchMessage,
  type PrimaryMessage,
  type WorkerMessage,
} from './protocol.js';
import { BatchReply, remember, validAmount } from './batch-reply.js';
import { PrimaryPolicies } from './primary-policies.js';
import { BoundedMap } from '../../bounded-map.js';
import { type PeerHost, attachTarget, attachPm2Bus, listenCluster } from './primary-peers.js';
import type { ClusterStorePrimaryOptions, ClusterPrimaryStats, Pm2Api, Binding, Hinted, Leased, Peer } from './primary-types.js';
// The CommonJS build has no esModuleInterop, so `import cluster from` would
// read a missing `.default`; the namespace works in both builds.
const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);

const OPTION_NAMES = ['maxKeys', 'sweepIntervalMs', 'clock', 'cluster', 'onFull', 'overflowCells'] as const;

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
  private readonly clock: Clock;
  private readonly maxKeys: number;
  private readonly bindings: BoundedMap<string, Binding>;
  /** The policies batches carry, decoded once, and the conflicts warned about. */
  private readonly policies = new PrimaryPolicies();
  private readonly detachers = new Set<() => void | Promise<void>>();
  private readonly attachments = new Set<() => void>();
  /** Keys workers may know as refused, in the order hinted (bounded by maxKeys). */
  private readonly hinted = new Map<string, Hinted>();
  /** Keys leased out, in the order granted (bounded by maxKeys). */
  private readonly leased = new Map<string, Leased>();
  private leaseCalls = 0;
  private unitsLeased = 0;
  /** Every worker that was sent a hint or a lease and is still reachable: each gets every invalidation. */
  private readonly subscribers = new Set<Peer>();
  /** True when this primary's clock is the system clock, so its refusals are real milliseconds a worker may count. */
  private readonly realTime: boolean;
  private invalidations = 0;
  private readonly local: LocalPrimary;
  /** What the peer code (primary-peers.ts) reaches of this primary. */
  private readonly host: PeerHost;
  private sweeper: NodeJS.Timeout | undefined;
  private closed = false;
  private batches = 0;
  private operations = 0;

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
        `ClusterStorePrimary cluster must be a boolean; got ${describe(options.cluster)}.`,
      );
    }
    const { maxKeys, sweepIntervalMs, clock, onFull, overflowCells } = memoryOptions(options, 'ClusterStorePrimary');
    this.store = new MemoryStore({ maxKeys, sweepIntervalMs, clock, onFull, overflowCells });
    this.maxKeys = maxKeys;
    this.bindings = new BoundedMap(maxKeys);
    this.clock = clock;
    this.realTime = this.clock === systemClock;
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
      this.sweeper = setInterval(() => this.sweepBindings(), sweepIntervalMs);
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
      bindings: this.bindings.size,
      attached: this.attachments.size,
      batches: this.batches,
      operations: this.operations,
      refused: this.hinted.size,
      invalidations: this.invalidations,
      leased: this.leased.size,
      leaseCalls: this.leaseCalls,
      unitsLeased: this.unitsLeased,
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
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Freed at once, so `close(); new ClusterStorePrimary()` works without an await: a closed primary answers nothing.
    releaseLocalPrimary(this.local);
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const detach of [...this.detachers]) await detach();
    this.subscribers.clear();
    this.hinted.clear();
    this.leased.clear();
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
        message: `cluster store protocol mismatch: the worker speaks version ${describe(message.floodgate)}, this primary ${PROTOCOL_VERSION}. Run the same floodgate release in the primary and the workers.`,
      });
      return;
    }
    if (message.t === 'hello') {
      reply(this.ready());
    } else if (message.t === 'batch') {
      if (strict && message.to !== undefined && message.to !== this.id) return;
      reply(this.applyBatch(message, reply));
    }
  }

  private ready(): PrimaryMessage {
    return { floodgate: PROTOCOL_VERSION, t: 'ready', id: this.id };
  }

  /**
   * Applies a batch in order, synchronously: nothing interleaves, so each
   * operation is atomic. Invalidations it causes go to every hinted worker
   * before the answer goes to `peer`, so that on every channel they precede
   * each answer computed after them.
   */
  private applyBatch(message: BatchMessage, peer: Peer): PrimaryMessage {
    const batchView = readBatch(message);
    if (batchView === undefined) {
      const id = message.id;
      return {
        floodgate: PROTOCOL_VERSION,
        t: 'error',
        ...(Number.isSafeInteger(id) ? { id } : {}),
        code: ErrorCode.STORE_ERROR,
        message: 'cluster store primary received a malformed batch.',
      };
    }
    const { id, policies: tuples, operations: o, times: n, wantsHints, wants } = batchView;
    this.batches++;
    const batch = this.batches;
    const policies = tuples.map((tuple) => this.policies.resolve(tuple));
    const primaryNow = this.clock();
    // The monotonic time of the decisions, for when hinted keys stop mattering.
    const mono = performance.now();
    const reply = new BatchReply();

    for (let i = 0, j = 0; j < o.length; i++, j += OPERATION_WIDTH) {
      this.operations++;
      const code = o[j];
      const policyIndex = o[j + 1];
      const leasing = code === LEASE_CODE;
      // typeof checks first: an index like "length" must not reach the arrays.
      const kind = leasing ? 'consume' : typeof code === 'number' ? KIND_BY_CODE[code] : undefined;
      const resolved = typeof policyIndex === 'number' ? policies[policyIndex] : undefined;
      const key = o[j + 2];
      const amount = o[j + 3];
      if (
        kind === undefined ||
        resolved === undefined ||
        typeof key !== 'string' ||
        key.length === 0 ||
        !validAmount(leasing ? 'lease' : kind, amount) ||
        (leasing && resolved.policy.algorithm !== 'fixed-window')
      ) {
        reply.fail(i, ErrorCode.STORE_ERROR, 'cluster store primary received a malformed operation.');
        continue;
      }
      const t = n === undefined ? -1 : n[i];
      const workerTime = typeof t === 'number' && t >= 0;
      const now = workerTime ? t : primaryNow;

      const bound = this.bindings.get(key);
      if (bound !== undefined) {
        if (bound.fp !== resolved.fp && bound.until > now) {
          reply.fail(i, ErrorCode.CONFLICTING_OPTIONS, this.policies.conflict(key, bound.policy, resolved.policy));
          continue;
        }
        // Re-inserted below, which keeps the Map in least-recently-used order.
        this.bindings.delete(key);
      }

      // The MemoryStore evicts its least recently written key only when an
      // operation starts full, and which key goes is not reported: then any
      // hinted key may be the one forgotten (admissible again), so every
      // worker forgets everything, and nothing is hinted while it is full.
      // Leases go too: an evicted key's count is forgotten, so units leased in it would be spent twice.
      const full = this.store.size >= this.maxKeys;
      if ((this.hinted.size > 0 || this.leased.size > 0) && full) {
        this.hinted.clear();
        this.leased.clear();
        reply.forgetEverything();
      }

      let outcome: Outcome;
      let granted = 0;
      try {
        if (leasing) {
          // No surplus while full (see above), or off real time (a worker's or this primary's own clock: a lease
          // runs out on the worker's monotonic clock, which such a clock does not drive).
          const want = full || workerTime || !this.realTime ? (amount as number) : Math.max(amount as number, wants?.get(i) ?? 0);
          ({ outcome, granted } = this.grant(key, resolved.policy, amount as number, want, now));
        } else {
          outcome = this.store.applySync({ kind, key, amount: amount as number, policy: resolved.policy }, now);
        }
      } catch (error) {
        reply.fail(i, ErrorCode.STORE_ERROR, `cluster store primary failed: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      reply.answer(outcome);
      if (leasing) {
        this.leaseCalls++;
        reply.grant(i, granted, now + outcome.resetMs);
        if (granted > (amount as number)) {
          this.unitsLeased += granted - (amount as number);
          reply.leasedOut = true;
          const dropped = remember(this.leased, key, { fp: resolved.fp, until: mono + outcome.resetMs }, this.maxKeys);
          if (dropped !== undefined && dropped[1].until > mono) reply.revoke(dropped[0]);
        }
      } else if (this.leased.size > 0) {
        const held = this.leased.get(key);
        // Units leased before a penalty, block or reset (or under another policy) must not be spent after it.
        // The revocation goes out before this batch's answer, so a worker drops even a grant made earlier in it.
        if (held !== undefined && (revokesLeases(kind) || held.fp !== resolved.fp)) {
          this.leased.delete(key);
          if (held.until > mono) reply.revoke(key);
        }
      }

      if (this.hinted.size > 0) {
        const known = this.hinted.get(key);
        // A reward, penalty, block or reset may make the key admissible
        // earlier; another policy taking the key over changes what its
        // callers must be told (a conflict, not a refusal).
        if (known !== undefined && (invalidates(kind) || known.fp !== resolved.fp)) {
          this.hinted.delete(key);
          if (known.until > mono) reply.staleKey(key);
          // Hinted earlier in this very batch: withdraw it from the answer too.
          if (known.batch === batch) reply.withdraw(known.index);
        }
      }
      // A refusal the worker may replay by itself: decided on real time (the
      // primary's system clock, or the worker's own clock it sent), and with
      // the store not full (see above).
      if (wantsHints && (workerTime || this.realTime) && this.store.size < this.maxKeys) {
        // A top-up (need 0) decided nothing about a consume: it reads like a peek.
        const ms = refusalMs(leasing && amount === 0 ? 'peek' : kind, resolved.policy, outcome);
        if (ms > 0) {
          reply.hint(i);
          const evicted = remember(
            this.hinted,
            key,
            { fp: resolved.fp, until: workerTime ? Infinity : mono + ms, batch, index: i },
            this.maxKeys,
          );
          if (evicted !== undefined) {
            if (evicted[1].until > mono) reply.staleKey(evicted[0]);
            if (evicted[1].batch === batch) reply.withdraw(evicted[1].index);
          }
        }
      }

      const until = now + outcome.resetMs;
      if (until > now) {
        const binding = bound ?? { fp: resolved.fp, policy: resolved.policy, until };
        binding.fp = resolved.fp;
        binding.policy = resolved.policy;
        binding.until = until;
        this.bindings.set(key, binding);
      }
    }
    // Subscribed before the broadcast: a worker leased to in this very batch must hear a revocation the batch makes.
    if (reply.subscribes) this.subscribers.add(peer);
    const invalidation = reply.invalidation();
    if (invalidation !== undefined) this.broadcast(invalidation);
    return reply.result(id);
  }

  /**
   * A lease: a consume of `need` units plus up to `want − need` more, at most
   * LEASE_SHARE of what remains beyond the need, in one synchronous step.
   * When `need` does not fit, the outcome is the refused consume of `need`,
   * exactly as a plain consume (which blocks the key under `blockMs`).
   */
  private grant(key: string, policy: Policy, need: number, want: number, now: number): { outcome: Outcome; granted: number } {
    let take = need;
    let peek: Outcome | undefined;
    // With a block duration, a refusal caused by units parked in another worker would block the key: no surplus.
    if (want > need && policy.blockMs === 0) {
      peek = this.store.applySync({ kind: 'peek', key, amount: 0, policy }, now);
      const available = peek.allowed ? peek.remaining : 0;
      if (available >= need) take = Math.min(want, Math.max(need, Math.floor(available * LEASE_SHARE)), available);
    }
    // Nothing to take (a top-up finding no surplus): the state as it stands, read once.
    if (take === 0) return { outcome: peek ?? this.store.applySync({ kind: 'peek', key, amount: 0, policy }, now), granted: 0 };
    const outcome = this.store.applySync({ kind: 'consume', key, amount: take, policy }, now);
    return { outcome, granted: outcome.allowed ? take : 0 };
  }

  /** Sends an invalidation to every worker that was ever hinted and is still reachable. */
  private broadcast(message: PrimaryMessage): void {
    this.invalidations++;
    for (const peer of this.subscribers) peer(message);
  }

  private sweepBindings(): void {
    const now = this.clock();
    for (const [key, binding] of this.bindings) {
      if (binding.until <= now) this.bindings.delete(key);
    }
    const mono = performance.now();
    for (const told of [this.hinted, this.leased]) {
      for (const [key, entry] of told) if (entry.until <= mono) told.delete(key);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new FloodgateError(ErrorCode.CLOSED, 'This ClusterStorePrimary was closed; create a new one.');
  }
}
