/** Under `--workers`: the primary's /readyz asks every worker whether it is ready. */
/**
 * Ready means its store connected and not failing; only the workers hold stores.
 */
import type { Worker } from 'node:cluster';
import { answerCalls, IpcCaller, primaryPort, workerPort } from '../runtime/ipc.js';
import { SharedResult } from '../runtime/shared-result.js';

/** Marks these calls apart from the other messages on the channel. */
const TAG = 'floodgate.gateway.ready';
/**
 * A worker that takes longer than this to say whether it is ready is not.
 * Below the usual probe timeout (1 s), so a probe gets the 503 and its reason
 * rather than timing out itself.
 */
const ANSWER_TIMEOUT_MS = 800;
/** How long one round of answers stands: a probe flood asks the workers at most once a second. */
const REUSE_MS = 1000;

/** In a worker: answers the primary's readiness calls with `notReady()` (null when ready). */
export function answerReadiness(notReady: () => string | undefined | Promise<string | undefined>): void {
  answerCalls(TAG, primaryPort(), async () => (await notReady()) ?? null);
}

/**
 * In the primary: the workers it expects to be serving, and why the whole
 * gateway is not ready when one of them is not.
 */
export class WorkerReadiness {
  /** Listening workers, by id, with the caller that asks each. */
  private readonly listening = new Map<number, IpcCaller>();
  /** One round of questions at a time, its answer reused briefly by every probe. */
  private readonly answers = new SharedResult(() => this.askWorkers(), REUSE_MS);

  /** @param expected - how many workers should be listening (`--workers`) */
  constructor(private readonly expected: number) {}

  /** Counts `worker` from its first 'listening' event on (a worker with two listeners sends two). */
  listeningOn(worker: Worker): void {
    if (this.listening.has(worker.id)) return;
    this.listening.set(worker.id, new IpcCaller(TAG, workerPort(worker), ANSWER_TIMEOUT_MS, `worker ${worker.id}`));
    this.answers.forget();
  }

  /** Stops counting `worker` (it exited; a replacement counts once it listens). */
  exited(worker: Worker): void {
    this.listening.get(worker.id)?.close('exited');
    this.listening.delete(worker.id);
    this.answers.forget();
  }

  /**
   * Why the gateway is not ready: fewer workers listening than expected, or
   * the first worker (by id) that is not ready or does not answer in time.
   * Undefined when every worker is ready. The workers' answers are shared
   * by concurrent probes and reused for a second.
   */
  async notReady(): Promise<string | undefined> {
    if (this.listening.size < this.expected) return `${this.listening.size} of ${this.expected} workers listening`;
    return this.answers.get();
  }

  private async askWorkers(): Promise<string | undefined> {
    const ids = [...this.listening.keys()].sort((a, b) => a - b);
    const answers = await Promise.all(
      ids.map((id) =>
        this.listening
          .get(id)!
          .call()
          .then(
            (reason) => (typeof reason === 'string' ? `worker ${id}: ${reason}` : undefined),
            (error: unknown) => (error as Error).message,
          ),
      ),
    );
    return answers.find((reason) => reason !== undefined);
  }
}
