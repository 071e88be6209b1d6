/** How a ClusterStorePrimary reaches its workers. */
/**
 * Node:cluster workers, attached threads, ports and forked children, and a PM2 bus.
 */
import type { ChildProcess } from 'node:child_process';
import type { Cluster, Worker as ClusterWorker } from 'node:cluster';
import * as clusterModule from 'node:cluster';
import type { MessagePort, Worker as ThreadWorker } from 'node:worker_threads';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { PM2_MESSAGE_TYPE, openWorkerEnvelope, toWorker, type PrimaryMessage, type WorkerMessage } from './protocol.js';
import type { Pm2Api, Pm2Bus, Pm2Packet, Peer } from './primary-types.js';

/** What the peer code needs of the primary. */
export interface PeerHost {
  /** Handles one worker message; `strict` ignores batches addressed to another primary. */
  receive(message: WorkerMessage, reply: Peer, strict: boolean): void;
  /** The handshake answer. */
  ready(): PrimaryMessage;
  /** Run on close. */
  readonly detachers: Set<() => void | Promise<void>>;
  /** Attached threads, ports and children, for stats. */
  readonly attachments: Set<() => void>;
  /** Workers that get every invalidation. */
  readonly subscribers: Set<Peer>;
  /** Whether the primary was closed. */
  isClosed(): boolean;
}

// The CommonJS build has no esModuleInterop, so `import cluster from` would
// read a missing `.default`; the namespace works in both builds.
const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);

const ignore = (): void => {};

/**
 * Serves a worker thread (its `parentPort`), one end of a `MessageChannel`
 * whose other end a {@link ClusterStore} was given as `transport`, or a
 * `child_process.fork()` child (its IPC channel). Detaches by itself when
 * the thread or child exits or the port closes. (node:cluster workers need
 * no attaching.)
 * @returns a function that detaches it earlier
 */
export function attachTarget(host: PeerHost, target: ThreadWorker | MessagePort | ChildProcess): () => void {
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
      `ClusterStorePrimary.attach takes a worker_threads Worker, a MessagePort or a forked ChildProcess; got ${describeValue(target)}.`,
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
    if (message) host.receive(message, reply, false);
  };
  const ends = ['exit', 'close', 'disconnect'] as const;
  const detach = (): void => {
    emitter.off('message', onMessage);
    for (const event of ends) emitter.off(event, detach);
    host.detachers.delete(detach);
    host.attachments.delete(detach);
    host.subscribers.delete(reply);
  };
  emitter.on('message', onMessage);
  // A Worker emits 'exit', a MessagePort 'close', a child 'disconnect' and
  // 'exit'; listening for all of them on each is harmless.
  for (const event of ends) emitter.on(event, detach);
  host.detachers.add(detach);
  host.attachments.add(detach);
  // A store that is already waiting need not wait for its next handshake retry.
  reply(host.ready());
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
export async function attachPm2Bus(host: PeerHost, pm2: Pm2Api): Promise<void> {
  if (typeof pm2 !== 'object' || pm2 === null || typeof pm2.launchBus !== 'function' || typeof pm2.sendDataToProcessId !== 'function') {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `ClusterStorePrimary.attachPm2 takes the pm2 module (import pm2 from 'pm2'); got ${describeValue(pm2)}.`,
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
    host.receive(message, peer, true);
  };
  bus.on(PM2_MESSAGE_TYPE, onPacket);
  const detach = (): void => {
    host.detachers.delete(detach);
    bus.off?.(PM2_MESSAGE_TYPE);
    pm2.disconnectBus?.(ignore);
    pm2.disconnect?.();
  };
  host.detachers.add(detach);
  if (host.isClosed()) detach();
}

/** Answers node:cluster workers: every batch they send, and a ready to those already waiting. */
export function listenCluster(host: PeerHost): void {
  const peers = new WeakMap<ClusterWorker, Peer>();
  const onMessage = (worker: ClusterWorker, value: unknown): void => {
    const message = openWorkerEnvelope(value);
    if (!message) return;
    let peer = peers.get(worker);
    if (peer === undefined) {
      peer = (reply) => sendToWorker(worker, reply);
      peers.set(worker, peer);
    }
    host.receive(message, peer, false);
  };
  const onExit = (worker: ClusterWorker): void => {
    const peer = peers.get(worker);
    if (peer !== undefined) host.subscribers.delete(peer);
  };
  cluster.on('message', onMessage);
  cluster.on('exit', onExit);
  host.detachers.add(() => {
    cluster.off('message', onMessage);
    cluster.off('exit', onExit);
  });
  // Workers forked earlier may be waiting on a handshake; tell them now
  // rather than at their next retry.
  for (const worker of Object.values(cluster.workers ?? {})) {
    if (worker) sendToWorker(worker, host.ready());
  }
}

/** Sends to a node:cluster worker; a worker that died meanwhile is skipped, never an unhandled 'error'. */
function sendToWorker(worker: ClusterWorker, message: PrimaryMessage): void {
  if (!worker.isConnected()) return;
  worker.send(toWorker(message), ignore);
}
