// Starts real fixture workers (node:cluster processes and worker threads), calls them over RPC, and proxies a Store through them for the shared suites.
import { fork, type ChildProcess } from 'node:child_process';
import * as clusterModule from 'node:cluster';
import type { Cluster, Worker as ClusterWorker } from 'node:cluster';
import { fileURLToPath } from 'node:url';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import {
  FloodgateError,
  type Clock,
  type ErrorCodeValue,
  type Operation,
  type Outcome,
  type SlotAcquisition,
  type Store,
} from '../../../src/index.js';
import type { ConformanceTarget } from '../../conformance/suite.js';
import { decodeNumbers, type FixtureConfig, type RpcReply, type RpcRequest } from './wire.js';

const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);
const FIXTURE = fileURLToPath(new URL('../fixtures/worker.ts', import.meta.url));
const THREAD_ENTRY = new URL('../fixtures/thread.mjs', import.meta.url);
/** Starting a tsx worker on a busy 2-core machine can take a few seconds. */
const START_TIMEOUT_MS = 30_000;
const CALL_TIMEOUT_MS = 20_000;

/** A fixture worker the test can call and stop. */
export interface Remote {
  /** Calls a fixture method; rejects with a FloodgateError carrying the worker's error code. */
  call<T = unknown>(method: string, ...args: unknown[]): Promise<T>;
  /** Stops the worker (SIGKILL for processes, terminate() for threads) and waits for it to be gone. */
  kill(): Promise<void>;
  /** Resolves when the worker has exited, for whatever reason. */
  readonly exited: Promise<void>;
}

/** A thread fixture, plus the objects the primary attaches to. */
export interface ThreadRemote extends Remote {
  readonly worker: Worker;
  /** The primary's end of the store's MessageChannel, when started with `ownPort`. */
  readonly port: MessagePort | undefined;
}

function endpoint(post: (request: RpcRequest) => void, exited: Promise<void>) {
  let next = 1;
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void; timer: NodeJS.Timeout }>();
  let up: () => void = () => {};
  const started = new Promise<void>((resolve) => (up = resolve));
  const onReply = (value: unknown): void => {
    const reply = value as RpcReply;
    if (typeof reply !== 'object' || reply === null || typeof reply.fgtest !== 'number') return;
    if (reply.fgtest === 0) return up();
    const call = pending.get(reply.fgtest);
    if (!call) return;
    pending.delete(reply.fgtest);
    clearTimeout(call.timer);
    if (reply.err) call.reject(new FloodgateError(reply.err.code as ErrorCodeValue, reply.err.message));
    else call.resolve(reply.ok);
  };
  void exited.then(() => {
    for (const call of pending.values()) {
      clearTimeout(call.timer);
      call.reject(new Error('fixture worker exited'));
    }
    pending.clear();
  });
  const call = <T>(method: string, ...args: unknown[]): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`fixture call ${method} did not answer in ${CALL_TIMEOUT_MS} ms`));
      }, CALL_TIMEOUT_MS);
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      post({ fgtest: id, m: method, a: args });
    });
  return { onReply, call, started };
}

async function waitUp(started: Promise<void>, exited: Promise<void>, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    started,
    exited.then(() => Promise.reject(new Error(`${what} exited before it was up`))),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} not up in ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS))),
  ]).finally(() => clearTimeout(timer));
}

/** Forks a real node:cluster worker running the fixture (TypeScript, through tsx). */
export async function forkWorker(config: FixtureConfig = {}): Promise<Remote & { readonly worker: ClusterWorker }> {
  cluster.setupPrimary({ exec: FIXTURE, execArgv: ['--import', 'tsx'] });
  const worker = cluster.fork({ FG_FIXTURE: JSON.stringify(config) });
  return { worker, ...(await remoteProcess(worker.process, worker, 'cluster worker')) };
}

/** Starts the fixture with child_process.fork (no node:cluster): the primary must attach it. */
export async function forkChild(config: FixtureConfig = {}): Promise<Remote & { readonly child: ChildProcess }> {
  const child = fork(FIXTURE, [], { execArgv: ['--import', 'tsx'], env: { ...process.env, FG_FIXTURE: JSON.stringify(config) } });
  return {
    child,
    ...(await remoteProcess(
      child,
      { isConnected: () => child.connected, send: (m, cb) => child.send(m, cb), on: (e, l) => child.on(e, l) },
      'forked child',
    )),
  };
}

