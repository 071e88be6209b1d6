/** Scenario cluster-store: node:cluster, one key, 1000 points/s — floodgate's cluster store vs rate-limiter-flexible's RateLimiterCluster; run directly, this file is also the scenario's server. */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

// The server lives in this file (its second half) rather than in
// bench/servers/, to keep the scenario in one file; the harness only imports the
// scenario, and the server code runs only when the file is the entry point.
const self = fileURLToPath(import.meta.url);

/** The policy: 1000 points per 1 s window, per client address. */
const POINTS = 1000;
const DURATION_S = 1;

type Mode = 'bare' | 'floodgate' | 'floodgate-block' | 'floodgate-now' | 'floodgate-lease' | 'rlf';

function variant(name: string, description: string, mode: Mode): Variant {
  return { name, description, server: self, env: { CLUSTER_STORE_MODE: mode } };
}

/**
 * The peer is rate-limiter-flexible's RateLimiterCluster (the master holds
 * the counters, workers ask it over IPC). A node:http cluster with one worker
 * per core, the same key for every request (the key is the client's
 * `remoteAddress`, and wrk connects from one address), 1000 points per second.
 */
export default defineScenario({
  name: 'cluster-store',
  description:
    'node:http cluster (workers = cores), one key, 1000 points per 1 s: floodgate ClusterStore vs rate-limiter-flexible RateLimiterCluster',
  variants: [
    variant('bare', 'node:cluster, no limiter, always 200', 'bare'),
    variant(
      'floodgate-cluster',
      "RateLimiter on ClusterStore (ClusterStorePrimary in the primary), as users get it: the store's known refusals skip IPC for a refused key",
      'floodgate',
    ),
    variant('floodgate-cluster-block', "the same with the limiter's inMemoryBlock on top", 'floodgate-block'),
    variant(
      'floodgate-cluster-sync',
      'floodgate-cluster deciding with limiter.consumeNow() first: a known refusal answers without a promise',
      'floodgate-now',
    ),
    variant(
      'floodgate-cluster-lease',
      'floodgate-cluster-sync with leases (ClusterStore leaseMs: 100): admitted consumes spend quota the primary granted, without IPC',
      'floodgate-lease',
    ),
    variant('rlf-cluster', 'rate-limiter-flexible RateLimiterCluster (RateLimiterClusterMaster in the primary)', 'rlf'),
  ],
  // Latency at a fixed rate as well: 2000 requests/s, open loop (bench/lib/rate.ts).
  fixedRate: 2000,
});

// ---------------------------------------------------------------------------
// The server: a node:cluster primary that holds the counters and forks one
// worker per core; the workers listen on the harness's port.

if (process.argv[1] !== undefined && resolve(process.argv[1]) === self) {
  const { runServer } = await import('../lib/serve.js');
  runServer(async () => {
    const cluster = (await import('node:cluster')).default;
    if (cluster.isPrimary) await primary(cluster);
    else await worker();
  });
}

function mode(): Mode {
  const value = process.env.CLUSTER_STORE_MODE ?? 'bare';
  if (
    value !== 'bare' &&
    value !== 'floodgate' &&
    value !== 'floodgate-block' &&
    value !== 'floodgate-now' &&
    value !== 'floodgate-lease' &&
    value !== 'rlf'
  ) {
    throw new Error(
      `CLUSTER_STORE_MODE must be bare, floodgate, floodgate-block, floodgate-now, floodgate-lease or rlf; got ${JSON.stringify(value)}.`,
    );
  }
  return value;
}

