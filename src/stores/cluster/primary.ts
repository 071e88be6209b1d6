/** ClusterStorePrimary: the counters of every worker, kept in the primary on the MemoryStore's code, answering node:cluster, worker_threads and PM2 workers, and invalidating the refusals they remember. */
import type { ChildProcess } from 'node:child_process';
import type { Cluster, Worker as ClusterWorker } from 'node:cluster';
import * as clusterModule from 'node:cluster';
import { randomBytes } from 'node:crypto';
import type { MessagePort, Worker as ThreadWorker } from 'node:worker_threads';
import { systemClock, type Clock } from '../../clock.js';
import { describe } from '../../duration.js';
import { ErrorCode, FloodgateError } from '../../errors.js';
import type { Outcome, Policy } from '../../policy.js';
import { assertKnownOptions } from '../../validate.js';
import { MemoryStore, memoryOptions, type OnFull } from '../memory.js';
import { claimLocalPrimary, releaseLocalPrimary, type LocalPrimary } from './local.js';
import {
  KIND_BY_CODE,
  LEASE_CODE,
  LEASE_SHARE,
  PM2_MESSAGE_TYPE,
  PROTOCOL_VERSION,
  decodePolicy,
  describePolicy,
  invalidates,
  openWorkerEnvelope,
  pushOutcome,
  refusalMs,
  revokesLeases,
  toWorker,
  type BatchMessage,
  type PrimaryMessage,
  type ResultMessage,
  type WorkerMessage,
} from './protocol.js';

// The CommonJS build has no esModuleInterop, so `import cluster from` would
// read a missing `.default`; the namespace works in both builds.
const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);

/** Options of {@link ClusterStorePrimary}. */
export interface ClusterStorePrimaryOptions {
  /**
   * Most keys held at once, exactly as {@link MemoryStore}'s `maxKeys`: when
   * full, the least recently used key is forgotten. Default 100 000.
   */
  maxKeys?: number;
  /**
   * What a full table does with a new key, exactly as {@link MemoryStore}'s
   * `onFull`: `'evict'` (default) forgets the least recently used key;
   * `'overflow'` forgets no live key and decides new ones in a bounded
   * sketch. Use `'overflow'` where keys come from clients.
   */
  onFull?: OnFull;
  /** With `onFull: 'overflow'`: cells of each policy's sketch, as {@link MemoryStore}'s `overflowCells`. */
  overflowCells?: number;
  /** How often expired keys are dropped in the background, in ms. Default 30 000; 0 disables it. */
  sweepIntervalMs?: number;
  /**
   * The primary's time source, used for operations whose worker store has no
   * clock of its own. Default `Date.now`.
   */
  clock?: Clock;
  /**
   * Answer node:cluster workers (`cluster.on('message')`). Default: true in
   * a cluster primary (`cluster.isPrimary`). Set false when this primary only
   * serves worker threads or PM2.
   */
  cluster?: boolean;
}

/** Counters of a {@link ClusterStorePrimary}, for tests and metrics. */
export interface ClusterPrimaryStats {
  /** Keys held by the underlying MemoryStore. */
  keys: number;
  /** Operations decided in the overflow sketch since start (`onFull: 'overflow'` with the table full). */
  overflows: number;
  /** Keys whose policy is remembered for the conflict check (at most `maxKeys`). */
  bindings: number;
  /** Worker threads, ports and child processes attached with {@link ClusterStorePrimary.attach}. */
  attached: number;
  /** Batch messages answered since start. */
  batches: number;
  /** Operations applied since start (failed ones included). */
  operations: number;
  /** Keys some worker may currently know as refused (hinted, not yet expired or invalidated). */
  refused: number;
  /** Invalidation rounds sent to the workers since start (one message to each hinted worker per round). */
  invalidations: number;
  /** Keys some worker may hold a lease of (granted, not yet expired or revoked). */
  leased: number;
  /** Lease operations answered since start. */
  leaseCalls: number;
  /** Units granted by leases beyond their operations' need, since start. */
  unitsLeased: number;
}

/**
 * The subset of the `pm2` package's API that {@link ClusterStorePrimary.attachPm2}
 * uses; pass `pm2` itself (`import pm2 from 'pm2'`). floodgate does not
 * depend on pm2.
 */
