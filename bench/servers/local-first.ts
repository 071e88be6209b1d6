/** Server process of the local-first benchmark: node:http, 20 random keys, a per-key limit that admits nearly everything, on memory, per-request Redis or local-first Redis, Redis local or behind a 20 ms proxy. */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import type { Store } from '../../dist/esm/index.js';
import { benchEnv, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { connected, ok, limited, oneOf } from '../lib/endpoint.js';

type StoreKind = 'none' | 'memory' | 'redis' | 'local-first';

/** See bench/scenarios/local-first.ts for why the limit admits nearly everything. */
const LIMIT = 100_000;
const WINDOW = '10s';
const KEYS = 20;
/** Added one-way latency of the "remote" variants, in ms. */
const DELAY_MS = 20;

const PROXY = fileURLToPath(new URL('../../test/support/delay-proxy.ts', import.meta.url));

/** Starts the delay proxy in a child process (so its work is not on this event loop) and resolves with its port. */
function startProxy(targetPort: number): Promise<{ port: number; child: ChildProcess }> {
  const child = fork(PROXY, [String(targetPort), String(DELAY_MS)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const match = /port (\d+)/.exec(out);
      if (match) resolve({ port: Number(match[1]), child });
    });
    child.once('exit', (code) => reject(new Error(`the delay proxy exited with ${code}`)));
  });
}

runServer(async () => {
  const env = benchEnv();
  const kind = oneOf<StoreKind>('LOCAL_FIRST_STORE', ['none', 'memory', 'redis', 'local-first']);
  const remote = process.env.LOCAL_FIRST_REMOTE === '1';
  const { RateLimiter, MemoryStore } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');

  let store: Store | undefined;
  let client: Redis | undefined;
  let proxy: ChildProcess | undefined;
  if (kind === 'memory') store = new MemoryStore();
  if (kind === 'redis' || kind === 'local-first') {
    let url = requireRedisUrl(env);
    if (remote) {
      const started = await startProxy(Number(new URL(url).port));
      proxy = started.child;
      url = `redis://127.0.0.1:${started.port}`;
    }
    client = new Redis(url);
    await connected(client);
    const redis = await importDist<typeof import('../../dist/esm/stores/redis/index.js')>('esm/stores/redis/index.js', 'the Redis stores');
    if (kind === 'redis') {
      store = new redis.RedisStore({ client });
    } else {
      const localFirst = new redis.LocalFirstStore({ client });
      // Serve only once pub/sub is confirmed, so the warm-up measures leases, not the cautious start.
      while (!localFirst.stats().live) await new Promise((r) => setTimeout(r, 10));
      store = localFirst;
    }
  }
  const limiter = store ? new RateLimiter({ limit: LIMIT, window: WINDOW, store }) : undefined;

  let failures = 0;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    if (limiter === undefined) {
      ok(res);
      return;
    }
    const key = String(Math.floor(Math.random() * KEYS));
    // As the HTTP middleware does: decided without a promise when the store can (the memory store,
    // local-first with a lease in hand or a refusal it already knows), else through consume.
    const now = limiter.consumeNow(key);
    if (now !== undefined) {
      if (now.allowed) ok(res);
      else limited(res);
      return;
    }
    limiter.consume(key).then(
      (decision) => (decision.allowed ? ok(res) : limited(res)),
      (error: unknown) => {
        if (failures++ < 3) console.error('consume failed:', error);
        res.writeHead(500).end();
      },
    );
  });
  serve(server, env.port, async () => {
    await store?.close?.();
    client?.disconnect();
    proxy?.kill('SIGTERM');
  });
});
