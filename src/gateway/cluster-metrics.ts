/** Under `--workers`: a worker's /metrics asks the primary for every worker's metrics (prom-client's AggregatorRegistry runs only in the primary). */
import type { Cluster, Worker } from 'node:cluster';
import type { AggregatorRegistry, RegistryContentType } from 'prom-client';

/** Marks this module's messages, apart from prom-client's and the cluster store's on the same channel. */
const TAG = 'floodgate.gateway.metrics';
/** How long a worker waits for the primary's aggregate; prom-client's own wait for the workers is shorter (5 s). */
const ANSWER_TIMEOUT_MS = 10_000;

interface MetricsRequest {
  readonly [TAG]: 'request';
  readonly id: number;
}

interface MetricsAnswer {
  readonly [TAG]: 'answer';
  readonly id: number;
  readonly body?: string;
  readonly error?: string;
}

/**
 * In the primary: answers workers' requests for the aggregated metrics, so
 * that `/_floodgate/metrics` on the proxy port shows the whole gateway
 * whichever worker the scrape reaches (as the `--admin` listener does).
 */
export function answerMetricsRequests(cluster: Cluster, aggregator: AggregatorRegistry<RegistryContentType>): void {
  cluster.on('message', (worker: Worker, message: unknown) => {
    const request = message as Partial<MetricsRequest> | null;
    if (request === null || typeof request !== 'object' || request[TAG] !== 'request' || typeof request.id !== 'number') return;
    const id = request.id;
    const reply = (answer: Omit<MetricsAnswer, typeof TAG | 'id'>): void => {
      // A worker that exited meanwhile took its scrape with it; the callback keeps a failed send from
      // becoming an 'error' event on the worker.
      if (worker.isConnected()) worker.send({ [TAG]: 'answer', id, ...answer }, ignoreSendError);
    };
    aggregator.clusterMetrics().then(
      (body) => reply({ body }),
      (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
}

function ignoreSendError(): void {}

let nextId = 1;
const waiting = new Map<number, { resolve: (body: string) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
let listening = false;

/**
 * In a worker: the metrics of every worker, from the primary.
 * @throws Error when the IPC channel is closed or the primary does not answer in time
 */
export function askPrimaryForMetrics(): Promise<string> {
  if (!process.connected || typeof process.send !== 'function') return Promise.reject(new Error('the IPC channel to the primary is closed'));
  if (!listening) {
    listening = true;
    process.on('message', (message: unknown) => {
      const answer = message as Partial<MetricsAnswer> | null;
      if (answer === null || typeof answer !== 'object' || answer[TAG] !== 'answer' || typeof answer.id !== 'number') return;
      const call = waiting.get(answer.id);
      if (call === undefined) return;
      waiting.delete(answer.id);
      clearTimeout(call.timer);
      if (typeof answer.body === 'string') call.resolve(answer.body);
      else call.reject(new Error(`the primary could not aggregate the workers' metrics: ${answer.error ?? 'no answer'}`));
    });
  }
  const id = nextId;
  nextId = nextId >= 2 ** 31 ? 1 : nextId + 1;
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      reject(new Error(`the primary did not send the workers' metrics within ${ANSWER_TIMEOUT_MS / 1000} s`));
    }, ANSWER_TIMEOUT_MS);
    // Not holding the process open: a scrape in flight must not delay a shutdown.
    timer.unref();
    waiting.set(id, { resolve, reject, timer });
    process.send!({ [TAG]: 'request', id } satisfies MetricsRequest, undefined, undefined, (error: Error | null) => {
      if (error === null || !waiting.has(id)) return;
      waiting.delete(id);
      clearTimeout(timer);
      reject(error);
    });
  });
}