export interface Pm2Api {
  /** Connects to the running PM2 daemon. */
  connect(callback: (error: Error) => void): void;
  /** Subscribes to the daemon's event bus. */
  launchBus(callback: (error: Error, bus: Pm2Bus) => void): void;
  /** Sends `packet` to the process with PM2 id `processId`. */
  sendDataToProcessId(processId: number, packet: object, callback: (error: Error, result: unknown) => void): void;
  /** Closes the bus connection. */
  disconnectBus?(callback?: (error: Error) => void): void;
  /** Closes the daemon connection. */
  disconnect?(): void;
}

/** The PM2 event bus, as far as floodgate uses it. */
export interface Pm2Bus {
  /** Listens for bus events. */
  on(event: string, listener: (packet: Pm2Packet) => void): unknown;
  /** Stops listening (axon's sub-emitter drops every listener of `event`). */
  off?(event: string): unknown;
}

/** A `process:msg` packet on the PM2 bus. */
export interface Pm2Packet {
  /** What the process sent as `data`. */
  data?: unknown;
  /** Who sent it. */
  process?: { pm_id?: unknown };
}

interface ResolvedPolicy {
  policy: Policy;
  /** The tuple as a string: equal options, equal string. */
  fp: string;
}

interface Binding {
  fp: string;
  policy: Policy;
  /** Until when the key's usage can still matter; after it, another policy may take the key over. */
  until: number;
}

/** A key the primary told a worker it may refuse by itself. */
interface Hinted {
  /** The policy it was refused under. */
  readonly fp: string;
  /**
   * performance.now() here after which no worker refuses it any more: the
   * decision's time plus the refusal, which a worker counts from when it sent
   * its batch, earlier. Infinity when decided at a worker's own clock, whose
   * relation to ours is unknown (such a key is forgotten by invalidation or
   * when the map is full, never by time).
   */
  readonly until: number;
  /** The batch (count) and operation index of the hint, to withdraw it from an answer not sent yet. */
  readonly batch: number;
  readonly index: number;
}

/** A key some worker holds a lease of. */
interface Leased {
  /** The policy it was granted under. */
  readonly fp: string;
  /** performance.now() here after which the lease is surely spent or expired: the grant's time plus the window's ms left. */
  readonly until: number;
}

/** Sends one message to one worker. Stable per worker: it is how the primary tells its workers apart. */
type Peer = (message: PrimaryMessage) => void;

