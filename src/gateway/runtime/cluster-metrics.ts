/** Under `--workers`: a worker's /metrics asks the primary for every worker's metrics. */
/**
 * prom-client's AggregatorRegistry runs only in the primary.
 */
import { answerCalls, IpcCaller, primaryPort, type IpcPort } from './ipc.js';

/** Marks these calls apart from prom-client's and the cluster store's messages on the same channel. */
const TAG = 'floodgate.gateway.metrics';
/** How long a worker waits for the primary's aggregate; prom-client's own wait for the workers is shorter (5 s). */
const ANSWER_TIMEOUT_MS = 10_000;

/**
 * In the primary, for each worker's `port`: answers its requests for the
 * aggregated metrics, so that `/_floodgate/metrics` on the proxy port (no
 * `--admin`) shows the whole gateway whichever worker the scrape reaches.
 * `aggregate` is shared by every worker and the admin listener, so a scrape
 * flood costs one fan-out to the workers at a time (see SharedResult).
 */
export function answerMetricsRequests(port: IpcPort, aggregate: () => Promise<string>): void {
  answerCalls(TAG, port, aggregate);
}

let caller: IpcCaller | undefined;

/**
 * In a worker: the metrics of every worker, from the primary.
 * @throws Error when the IPC channel is closed or the primary does not answer in time
 */
export async function askPrimaryForMetrics(): Promise<string> {
  caller ??= new IpcCaller(TAG, primaryPort(), ANSWER_TIMEOUT_MS, 'the primary');
  let body: unknown;
  try {
    body = await caller.call();
  } catch (error) {
    throw new Error(`could not get the workers' metrics: ${(error as Error).message}`, { cause: error });
  }
  if (typeof body !== 'string') throw new Error(`could not get the workers' metrics: the primary sent ${typeof body}`);
  return body;
}
