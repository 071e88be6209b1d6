/** The ClusterStorePrimary's types. */
/**
 * Its options and stats, the PM2 API it drives, and what it remembers per key (bindings, hints, leases).
 */
import type { MemorySnapshot } from '../memory-snapshot.js';
import type { Clock } from '../../core/clock.js';
import type { Policy } from '../../core/policy.js';
import type { OnFull } from '../memory.js';
import type { PrimaryMessage } from './protocol.js';
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
  /**
   * A snapshot (`primary.snapshot()`, `MemoryStore#snapshot()`) to start from: counts, blocks and calendar quotas of
   * an earlier run, as {@link MemoryStore.restore} restores them.
   */
  restore?: MemorySnapshot;
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

/** A policy tuple from the wire, decoded, with its fingerprint. */
export interface ResolvedPolicy {
  policy: Policy;
  /** The tuple as a string: equal options, equal string. */
  fp: string;
  /** The fingerprint of the policy a per-key override changes (`fp` itself for any other): policies of one family may take turns on a key. */
  family: string;
}

/** The policy that last touched a key, while its usage matters. */
export interface Binding {
  /** The binding policy's family (see ResolvedPolicy.family). */
  family: string;
  policy: Policy;
  /** Until when the key's usage can still matter; after it, another policy may take the key over. */
  until: number;
}

/** A key the primary told a worker it may refuse by itself. */
export interface Hinted {
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
export interface Leased {
  /** The policy it was granted under. */
  readonly fp: string;
  /** performance.now() here after which the lease is surely spent or expired: the grant's time plus the window's ms left. */
  readonly until: number;
}

/** Sends one message to one worker. Stable per worker: it is how the primary tells its workers apart. */
export type Peer = (message: PrimaryMessage) => void;