const OPTION_NAMES = ['maxKeys', 'sweepIntervalMs', 'clock', 'cluster', 'onFull', 'overflowCells'] as const;
/** Distinct policies remembered; more than this many limiters is a leak, and the cache just restarts. */
const POLICY_CACHE_SIZE = 1024;
/** Distinct conflicts warned about, so a persistent misconfiguration does not flood the log. */
const WARNED_CONFLICTS = 100;
const ignore = (): void => {};

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
  private readonly bindings = new Map<string, Binding>();
  private readonly policies = new Map<string, ResolvedPolicy>();
  private readonly warned = new Set<string>();
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
    if (options.cluster ?? cluster.isPrimary) this.listenCluster();
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
    const candidate = target as Partial<ThreadWorker & ChildProcess> | null;
    const posts = typeof candidate?.postMessage === 'function';
    if (
      typeof candidate !== 'object' ||
      candidate === null ||
      typeof candidate.on !== 'function' ||
      (!posts && typeof candidate.send !== 'function')
    ) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStorePrimary.attach takes a worker_threads Worker, a MessagePort or a forked ChildProcess; got ${describe(target)}.`,
      );
    }
    const reply = posts
      ? (message: PrimaryMessage): void => {
          try {
            (target as ThreadWorker | MessagePort).postMessage(toWorker(message));
          } catch {
            // The thread is gone; its 'exit' detaches us.
          }
        }
      : (message: PrimaryMessage): void => {
          const child = target as ChildProcess;
          // With a callback, a child that died meanwhile is an ignored error, not an 'error' event.
          if (child.connected) child.send(toWorker(message), ignore);
        };
    // Worker, MessagePort and ChildProcess are all EventEmitters with these events.
    const emitter = target as unknown as NodeJS.EventEmitter;
    const onMessage = (value: unknown): void => {
      const message = openWorkerEnvelope(value);
      if (message) this.receive(message, reply, false);
    };
    const ends = ['exit', 'close', 'disconnect'] as const;
    const detach = (): void => {
      emitter.off('message', onMessage);
      for (const event of ends) emitter.off(event, detach);
      this.detachers.delete(detach);
      this.attachments.delete(detach);
      this.subscribers.delete(reply);
    };
    emitter.on('message', onMessage);
    // A Worker emits 'exit', a MessagePort 'close', a child 'disconnect' and
    // 'exit'; listening for all of them on each is harmless.
    for (const event of ends) emitter.on(event, detach);
    this.detachers.add(detach);
    this.attachments.add(detach);
    // A store that is already waiting need not wait for its next handshake retry.
    reply(this.ready());
    return detach;
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
    if (typeof pm2 !== 'object' || pm2 === null || typeof pm2.launchBus !== 'function' || typeof pm2.sendDataToProcessId !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `ClusterStorePrimary.attachPm2 takes the pm2 module (import pm2 from 'pm2'); got ${describe(pm2)}.`,
      );
    }
    await new Promise<void>((resolve, reject) => pm2.connect((error) => (error ? reject(error) : resolve())));
    const bus = await new Promise<Pm2Bus>((resolve, reject) => pm2.launchBus((error, b) => (error ? reject(error) : resolve(b))));
    // One peer per PM2 process id (ids are reused across restarts, so this stays small).
    const peers = new Map<number, Peer>();
    const onPacket = (packet: Pm2Packet): void => {
      const processId = packet?.process?.pm_id;
      const message = openWorkerEnvelope({ type: PM2_MESSAGE_TYPE, data: packet?.data });
      if (!message || typeof processId !== 'number') return;
      let peer = peers.get(processId);
      if (peer === undefined) {
        peer = (reply) => pm2.sendDataToProcessId(processId, toWorker(reply), ignore);
        peers.set(processId, peer);
      }
      this.receive(message, peer, true);
    };
    bus.on(PM2_MESSAGE_TYPE, onPacket);
    const detach = (): void => {
      this.detachers.delete(detach);
      bus.off?.(PM2_MESSAGE_TYPE);
      pm2.disconnectBus?.(ignore);
      pm2.disconnect?.();
    };
    this.detachers.add(detach);
    if (this.closed) detach();
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
    const { id, p, o, n } = message;
    if (
      !Number.isSafeInteger(id) ||
      !Array.isArray(p) ||
      !Array.isArray(o) ||
      o.length % 4 !== 0 ||
      (message.w !== undefined && !Array.isArray(message.w)) ||
      (n !== undefined && (!Array.isArray(n) || n.length * 4 !== o.length))
    ) {
      return {
        floodgate: PROTOCOL_VERSION,
        t: 'error',
        ...(Number.isSafeInteger(id) ? { id } : {}),
        code: ErrorCode.STORE_ERROR,
        message: 'cluster store primary received a malformed batch.',
      };
    }
    this.batches++;
    const batch = this.batches;
    const policies = p.map((tuple) => this.resolvePolicy(tuple));
    const primaryNow = this.clock();
    // The monotonic time of the decisions, for when hinted keys stop mattering.
    const mono = performance.now();
    const wantsHints = message.c === 1;
    let hints: number[] | undefined;
    let stale: Set<string> | undefined;
    let revoked: Set<string> | undefined;
    let staleAll = false;
    let grants: number[] | undefined;
    let leasedOut = false;
    const wants = message.w === undefined ? undefined : wantsOf(message.w);
    const r: (number | null)[] = [];
    let errors: [number, string, string][] | undefined;
    const fail = (index: number, code: string, text: string): void => {
      r.push(-1, 0, 0, 0, 0);
      (errors ??= []).push([index, code, text]);
    };

    for (let i = 0, j = 0; j < o.length; i++, j += 4) {
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
        fail(i, ErrorCode.STORE_ERROR, 'cluster store primary received a malformed operation.');
        continue;
      }
      const t = n === undefined ? -1 : n[i];
      const workerTime = typeof t === 'number' && t >= 0;
      const now = workerTime ? t : primaryNow;

      const bound = this.bindings.get(key);
      if (bound !== undefined) {
        if (bound.fp !== resolved.fp && bound.until > now) {
          fail(i, ErrorCode.CONFLICTING_OPTIONS, this.conflict(key, bound.policy, resolved.policy));
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
        staleAll = true;
        if (hints) hints.length = 0;
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
        fail(i, ErrorCode.STORE_ERROR, `cluster store primary failed: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      pushOutcome(r, outcome);
      if (leasing) {
        this.leaseCalls++;
        (grants ??= []).push(i, granted, now + outcome.resetMs);
        if (granted > (amount as number)) {
          this.unitsLeased += granted - (amount as number);
          leasedOut = true;
          const dropped = remember(this.leased, key, { fp: resolved.fp, until: mono + outcome.resetMs }, this.maxKeys);
          if (dropped !== undefined && dropped[1].until > mono) (revoked ??= new Set()).add(dropped[0]);
        }
      } else if (this.leased.size > 0) {
        const held = this.leased.get(key);
        // Units leased before a penalty, block or reset (or under another policy) must not be spent after it.
        // The revocation goes out before this batch's answer, so a worker drops even a grant made earlier in it.
        if (held !== undefined && (revokesLeases(kind) || held.fp !== resolved.fp)) {
          this.leased.delete(key);
          if (held.until > mono) (revoked ??= new Set()).add(key);
        }
      }

      if (this.hinted.size > 0) {
        const known = this.hinted.get(key);
        // A reward, penalty, block or reset may make the key admissible
        // earlier; another policy taking the key over changes what its
        // callers must be told (a conflict, not a refusal).
        if (known !== undefined && (invalidates(kind) || known.fp !== resolved.fp)) {
          this.hinted.delete(key);
          if (known.until > mono) (stale ??= new Set()).add(key);
          // Hinted earlier in this very batch: withdraw it from the answer too.
          if (known.batch === batch && hints) withdraw(hints, known.index);
        }
      }
      // A refusal the worker may replay by itself: decided on real time (the
      // primary's system clock, or the worker's own clock it sent), and with
      // the store not full (see above).
      if (wantsHints && (workerTime || this.realTime) && this.store.size < this.maxKeys) {
        // A top-up (need 0) decided nothing about a consume: it reads like a peek.
        const ms = refusalMs(leasing && amount === 0 ? 'peek' : kind, resolved.policy, outcome);
        if (ms > 0) {
          (hints ??= []).push(i);
          const evicted = remember(
            this.hinted,
            key,
            { fp: resolved.fp, until: workerTime ? Infinity : mono + ms, batch, index: i },
            this.maxKeys,
          );
          if (evicted !== undefined) {
            if (evicted[1].until > mono) (stale ??= new Set()).add(evicted[0]);
            if (evicted[1].batch === batch) withdraw(hints, evicted[1].index);
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
        if (this.bindings.size > this.maxKeys) this.bindings.delete(this.bindings.keys().next().value!);
      }
    }
    // Subscribed before the broadcast: a worker leased to in this very batch must hear a revocation the batch makes.
    if ((hints !== undefined && hints.length > 0) || leasedOut) this.subscribers.add(peer);
    if (staleAll) this.broadcast({ floodgate: PROTOCOL_VERSION, t: 'inv', all: 1 });
    else if (stale || revoked) {
      this.broadcast({
        floodgate: PROTOCOL_VERSION,
        t: 'inv',
        ...(stale ? { k: [...stale] } : {}),
        ...(revoked ? { l: [...revoked] } : {}),
      });
    }
    const result: ResultMessage = {
      floodgate: PROTOCOL_VERSION,
      t: 'result',
      id,
      r,
      ...(errors ? { e: errors } : {}),
      ...(hints !== undefined && hints.length > 0 ? { h: hints } : {}),
      ...(grants ? { g: grants } : {}),
    };
    return result;
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

  private resolvePolicy(tuple: unknown): ResolvedPolicy | undefined {
    if (!Array.isArray(tuple) || tuple.length !== 4) return undefined;
    const fp = tuple.join(',');
    let resolved = this.policies.get(fp);
    if (resolved === undefined) {
      const policy = decodePolicy(tuple);
      if (policy === undefined) return undefined;
      if (this.policies.size >= POLICY_CACHE_SIZE) this.policies.clear();
      resolved = { policy, fp };
      this.policies.set(fp, resolved);
    }
    return resolved;
  }

  private conflict(key: string, bound: Policy, incoming: Policy): string {
    const text =
      `Two limiters use the store key ${JSON.stringify(key)} with different options (${describePolicy(bound)} and ${describePolicy(incoming)}). ` +
      'Limiters that share a prefix share counters, so they must have the same options: give each limiter its own prefix.';
    const pair = `${describePolicy(bound)} / ${describePolicy(incoming)}`;
    if (!this.warned.has(pair) && this.warned.size < WARNED_CONFLICTS) {
      this.warned.add(pair);
      process.emitWarning(text, { code: ErrorCode.CONFLICTING_OPTIONS });
    }
    return text;
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

  private listenCluster(): void {
    const peers = new WeakMap<ClusterWorker, Peer>();
    const onMessage = (worker: ClusterWorker, value: unknown): void => {
      const message = openWorkerEnvelope(value);
      if (!message) return;
      let peer = peers.get(worker);
      if (peer === undefined) {
        peer = (reply) => sendToWorker(worker, reply);
        peers.set(worker, peer);
      }
      this.receive(message, peer, false);
    };
    const onExit = (worker: ClusterWorker): void => {
      const peer = peers.get(worker);
      if (peer !== undefined) this.subscribers.delete(peer);
    };
    cluster.on('message', onMessage);
    cluster.on('exit', onExit);
    this.detachers.add(() => {
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
    });
    // Workers forked earlier may be waiting on a handshake; tell them now
    // rather than at their next retry.
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker) sendToWorker(worker, this.ready());
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new FloodgateError(ErrorCode.CLOSED, 'This ClusterStorePrimary was closed; create a new one.');
  }
}

