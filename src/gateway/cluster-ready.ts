/** Under `--workers`: the primary's /readyz asks every worker whether it is ready (its store connected and not failing), since only the workers hold stores. */
import type { Worker } from 'node:cluster';
import { answerCalls, IpcCaller, primaryPort, workerPort } from './ipc.js';

/** Marks these calls apart from the other messages on the channel. */
const TAG = 'floodgate.gateway.ready';
/**
 * A worker that takes longer than this to say whether it is ready is not.
 * Below the usual probe timeout (1 s), so a probe gets the 503 and its reason
 * rather than timing out itself.
 */
const ANSWER_TIMEOUT_MS = 800;

/** In a worker: answers the primary's readiness calls with `notReady()` (null when ready). */
export function answerReadiness(notReady: () => string | undefined): void {
  answerCalls(TAG, primaryPort(), () => notReady() ?? null);
}

/**
 * In the primary: the workers it expects to be serving, and why the whole
 * gateway is not ready when one of them is not.
 */
export class WorkerReadiness {
  /** Listening workers, by id, with the caller that asks each. */
  private readonly listening = new Map<number, IpcCaller>();

  /** @param expected - how many workers should be listening (`--workers`) */
  constructor(private readonly expected: number) {}

  /** Counts `worker` from its first 'listening' event on (a worker with two listeners sends two). */
  listeningOn(worker: Worker): void {
    if (this.listening.has(worker.id)) return;
    this.listening.set(worker.id, new IpcCaller(TAG, workerPort(worker), ANSWER_TIMEOUT_MS, `worker ${worker.id}`));
  }

  /** Stops counting `worker` (it exited; a replacement counts once it listens). */
  exited(worker: Worker): void {
    this.listening.get(worker.id)?.close('exited');
    this.listening.delete(worker.id);
  }

  /**
   * Why the gateway is not ready: fewer workers listening than expected, or
   * the first worker (by id) that is not ready or does not answer in time.
   * Undefined when every worker is ready.
   */
  async notReady(): Promise<string | undefined> {
    if (this.listening.size < this.expected) return `${this.listening.size} of ${this.expected} workers listening`;
    const ids = [...this.listening.keys()].sort((a, b) => a - b);
    const answers = await Promise.all(
      ids.map((id) =>
        this.listening.get(id)!.call().then(
          (reason) => (typeof reason === 'string' ? `worker ${id}: ${reason}` : undefined),
          (error: unknown) => (error as Error).message,
        ),
      ),
    );
    return answers.find((reason) => reason !== undefined);
  }
}
