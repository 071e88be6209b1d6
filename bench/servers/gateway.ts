/** Server process of the gateway benchmark: an upstream child process and, in front of it, the floodgate gateway (bare, memory, Redis, Redis local-first, high limit) or a MULTI/INCR proxy (the reference) built on the same UpstreamProxy. */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { benchEnv, importDist, requireRedisUrl, runServer, serve } from '../lib/serve.js';
import { connected, limited, oneOf } from '../lib/endpoint.js';
import { gatewayReady, startUpstream } from '../lib/upstream.js';

type Gw = typeof import('../../dist/esm/gateway/index.js');
const MODES = [
  'bare',
  'memory',
  'redis',
  'redis-cluster',
  'redis-cluster-high',
  'local-first',
  'multi-incr',
  'memory-high',
  'redis-high',
  'memory-workers',
] as const;
type Mode = (typeof MODES)[number];

/** The policy: 3 requests per 5 s window per API key. */
const LIMIT = 3;
const WINDOW_S = 5;
const HIGH_LIMIT = 1_000_000_000;

runServer(async () => {
  const env = benchEnv();
  const mode = oneOf<Mode>('GATEWAY_MODE', MODES);
  const upstreamUrl = await startUpstream();
  const gw = await importDist<Gw>('esm/gateway/index.js', 'the gateway (src/gateway)');
  const deps = await gw.loadGatewayDeps();
  const log = gw.createLogger(deps.pino, 'silent');

  if (mode === 'multi-incr') {
    await multiIncrProxy(gw, deps, log, upstreamUrl, requireRedisUrl(env), env.port);
    return;
  }

  if (mode === 'memory-workers') {
    await serveWorkers(upstreamUrl, env.port);
    return;
  }

  const limit = mode.endsWith('-high') ? HIGH_LIMIT : LIMIT;
  const redis = mode === 'redis' || mode === 'local-first' || mode === 'redis-high';
  const yaml = [
    `upstream: ${upstreamUrl}`,
    `listen: 127.0.0.1:${env.port}`,
    'drainTimeout: 1s',
    redis ? `store: { type: redis, url: "${requireRedisUrl(env)}"${mode === 'local-first' ? ', localFirst: true' : ''} }` : '',
    mode.startsWith('redis-cluster') ? `store: { cluster: { nodes: [${requireClusterNodes(env)}] } }` : '',
    mode === 'bare' ? 'rules: []' : apiRule(limit),
  ].join('\n');
  const settings = await gw.parseConfigText(yaml, 'gateway.yaml', { watch: false });
  const gateway = await gw.Gateway.start(settings, deps, log);
  // Let the Redis client connect, so the warm-up measures the limiter, not the connect.
  for (let i = 0; i < 100 && gateway.notReady() !== undefined; i += 1) await new Promise((r) => setTimeout(r, 20));
  gatewayReady(gateway);
});

/** The run's Redis Cluster nodes, or a message that says why they are missing. */
function requireClusterNodes(env: ReturnType<typeof benchEnv>): string {
  if (!env.redisCluster) throw new Error(`variant ${env.variant} needs a Redis Cluster; mark the variant with redisCluster: true.`);
  return env.redisCluster;
}

/**
 * The one rule of every limiting variant, as YAML: `limit` requests per 5 s
 * per X-API-KEY; with GATEWAY_OVERRIDES=N, N per-key overrides as well (see
 * bench/scenarios/overrides.ts).
 */
function apiRule(limit: number): string {
  const n = Number(process.env.GATEWAY_OVERRIDES ?? 0);
  const policy = `["${limit}/${WINDOW_S}s"]`;
  if (!(n > 0)) return `rules: [{ name: api, key: "header:x-api-key", policies: ${policy} }]`;
  return `rules: [{ name: api, key: "header:x-api-key", policies: ${policy}, overrides: { keys: {${overrideEntries(n, limit)}} } }]`;
}

/**
 * N override entries: the first ten of wrk's API keys get a limit one higher
 * (so half the requests are decided under an override, with the same work as
 * the others), ten `prefix*` patterns, and the rest keys nobody sends.
 */
function overrideEntries(n: number, limit: number): string {
  const entries: string[] = [];
  for (let i = 1; i <= 10; i++) entries.push(`"api-key-${i}": "${limit + 1}/${WINDOW_S}s"`);
  for (let i = 0; i < 10; i++) entries.push(`"group-${i}-*": "${limit * 2}/${WINDOW_S}s"`);
  for (let i = entries.length; i < n; i++) entries.push(`"tenant-${i}": "${limit * 3}/${WINDOW_S}s"`);
  return entries.join(', ');
}

/**
 * `floodgate serve --workers 2` on the memory rule (the cluster store in the
 * primary) as a child process, for its CPU per request beside the
 * single-process gateway's; ready once a decision comes back.
 */
async function serveWorkers(upstreamUrl: string, port: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-'));
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, [`upstream: ${upstreamUrl}`, apiRule(LIMIT)].join('\n'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const cli = fileURLToPath(new URL('./gateway-cli.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    [
      ...process.execArgv,
      cli,
      'serve',
      '--config',
      config,
      '--no-watch',
      '--workers',
      '2',
      '--listen',
      `127.0.0.1:${port}`,
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  process.on('exit', () => child.kill('SIGKILL'));
  child.once('exit', (code) => {
    console.error(`floodgate serve --workers 2 exited (${code})`);
    process.exit(1);
  });
  for (let i = 0; ; i += 1) {
    const ok = await fetch(`http://127.0.0.1:${port}/`, { headers: { 'x-api-key': 'warm' } }).then(
      (r) => r.status === 200 || r.status === 429,
      () => false,
    );
    if (ok) break;
    if (i === 200) throw new Error('floodgate serve --workers 2 did not answer within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  process.stdout.write('ready\n');
  const stop = (): void => {
    child.removeAllListeners('exit');
    child.once('exit', () => process.exit(0));
    child.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

/**
 * The reference limiter, the MULTI+INCR proxy of the project's founding
 * gateway benchmark (write-up 004): per request, one
 * `MULTI; SET key 0 NX EX 5; INCR key; EXEC` round trip, forward when the count is at most 3, else 429 — with the
 * same UpstreamProxy the gateway uses, so only the limiting differs.
 */
async function multiIncrProxy(
  gw: Gw,
  deps: Awaited<ReturnType<Gw['loadGatewayDeps']>>,
  log: ReturnType<Gw['createLogger']>,
  upstreamUrl: string,
  redisUrl: string,
  port: number,
): Promise<void> {
  const client = new Redis(redisUrl);
  await connected(client);
  const metrics = new gw.GatewayMetrics(deps.prom);
  const settings = (await gw.parseConfigText(`upstream: ${upstreamUrl}`, 'gateway.yaml')).proxy;
  const proxy = new gw.UpstreamProxy(deps.undici, new URL(upstreamUrl), settings, false, metrics, log);
  let failures = 0;
  const server = createServer((req, res) => {
    const key = String(req.headers['x-api-key'] ?? req.socket.remoteAddress);
    client
      .multi()
      .set(key, 0, 'EX', WINDOW_S, 'NX')
      .incr(key)
      .exec()
      .then(
        (replies) => {
          const count = Number(replies?.[1]?.[1]);
          if (count <= LIMIT) proxy.forward(req, res, []);
          else limited(res);
        },
        (error: unknown) => {
          if (failures++ < 3) console.error('MULTI failed:', error);
          res.writeHead(500).end();
        },
      );
  });
  serve(server, port, async () => {
    await proxy.close();
    client.disconnect();
  });
}