/** Sends to a node:cluster worker; a worker that died meanwhile is skipped, never an unhandled 'error'. */
function sendToWorker(worker: ClusterWorker, message: PrimaryMessage): void {
  if (!worker.isConnected()) return;
  worker.send(toWorker(message), ignore);
}

/**
 * Remembers what workers were told about `key` (a hint or a lease) until
 * `value.until`, keeping the later end when they may still hold an earlier
 * one; when past `maxKeys`, drops the oldest and returns it (workers may
 * still act on it, so the caller tells them to forget it).
 */
function remember<T extends { readonly until: number }>(
  told: Map<string, T>,
  key: string,
  value: T,
  maxKeys: number,
): [string, T] | undefined {
  const earlier = told.get(key);
  if (earlier !== undefined) {
    told.delete(key);
    if (earlier.until > value.until) value = { ...value, until: earlier.until };
  }
  told.set(key, value);
  if (told.size <= maxKeys) return undefined;
  const oldest = told.entries().next().value!;
  told.delete(oldest[0]);
  return oldest;
}

/** Removes operation `index` from a batch's hints. */
function withdraw(hints: number[], index: number): void {
  const at = hints.indexOf(index);
  if (at >= 0) hints.splice(at, 1);
}

/** The units wanted by each lease operation of a batch, from its `w` pairs; malformed pairs are skipped (those leases take their need only). */
function wantsOf(w: readonly unknown[]): Map<number, number> {
  const wants = new Map<number, number>();
  for (let k = 0; k + 1 < w.length; k += 2) {
    const [index, want] = [w[k], w[k + 1]];
    if (Number.isSafeInteger(index) && Number.isSafeInteger(want) && (want as number) >= 0) wants.set(index as number, want as number);
  }
  return wants;
}

/** Amount checks that keep garbage from corrupting a counter (the limiter validates the real calls). */
function validAmount(kind: string, amount: unknown): boolean {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount)) return false;
  switch (kind) {
    case 'lease':
      return amount >= 0;
    case 'consume':
    case 'reward':
    case 'penalty':
      return amount > 0;
    case 'block':
      return amount > 0 || amount === -1;
    default:
      return true;
  }
}
