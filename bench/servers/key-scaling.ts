/** Server process of the key-scaling benchmark: 1 000 or 1 000 000 live keys, half of them blocked, decided by the memory store with the in-memory block (node:http) or by the gateway. */
import { createServer } from 'node:http';
import type { RateLimiter } from '../../dist/esm/index.js';
import { benchEnv, importDist, runServer, serve } from '../lib/serve.js';
import { limited, ok, oneOf } from '../lib/endpoint.js';
import { gatewayReady, startUpstream } from '../lib/upstream.js';

type Gw = typeof import('../../dist/esm/gateway/index.js');
type Mode = 'memory' | 'gateway';

/** A limit no admitted key reaches during a run, in a window longer than any run: outcomes stay as pre-filled. */
const LIMIT = 1_000_000;
const WINDOW = '1h';

runServer(async () => {
  const env = benchEnv();
  const mode = oneOf<Mode>('KEY_SCALING_MODE', ['memory', 'gateway']);
  const keys = Number(oneOf('KEY_SCALING_KEYS', ['1000', '1000000']));
  // wrk sends both fields on every request (see bench/scenarios/key-scaling.ts); each variant reads the one of its key count.
  const header = keys === 1000 ? 'x-key-1k' : 'x-key-1m';

  if (mode === 'memory') {
    const { RateLimiter, MemoryStore } = await importDist<typeof import('../../dist/esm/index.js')>('esm/index.js', 'the floodgate core');
    const limiter = new RateLimiter({
      limit: LIMIT,
      window: WINDOW,
      store: new MemoryStore({ maxKeys: 2 * keys }),
      inMemoryBlock: { maxKeys: 2 * keys },
    });
    await prefill(limiter, keys);
    const server = createServer((req, res) => {
      const key = req.headers[header] as string;
      // As the HTTP middleware does: a synchronous answer when the block list or the memory store has one.
      const now = limiter.consumeNow(key);
      if (now !== undefined) {
        if (now.allowed) ok(res);
        else limited(res);
        return;
      }
      limiter.consume(key).then((d) => (d.allowed ? ok(res) : limited(res)));
    });
    await check(async (key) => {
      const d = await limiter.consume(key);
      return d.allowed;
    });
    serve(server, env.port);
    return;
  }

  const upstreamUrl = await startUpstream();
  const gw = await importDist<Gw>('esm/gateway/index.js', 'the gateway (src/gateway)');
  const deps = await gw.loadGatewayDeps();
  const yaml = [
    `upstream: ${upstreamUrl}`,
    `listen: 127.0.0.1:${env.port}`,
    'drainTimeout: 1s',
    `store: { type: memory, maxKeys: ${2 * keys} }`,
    `rules: [{ name: api, key: "header:${header}", policies: ["${LIMIT}/1h"] }]`,
  ].join('\n');
  const settings = await gw.parseConfigText(yaml, 'gateway.yaml', { watch: false });
  const gateway = await gw.Gateway.start(settings, deps, gw.createLogger(deps.pino, 'silent'));
  // The gateway has no block operation of its own yet: reach the rule's limiter, which counts in the rule's table.
  const internals = gateway as unknown as { rules: { rules: ReadonlyArray<{ limiters: readonly RateLimiter[] }> } };
  await prefill(internals.rules.rules[0]!.limiters[0]!, keys);
  await check(async (key) => {
    const res = await fetch(`http://127.0.0.1:${env.port}/`, { headers: { [header]: key } });
    await res.arrayBuffer();
    return res.status === 200;
  });
  gatewayReady(gateway);
});

/**
 * Makes every key live: `k<i>` for even i blocked for the hour, for odd i
 * consumed once. In batches, so a million promises are not all pending at once.
 */
async function prefill(limiter: RateLimiter, keys: number): Promise<void> {
  const batch = 10_000;
  for (let start = 0; start < keys; start += batch) {
    const calls: Array<Promise<unknown>> = [];
    for (let i = start; i < Math.min(keys, start + batch); i += 1) {
      calls.push(i % 2 === 0 ? limiter.block(`k${i}`, WINDOW) : limiter.consume(`k${i}`));
    }
    await Promise.all(calls);
  }
}

/** Fails the start when a blocked key is admitted or an admitted one refused: the run would measure something else. */
async function check(admitted: (key: string) => Promise<boolean>): Promise<void> {
  if (await admitted('k0')) throw new Error('key k0 was pre-filled as blocked but is admitted');
  if (!(await admitted('k1'))) throw new Error('key k1 was pre-filled as admitted but is refused');
}
