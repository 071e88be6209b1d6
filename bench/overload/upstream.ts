/** The overload scenario's simulated upstream: c workers of `base` ms each, FIFO beyond them, work never cancelled. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mulberry32 } from '../../test/accuracy/traffic.js';
import { benchEnv, runServer, serve } from '../lib/serve.js';

/**
 * A thread pool in front of slow work, the shape of a model server or a
 * database-bound service: `OVERLOAD_WORKERS` requests (default 20) are worked
 * on at once, each for `OVERLOAD_BASE_MS` (default 50) ± `OVERLOAD_JITTER`
 * (default 0.1, seeded by `OVERLOAD_SEED`); the rest wait in arrival order.
 * A request whose client has gone is still worked on when its turn comes, as
 * a pool does not notice a closed socket: past capacity, the upstream spends
 * its time on answers nobody reads, which is what collapses goodput without a
 * limiter. Capacity = workers × 1000 / base requests per second.
 *
 * `POST /control?workers=N` changes the number of workers (work already
 * started finishes); `GET /control` answers the counters as JSON.
 */
runServer(async () => {
  const env = benchEnv();
  let workers = whole(process.env.OVERLOAD_WORKERS, 20);
  const baseMs = whole(process.env.OVERLOAD_BASE_MS, 50);
  const jitter = Math.min(0.9, Math.max(0, Number(process.env.OVERLOAD_JITTER ?? 0.1) || 0));
  const random = mulberry32(whole(process.env.OVERLOAD_SEED, 1));
  const waiting: ServerResponse[] = [];
  let head = 0;
  let busy = 0;
  const counters = { served: 0, abandoned: 0, maxQueued: 0 };

  const pump = (): void => {
    while (busy < workers && head < waiting.length) {
      const res = waiting[head]!;
      waiting[head++] = undefined as unknown as ServerResponse;
      // Compact now and then: the array would otherwise keep every slot of a long overload.
      if (head > 4096 && head * 2 > waiting.length) {
        waiting.splice(0, head);
        head = 0;
      }
      busy += 1;
      setTimeout(() => finish(res), baseMs * (1 + jitter * (2 * random() - 1)));
    }
  };
  const finish = (res: ServerResponse): void => {
    busy -= 1;
    if (res.destroyed) counters.abandoned += 1;
    else {
      counters.served += 1;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' }).end('{}');
    }
    pump();
  };

  const control = (req: IncomingMessage, res: ServerResponse, url: URL): void => {
    if (req.method === 'POST') {
      workers = whole(url.searchParams.get('workers') ?? undefined, workers);
      pump();
    }
    const body = JSON.stringify({ workers, busy, queued: waiting.length - head, ...counters });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (url.pathname === '/control') return control(req, res, url);
    req.resume();
    waiting.push(res);
    pump();
    counters.maxQueued = Math.max(counters.maxQueued, waiting.length - head);
  });
  // Clients (the gateway's pool) hold many keep-alive connections; let the run's own length decide, not a 5 s idle timer.
  server.keepAliveTimeout = 60_000;
  serve(server, env.port);
});

/** A whole number ≥ 1 from the environment, else `fallback`. */
function whole(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && Number.isSafeInteger(n) && n >= 1 ? n : fallback;
}
