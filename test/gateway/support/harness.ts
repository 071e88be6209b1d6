// Test helpers for the gateway: a real upstream, in-process gateways from YAML, the CLI as a child process, and a metrics parser.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before } from 'node:test';
import { parseConfigText, type SettingsOverrides } from '../../../src/gateway/config/config-file.js';
import { loadGatewayDeps } from '../../../src/gateway/runtime/optional-deps.js';
import { createLogger } from '../../../src/gateway/runtime/log.js';
import { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get } from '../../http/support/http.js';

/** A running upstream the tests control. */
export interface Upstream {
  url: string;
  port: number;
  server: Server;
  /** Requests seen, in order. */
  seen: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }>;
  close(): Promise<void>;
}

/**
 * Starts the test upstream: echoes method, URL, headers and body as JSON;
 * `/slow?ms=N` answers after N ms; `/stream` sends a chunked body in parts;
 * `/own-limits` answers with rate-limit fields and cookies of its own;
 * upgrades to `/ws` are accepted and echoed back raw.
 */
export async function startUpstream(): Promise<Upstream> {
  const seen: Upstream['seen'] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const url = new URL(req.url ?? '/', 'http://x');
      const reply = (): void => {
        if (url.pathname === '/stream') {
          res.writeHead(200, {
            'content-type': 'text/plain',
            connection: 'keep-alive, x-upstream-hop',
            'x-upstream-hop': 'secret',
            'keep-alive': 'timeout=5',
          });
          res.write('part1;');
          setTimeout(() => res.end('part2'), 30);
          return;
        }
        if (url.pathname === '/own-limits') {
          res.writeHead(
            200,
            [
              ['content-type', 'text/plain'],
              ['ratelimit-policy', '"app";q=50;w=60'],
              ['ratelimit', '"app";r=49;t=60'],
              ['x-ratelimit-limit', '50'],
              ['set-cookie', 'a=1'],
              ['set-cookie', 'b=2'],
            ].flat(),
          );
          res.end('own');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
      };
      const ms = Number(url.searchParams.get('ms') ?? 0);
      if (url.pathname === '/slow' && ms > 0) setTimeout(reply, ms);
      else reply();
    });
  });
  const upgraded = new Set<import('node:stream').Duplex>();
  server.on('upgrade', (req, socket) => {
    upgraded.add(socket);
    socket.on('close', () => upgraded.delete(socket));
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Upstream: yes\r\n\r\n');
    socket.on('data', (d: Buffer) => socket.write(Buffer.concat([Buffer.from('echo:'), d])));
    socket.on('error', () => socket.destroy());
    void req;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        for (const s of upgraded) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const dirs: string[] = [];
process.on('exit', () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Writes `text` to a fresh temp file and returns its path. */
export function writeTemp(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-gw-'));
  dirs.push(dir);
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/**
 * Starts an in-process gateway from YAML text (listening on a free port unless the YAML or overrides say otherwise).
 * With `logLines`, warnings and errors are parsed into it instead of being silenced.
 */
export async function startGateway(
  yaml: string,
  overrides: SettingsOverrides = {},
  logLines?: Array<Record<string, unknown>>,
): Promise<Gateway> {
  const deps = await loadGatewayDeps();
  const settings = await parseConfigText(yaml, 'test.yaml', { listen: { host: '127.0.0.1', port: 0 }, watch: false, ...overrides });
  const mod = deps.pino as unknown as { pino?: typeof import('pino').pino; default?: typeof import('pino').pino };
  const pino = mod.pino ?? mod.default ?? (deps.pino as unknown as typeof import('pino').pino);
  const log =
    logLines === undefined
      ? createLogger(deps.pino, 'silent')
      : pino({ level: 'warn' }, { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });
  return Gateway.start(settings, deps, log);
}

/** One test upstream for a file or suite, and the in-process gateways started against it. */
export interface GatewayFixture {
  /** The upstream (available from the `before` hook on). */
  readonly upstream: Upstream;
  /** {@link startGateway}, with the gateway shut down in the `after` hook. */
  start(yaml: string, overrides?: SettingsOverrides, logLines?: Array<Record<string, unknown>>): Promise<Gateway>;
  /**
   * Resolves once the upstream (and what else the fixture starts) runs. A file's own `before` hook that uses the fixture
   * awaits it first: Node starts a file's top-level `before` hooks at once, side by side, not one after the other.
   */
  ready(): Promise<void>;
}

/** Something else a fixture starts alongside its upstream (at the same time) and stops after it. */
export interface FixtureService {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Registers `before`/`after` hooks in the current suite (or file) that start the upstream (and `also`, at the same time)
 * and stop every gateway started, then the upstream, then `also`.
 */
export function gatewayFixture(also?: FixtureService): GatewayFixture {
  let upstream: Upstream | undefined;
  const gateways: Gateway[] = [];
  let starting: Promise<void> | undefined;
  const ready = (): Promise<void> =>
    (starting ??= Promise.all([startUpstream(), also?.start()]).then(([started]) => {
      upstream = started;
    }));
  before(() => ready());
  after(async () => {
    await Promise.all(gateways.map((g) => g.shutdown()));
    await upstream?.close();
    await also?.stop();
  });
  return {
    get upstream(): Upstream {
      if (upstream === undefined) throw new Error('the fixture upstream starts in a before hook; use it inside tests');
      return upstream;
    },
    async start(yaml, overrides, logLines) {
      const g = await startGateway(yaml, overrides, logLines);
      gateways.push(g);
      return g;
    },
    ready,
  };
}

/** A `floodgate` CLI child process with its log lines. */
export interface CliProcess {
  child: ChildProcess;
  /** Parsed JSON log lines from stdout so far. */
  logs: Array<Record<string, unknown>>;
  /** stderr so far. */
  stderr: () => string;
  /** stdout lines that were not JSON. */
  text: string[];
  /** Resolves with the first log line `match` accepts (including past ones). */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Resolves with the exit code (or signal name). */
  exited: Promise<number | string>;
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Runs `floodgate <args>` from src through tsx, under `node` (this process's binary unless given). */
export function runCli(args: readonly string[], env: NodeJS.ProcessEnv = {}, node: string = process.execPath): CliProcess {
  const child = spawn(node, ['--import', 'tsx', 'src/gateway/cli/run.ts', ...args], {
    cwd: new URL('../../..', import.meta.url).pathname,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const logs: Array<Record<string, unknown>> = [];
  const text: string[] = [];
  let stderr = '';
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      text.push(line);
    }
    for (const w of waiters) w();
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve(code ?? signal ?? -1);
      for (const w of waiters) w();
    }),
  );
  return {
    child,
    logs,
    text,
    stderr: () => stderr,
    exited,
    waitForLog(match, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const found = logs.find(match);
          if (found) {
            cleanup();
            resolve(found);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            cleanup();
            reject(
              new Error(
                `floodgate exited (${child.exitCode ?? child.signalCode}) before the expected log line; stderr: ${stderr}; logs: ${JSON.stringify(logs)}`,
              ),
            );
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no matching log line within ${timeoutMs} ms; stderr: ${stderr}; logs: ${JSON.stringify(logs)}`));
        }, timeoutMs);
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Starts `floodgate serve` and resolves with the process and its proxy URL once it listens. */
export async function serveCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  node: string = process.execPath,
): Promise<CliProcess & { url: string }> {
  const cli = runCli(['serve', '--listen', '127.0.0.1:0', ...args], env, node);
  try {
    // A loaded machine can take many seconds to start a gateway; the wait only bounds a start that never comes.
    const line = await cli.waitForLog((l) => l.msg === 'floodgate gateway listening', 60_000);
    return Object.assign(cli, { url: String(line.url) });
  } catch (error) {
    // A gateway left running would keep the test file from ending.
    cli.child.kill('SIGKILL');
    throw error;
  }
}

/** Stops a CLI process: SIGTERM, then SIGKILL after `graceMs`. */
export async function stopCli(cli: CliProcess, graceMs = 5000): Promise<number | string> {
  if (cli.child.exitCode !== null || cli.child.signalCode !== null) return cli.exited;
  cli.child.kill('SIGTERM');
  const timer = setTimeout(() => cli.child.kill('SIGKILL'), graceMs);
  const code = await cli.exited;
  clearTimeout(timer);
  return code;
}

/** Parses Prometheus text exposition into `name{labels}` → value. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)$/.exec(line);
    if (!match) throw new Error(`unparseable metrics line: ${line}`);
    out.set(match[1]!, Number(match[2]));
  }
  return out;
}

/** Sleeps. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls the readyz endpoint at `url` every `everyMs` until it answers 200, at most `tries` times: a gateway on Redis is ready once its client connects. */
export async function untilReady(url: string, tries = 50, everyMs = 20): Promise<void> {
  for (let i = 0; i < tries && (await get(url)).status !== 200; i += 1) await sleep(everyMs);
}

/** What a `/readyz` endpoint at `url` answered: its status, and the reason it gave when not ready. */
export async function readiness(url: string): Promise<{ status: number; reason: string | undefined }> {
  const r = await get(url);
  return { status: r.status, reason: r.status === 200 ? undefined : (JSON.parse(r.body) as { reason: string }).reason };
}