async function primary(cluster: typeof import('node:cluster').default): Promise<void> {
  const { cpus } = await import('node:os');
  const { benchEnv, importDist } = await import('../lib/serve.js');
  benchEnv(); // fail early, here, when started without the harness
  const m = mode();
  // The counters' owner, created in the primary as each library documents.
  let close = async (): Promise<void> => {};
  if (m.startsWith('floodgate')) {
    const { ClusterStorePrimary } = await importDist<typeof import('../../dist/esm/stores/cluster/index.js')>(
      'esm/stores/cluster/index.js',
      'the cluster store (src/stores/cluster)',
    );
    const p = new ClusterStorePrimary();
    close = () => p.close();
    // For a look at the primary's traffic while developing: CLUSTER_STORE_STATS=1 prints its stats every second.
    if (process.env.CLUSTER_STORE_STATS) setInterval(() => process.stderr.write(`${JSON.stringify(p.stats())}\n`), 1000).unref();
  } else if (m === 'rlf') {
    const { RateLimiterClusterMaster } = await import('rate-limiter-flexible');
    new RateLimiterClusterMaster();
  }

  // One worker per core of the machine. Not availableParallelism(): the
  // harness pins this process to one CPU, which that would report, and the
  // point is workers and primary competing for cores. CLUSTER_STORE_WORKERS
  // overrides it.
  const count = Number(process.env.CLUSTER_STORE_WORKERS) || cpus().length || 1;
  let listening = 0;
  let stopping = false;
  cluster.on('listening', () => {
    // The harness waits for this one line, once every worker accepts connections.
    if (++listening === count) process.stdout.write('ready\n');
  });
  cluster.on('exit', (w, code, signal) => {
    if (!stopping) {
      process.stderr.write(`worker ${w.process.pid} died (${signal ?? code}) during the run\n`);
      process.exit(1);
    }
  });
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    void close().finally(() => setTimeout(() => process.exit(0), 200));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Workers run this same file (cluster.fork re-runs process.argv[1] with process.execArgv, i.e. through tsx).
  for (let i = 0; i < count; i++) cluster.fork();
}

/** The benchmark servers' answers: 200 `{}` when admitted, 429 `Too Many Requests` when limited. */
function respond(res: import('node:http').ServerResponse, allowed: boolean): void {
  if (allowed) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  else res.writeHead(429, { 'content-type': 'text/plain' }).end('Too Many Requests');
}

async function worker(): Promise<void> {
  const { createServer } = await import('node:http');
  const { benchEnv, importDist } = await import('../lib/serve.js');
  const env = benchEnv();
  const m = mode();
  // Calls `done` with the decision, or `fail` when the limiter fails: one
  // promise per request, the limiter's own, so the server adds no hop of its own.
  let decide: ((key: string, done: (allowed: boolean) => void, fail: (error: unknown) => void) => void) | undefined;
  // Decides synchronously when it can (undefined: ask `decide`), as floodgate's HTTP middleware does.
  let decideNow: ((key: string) => boolean | undefined) | undefined;

  if (m.startsWith('floodgate')) {
    const { RateLimiter } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
    const { ClusterStore } = await importDist<typeof import('../../dist/esm/stores/cluster/index.js')>(
      'esm/stores/cluster/index.js',
      'the cluster store (src/stores/cluster)',
    );
    // The same 3 s timeout as rate-limiter-flexible's below (its default is 5 s).
    const limiter = new RateLimiter({
      limit: POINTS,
      window: `${DURATION_S}s`,
      store: new ClusterStore({ timeoutMs: 3000, ...(m === 'floodgate-lease' ? { leaseMs: 100 } : {}) }),
      inMemoryBlock: m === 'floodgate-block',
    });
    decide = (key, done, fail) => void limiter.consume(key).then((d) => done(d.allowed), fail);
    if (m === 'floodgate-now' || m === 'floodgate-lease') decideNow = (key) => limiter.consumeNow(key)?.allowed;
  } else if (m === 'rlf') {
    const { RateLimiterCluster, RateLimiterRes } = await import('rate-limiter-flexible');
    const limiter = new RateLimiterCluster({ keyPrefix: 'cluster', points: POINTS, duration: DURATION_S, timeoutMs: 3000 });
    // rate-limiter-flexible rejects with a RateLimiterRes when limited, with an Error on failure.
    decide = (key, done, fail) =>
      void limiter.consume(key).then(
        () => done(true),
        (reason: unknown) => (reason instanceof RateLimiterRes ? done(false) : fail(reason)),
      );
  }

  let failures = 0;
  const server = createServer((req, res) => {
    if (decide === undefined) {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    const key = req.socket.remoteAddress ?? 'unknown';
    const now = decideNow?.(key);
    if (now !== undefined) return respond(res, now);
    // Inline callbacks, not named consts: tsx (esbuild keepNames) wraps every named function expression
    // in a __name() call, which here would run per request in the limited variants only.
    decide(
      key,
      (allowed) => respond(res, allowed),
      (error) => {
        if (failures++ < 3) console.error('consume failed:', error);
        res.writeHead(500).end();
      },
    );
  });
  server.listen(env.port, '127.0.0.1');
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
