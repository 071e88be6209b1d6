/** `--workers N`: the primary process that forks N gateway workers and serves them. */
/**
 * The primary process forks N gateway workers, holds the cluster store's counters when there is no Redis, serves
 * aggregated metrics (one aggregation at a time, reused for a second), every worker's readiness and, with a token, the
 * admin API and dashboard (asking every worker: admin-fanout.ts) on --admin, and passes SIGHUP/SIGTERM on.
 */
import * as clusterModule from 'node:cluster';
import type { Cluster, Worker } from 'node:cluster';
import type { Server } from 'node:http';
import { adminListener } from '../admin/admin.js';
import { AdminApi } from '../admin/admin-api.js';
import { Dashboard } from '../admin/dashboard.js';
import { AdminFanout } from './admin-fanout.js';
import { createAdminServer } from '../serve/listeners.js';
import { answerMetricsRequests } from '../runtime/cluster-metrics.js';
import { WorkerReadiness } from './cluster-ready.js';
import { workerPort } from '../runtime/ipc.js';
import type { GatewayDeps } from '../serve/gateway.js';
import { keepSnapshots, readSnapshotFile } from '../store/snapshot-file.js';
import { createLogger } from '../runtime/log.js';
import { SharedResult } from '../runtime/shared-result.js';
import { hopCountWarning } from '../config/trust-warning.js';
import { withWorkerSemiSpace } from './young-generation.js';
import type { GatewaySettings } from '../config/settings.js';

const cluster: Cluster = (clusterModule as unknown as { default?: Cluster }).default ?? (clusterModule as unknown as Cluster);

/** A worker that dies sooner than this after starting is not restarted again at once, so a crash loop does not spin. */
const RESTART_DELAY_MS = 1000;

/** How long a worker has to answer one admin call: a key action makes two store calls, each within the store's timeout. */
function adminCallTimeoutMs(settings: GatewaySettings): number {
  return 1_000 + 2 * settings.store.timeoutMs;
}

/**
 * Runs the primary of a `--workers` gateway until SIGTERM/SIGINT. Workers
 * are this same program (cluster.fork re-runs it with the same arguments)
 * and share the proxy port through node:cluster.
 */
export async function runPrimary(settings: GatewaySettings, deps: GatewayDeps): Promise<void> {
  const log = createLogger(deps.pino, settings.logLevel, { role: 'primary' });
  let primaryStore: { close(): Promise<void> } | undefined;
  if (settings.store.kind === 'memory') {
    const { ClusterStorePrimary } = await import('../../stores/cluster/index.js');
    const snapshot = settings.store.snapshot;
    // Before any worker starts: a snapshot that cannot be restored ends the start (unless snapshotOnError says otherwise).
    const restored = await readSnapshotFile(settings, log, 'one');
    // One table for every rule (its keys carry the rule's name), sized for all of them; a full table forgets
    // no live key (new keys are decided in the overflow sketch), since the keys come from clients.
    const primary = new ClusterStorePrimary({
      maxKeys: settings.store.maxKeys * Math.max(1, settings.rules.length),
      onFull: 'overflow',
      overflowCells: settings.store.overflowCells,
      ...(restored === undefined ? {} : { restore: restored.shared }),
    });
    primaryStore =
      snapshot === undefined
        ? primary
        : await keepSnapshots(
            { snapshot: () => ({ shared: primary.snapshot(), rules: {}, rls: {} }), close: () => primary.close() },
            snapshot,
            log,
          ).catch(async (error: unknown) => {
            await primary.close();
            throw error;
          });
  }
  let stopping = false;
  // One aggregate for the --admin listener and for the workers' own /_floodgate/metrics: every scrape
  // fans out to all workers, so one runs at a time and its result serves every scrape for a second.
  const aggregator = new deps.prom.AggregatorRegistry();
  const aggregate = new SharedResult(() => aggregator.clusterMetrics(), 1000);
  const renderAggregate = (): Promise<string> => aggregate.get();
  const readiness = new WorkerReadiness(settings.workers);
  // The admin API asks the workers, which hold the rules; a worker has its store's timeout for each call, and some.
  const fanout = settings.adminToken === undefined ? undefined : new AdminFanout(adminCallTimeoutMs(settings));
  // Workers start with a young generation sized for requests in flight (young-generation.ts), unless NODE_OPTIONS or
  // the primary's own flags chose one.
  cluster.setupPrimary({ execArgv: withWorkerSemiSpace(process.execArgv, process.env['NODE_OPTIONS']) });
  const fork = (): void => {
    const worker = cluster.fork({ FLOODGATE_GATEWAY_WORKER: '1' });
    answerMetricsRequests(workerPort(worker), renderAggregate);
    fanout?.forked(worker);
  };
  cluster.on('listening', (worker) => {
    readiness.listeningOn(worker);
    fanout?.listeningOn(worker);
  });
  cluster.on('exit', (worker, code, signal) => {
    readiness.exited(worker);
    fanout?.exited(worker, code, signal);
    if (stopping) return;
    log.error({ worker: worker.id, code, signal }, 'worker exited; starting another');
    setTimeout(() => {
      if (!stopping) fork();
    }, RESTART_DELAY_MS).unref();
  });
  for (let i = 0; i < settings.workers; i += 1) fork();

  let admin: Server | undefined;
  if (settings.admin !== undefined) {
    const source = {
      renderMetrics: async () => ({ contentType: aggregator.contentType, body: await renderAggregate() }),
      notReady: () => (stopping ? 'draining' : readiness.notReady()),
    };
    // The same handler and limits as a single process's admin listener; the admin API and the dashboard ask the workers.
    const api = fanout === undefined ? undefined : new AdminApi(settings.adminToken, fanout.answer);
    const dashboard = fanout === undefined ? undefined : new Dashboard(settings.adminToken!, fanout.stats);
    admin = createAdminServer(settings.proxy, adminListener(source, api, dashboard, settings.adminHosts));
    await new Promise<void>((resolve, reject) => {
      admin!.once('error', reject);
      admin!.listen(settings.admin!.port, settings.admin!.host, () => resolve());
    });
  }
  log.info(
    { workers: settings.workers, store: settings.store.kind === 'memory' ? 'cluster' : settings.store.kind, admin: settings.admin },
    'floodgate primary started',
  );
  const trustWarning = hopCountWarning(settings.trustProxy, settings.listen);
  if (trustWarning !== undefined) log.warn({ trustProxy: settings.trustProxy, listen: settings.listen }, trustWarning);

  process.on('SIGHUP', () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGHUP');
  });
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping workers');
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    let left = workers.length;
    const finish = (): void => {
      admin?.close();
      admin?.closeAllConnections();
      void Promise.resolve(primaryStore?.close()).finally(() => process.exit(0));
    };
    if (left === 0) finish();
    for (const worker of workers) {
      worker.once('exit', () => {
        left -= 1;
        if (left === 0) finish();
      });
      // Each worker drains on its own; a signal sent to the whole process group reaches them anyway, and a second one is ignored.
      worker.process.kill('SIGTERM');
    }
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