/** The IPC side of a fixture process, whether node:cluster forked it or child_process did. */
interface ProcessChannel {
  isConnected(): boolean;
  send(message: RpcRequest, callback: () => void): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
}

/** Drives the fixture in `proc` over `channel`, once it says it is up; kill() is SIGKILL. */
async function remoteProcess(proc: ChildProcess, channel: ProcessChannel, what: string): Promise<Remote> {
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const rpc = endpoint((request) => {
    if (channel.isConnected()) channel.send(request, () => {});
  }, exited);
  channel.on('message', rpc.onReply);
  await waitUp(rpc.started, exited, what);
  return {
    call: rpc.call,
    exited,
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * Starts a real worker thread running the fixture. With `ownPort`, its store
 * talks to the primary over a MessageChannel (returned as `port`, for
 * `primary.attach(port)`); otherwise over its parentPort (`primary.attach(worker)`).
 */
export async function startThread(config: FixtureConfig = {}, ownPort = false): Promise<ThreadRemote> {
  const channel = ownPort ? new MessageChannel() : undefined;
  const worker = new Worker(THREAD_ENTRY, {
    workerData: channel ? { ...config, port: channel.port2 } : config,
    transferList: channel ? [channel.port2] : [],
  });
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const rpc = endpoint((request) => worker.postMessage(request), exited);
  worker.on('message', rpc.onReply);
  worker.on('error', () => {}); // a terminated thread must not fail the test process
  await waitUp(rpc.started, exited, 'worker thread');
  return {
    worker,
    port: channel?.port1,
    call: rpc.call,
    exited,
    async kill() {
      await worker.terminate();
      await exited;
      channel?.port1.close();
    },
  };
}

/**
 * A Store that forwards each operation, with the suite's clock reading, to a
 * fixture worker's ClusterStore, round-robin over `remotes`: every operation
 * really crosses a worker and the primary, and consecutive ones come from
 * different workers, so the suite also proves the counters are shared.
 */
class RemoteStore implements Store {
  readonly name = 'cluster';
  private next = 0;
  constructor(
    private readonly remotes: Remote[],
    private readonly clock: Clock,
  ) {}
  async apply(operation: Operation): Promise<Outcome> {
    const remote = this.remotes[this.next++ % this.remotes.length]!;
    return decodeNumbers(await remote.call<Outcome>('apply', operation, this.clock()));
  }
  acquireSlot(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition> {
    return this.remotes[this.next++ % this.remotes.length]!.call('acquireSlot', key, limit, owner, ttlMs, this.clock());
  }
  releaseSlot(key: string, owner: string): Promise<boolean> {
    return this.remotes[this.next++ % this.remotes.length]!.call('releaseSlot', key, owner, this.clock());
  }
  renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    return this.remotes[this.next++ % this.remotes.length]!.call('renewSlot', key, owner, ttlMs, this.clock());
  }
  async consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    const remote = this.remotes[this.next++ % this.remotes.length]!;
    return (await remote.call<Outcome[]>('consumeAll', operations, this.clock())).map((outcome) => decodeNumbers(outcome));
  }
  /** The worker's ClusterStore's failure scope of each key, or undefined when it has no failureScope (a forwarder cannot show it). */
  async failureScopes(keys: readonly string[]): Promise<(string | undefined)[] | undefined> {
    const scopes = await this.remotes[0]!.call<(string | null)[] | null>('failureScopes', keys);
    return scopes?.map((scope) => scope ?? undefined);
  }
}

/** A conformance target of a RemoteStore over `remotes`, killed at teardown. */
export function remoteTarget(remotes: Remote[], clock: Clock): ConformanceTarget {
  const store = new RemoteStore(remotes, clock);
  // The primary serves every call: the store fails as one.
  return { store, failureScope: { kind: 'absent' }, scopes: (keys) => store.failureScopes(keys), teardown: () => killAll(remotes) };
}

/** Kills every remote, in parallel. */
export async function killAll(remotes: Remote[]): Promise<void> {
  await Promise.all(remotes.map((r) => r.kill()));
}
