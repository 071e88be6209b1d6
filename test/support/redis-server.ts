// Starts real redis-server processes (single nodes, a Redis Cluster, a Sentinel set-up) on free ports for tests, and stops them.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dirs, installExitHook, live } from './exit-cleanup.js';

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 10_000;
const INSTALL_HINT =
  'redis-server (Redis 7) was not found on PATH; the Redis tests start real servers. ' +
  'Install it, e.g. `apt-get install -y redis-server` on Debian/Ubuntu or `brew install redis` on macOS.';

/** A port that was free a moment ago (the kernel's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('could not find a free port'))));
    });
  });
}

/** A redis-server process the test controls. */
export interface RedisServer {
  host: string;
  port: number;
  /** `redis://host:port` */
  url: string;
  /** SIGKILL, wait for exit */
  kill(): Promise<void>;
  /** start again on the same port, wait until it answers PING */
  restart(): Promise<void>;
  /** SIGSTOP */
  pause(): void;
  /** SIGCONT */
  resume(): void;
  /** stop and remove temp dir; idempotent */
  stop(): Promise<void>;
}

/** A Redis Cluster, every node reporting cluster_state:ok. */
export interface RedisCluster {
  /** The masters (at start), then the replicas. */
  nodes: { host: string; port: number }[];
  /** Every node's process, in the order of `nodes`: kill one to fail it over. */
  servers: RedisServer[];
  stop(): Promise<void>;
}

/** A Sentinel set-up: one master, its replicas and the sentinels that watch it, all agreeing on the master. */
export interface RedisSentinel {
  /** The master's name the sentinels know. */
  name: string;
  /** The master at start. */
  master: RedisServer;
  /** Its replicas. */
  replicas: RedisServer[];
  /** The sentinels' addresses. */
  sentinels: { host: string; port: number }[];
  /** `NAME@HOST:PORT,HOST:PORT,…` as `--redis-sentinel` takes it. */
  spec: string;
  stop(): Promise<void>;
}

let installChecked = false;

function assertInstalled(): void {
  if (installChecked) return;
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) throw new Error(INSTALL_HINT);
  installChecked = true;
}

/** Sends one command in RESP and resolves with the raw reply text (enough for PING and CLUSTER INFO). */
function rawCommand(port: number, args: string[], timeoutMs = 1000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: HOST, port });
    let data = '';
    const done = (error: Error | undefined, reply?: string) => {
      socket.destroy();
      clearTimeout(timer);
      if (error) reject(error);
      else resolve(reply!);
    };
    const timer = setTimeout(() => done(new Error(`no reply from port ${port}`)), timeoutMs);
    socket.on('error', (error) => done(error));
    socket.on('connect', () => {
      socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
    });
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
      if (data.startsWith('$')) {
        const header = data.indexOf('\r\n');
        if (header < 0) return;
        const length = Number(data.slice(1, header));
        if (length < 0) return done(undefined, '');
        if (Buffer.byteLength(data) >= header + 2 + length + 2) done(undefined, data.slice(header + 2, header + 2 + length));
      } else if (data.includes('\r\n')) {
        done(undefined, data.slice(0, data.indexOf('\r\n')));
      }
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `check` resolves true, or throws with `what` after the timeout. */
async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = START_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * Starts redis-server on a free port (or `port`), without persistence, in a
 * temp dir of its own, and waits until it answers PING. `args` are extra
 * command-line options (`['--maxmemory', '10mb']`); with `cpus` it runs
 * under `taskset -c <cpus>`.
 */
export async function startRedis(options: { port?: number; args?: string[]; cpus?: string } = {}): Promise<RedisServer> {
  assertInstalled();
  installExitHook();
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), `floodgate-redis-${port}-`));
  dirs.add(dir);
  const serverArgs = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--protected-mode',
    'no',
    ...(options.args ?? []),
  ];
  let child: ChildProcess | undefined;
  let output = '';
  let stopped = false;

  const launch = async (): Promise<void> => {
    const [command, args] =
      options.cpus === undefined ? ['redis-server', serverArgs] : ['taskset', ['-c', options.cpus, 'redis-server', ...serverArgs]];
    const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    live.add(proc);
    output = '';
    // Keep the tail of the log for error messages; reading it also keeps the pipe from filling up.
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-4000);
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    let exited = false;
    proc.once('exit', () => {
      exited = true;
      live.delete(proc);
    });
    proc.once('error', () => {
      exited = true;
      live.delete(proc);
    });
    try {
      await waitFor(`redis-server on port ${port} to answer PING`, async () => {
        if (exited) throw new Error('exited');
        return (await rawCommand(port, ['PING'], 200)) === '+PONG';
      });
    } catch (error) {
      proc.kill('SIGKILL');
      throw new Error(`redis-server on port ${port} did not start${exited ? ' (it exited)' : ''}: ${(error as Error).message}\n${output}`, {
        cause: error,
      });
    }
  };

  const killChild = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await exited;
  };

  await launch();
  return {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    kill: killChild,
    async restart() {
      if (stopped) throw new Error(`redis-server on port ${port} was stopped; start a new one`);
      await killChild();
      await launch();
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await killChild();
      rmSync(dir, { recursive: true, force: true });
      dirs.delete(dir);
    },
  };
}

/**
 * Starts a Redis Cluster of `masters` nodes (default 3, the minimum
 * `redis-cli --cluster create` accepts) with `replicas` replicas per master
 * (default 0), and waits until every node reports cluster_state:ok and knows
 * every other node. `nodeTimeoutMs` is cluster-node-timeout (5 s), how long
 * a master may be away before its replica takes over. `fullCoverage: false`
 * sets cluster-require-full-coverage no: the other masters keep answering
 * while one's slots have no master. `cpus` pins every
 * node to those CPUs (taskset), as startRedis does (the benchmark's Redis core).
 */
export async function startRedisCluster(
  options: { masters?: number; replicas?: number; nodeTimeoutMs?: number; cpus?: string; fullCoverage?: boolean } = {},
): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  if (!Number.isInteger(masters) || masters < 3) {
    throw new Error(`a Redis Cluster needs at least 3 masters (redis-cli --cluster create refuses fewer); got ${masters}`);
  }
  if (!Number.isInteger(replicas) || replicas < 0) throw new Error(`replicas must be a whole number ≥ 0; got ${replicas}`);
  const total = masters * (1 + replicas);
  const servers: RedisServer[] = [];
  const stop = async () => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    for (let i = 0; i < total; i++) {
      const port = await freePort();
      servers.push(
        await startRedis({
          port,
          args: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${port}.conf`,
            '--cluster-node-timeout',
            String(options.nodeTimeoutMs ?? 5000),
            ...(options.fullCoverage === false ? ['--cluster-require-full-coverage', 'no'] : []),
          ],
          ...(options.cpus === undefined ? {} : { cpus: options.cpus }),
        }),
      );
    }
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...servers.map((s) => `${s.host}:${s.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.error || create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed: ${create.error?.message ?? ''}${create.stdout}${create.stderr}`);
    }
    for (const s of servers) {
      await waitFor(
        `cluster node ${s.port} to report cluster_state:ok`,
        async () => {
          const info = await rawCommand(s.port, ['CLUSTER', 'INFO']);
          return info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${total}`);
        },
        30_000,
      );
    }
    // A replica that has not finished its first sync cannot be promoted: a master killed before then would leave its slots down.
    for (const s of servers) {
      await waitFor(
        `cluster node ${s.port} to be a master or a replica in sync`,
        async () => {
          const info = await rawCommand(s.port, ['INFO', 'replication']);
          return info.includes('role:master') || info.includes('master_link_status:up');
        },
        30_000,
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  // redis-cli makes the first `masters` nodes masters and gives the rest to them as replicas.
  return { nodes: servers.map((s) => ({ host: s.host, port: s.port })), servers, stop };
}

/**
 * Starts a Sentinel set-up in temp dirs, on free ports: a master, `replicas`
 * replicas of it (default 1) and `sentinels` sentinels (default 3, quorum a
 * majority) run as `redis-server sentinel.conf --sentinel`; resolves once
 * every replica is linked and every sentinel names the master and knows the
 * others. `downAfterMs` is how long the master may be away before the
 * sentinels fail over (default 1 s).
 */
export async function startRedisSentinel(
  options: { replicas?: number; sentinels?: number; name?: string; downAfterMs?: number } = {},
): Promise<RedisSentinel> {
  const name = options.name ?? 'floodgate-master';
  const count = options.sentinels ?? 3;
  const quorum = Math.floor(count / 2) + 1;
  const started: Array<{ stop(): Promise<void> }> = [];
  const stop = async () => {
    await Promise.all(started.map((s) => s.stop()));
  };
  try {
    const master = await startRedis();
    started.push(master);
    const replicas: RedisServer[] = [];
    for (let i = 0; i < (options.replicas ?? 1); i++) {
      const replica = await startRedis({ args: ['--replicaof', HOST, String(master.port)] });
      started.push(replica);
      replicas.push(replica);
    }
    await waitFor(`${replicas.length} replica(s) linked to the master`, async () => {
      const info = await rawCommand(master.port, ['INFO', 'replication']);
      return (info.match(/^slave\d+:.*state=online/gm) ?? []).length === replicas.length;
    });
    const sentinels: { host: string; port: number }[] = [];
    for (let i = 0; i < count; i++) {
      const sentinel = await startSentinelProcess(name, master.port, quorum, options.downAfterMs ?? 1000);
      started.push(sentinel);
      sentinels.push({ host: HOST, port: sentinel.port });
    }
    for (const s of sentinels) {
      await waitFor(
        `sentinel ${s.port} to know the master, its replicas and the other sentinels`,
        async () => {
          const addr = await rawCommand(s.port, ['SENTINEL', 'get-master-addr-by-name', name]);
          if (!addr.startsWith('*2')) return false;
          const known = await rawCommand(s.port, ['SENTINEL', 'master', name]);
          return known.startsWith('*');
        },
        30_000,
      );
      await waitFor(
        `sentinel ${s.port} to see ${count - 1} other sentinel(s)`,
        async () => (await otherSentinels(s.port, name)) >= count - 1,
        30_000,
      );
    }
    const spec = `${name}@${sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
    return { name, master, replicas, sentinels, spec, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** How many other sentinels `port` knows for master `name` (SENTINEL SENTINELS answers an array of them). */
async function otherSentinels(port: number, name: string): Promise<number> {
  const reply = await rawCommand(port, ['SENTINEL', 'sentinels', name]);
  const count = /^\*(\d+)/.exec(reply);
  return count === null ? 0 : Number(count[1]);
}

/** One sentinel process watching the master on `masterPort`. */
async function startSentinelProcess(
  name: string,
  masterPort: number,
  quorum: number,
  downAfterMs: number,
): Promise<{ port: number; stop(): Promise<void> }> {
  assertInstalled();
  installExitHook();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `floodgate-sentinel-${port}-`));
  dirs.add(dir);
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      `bind ${HOST}`,
      'protected-mode no',
      `dir ${dir}`,
      `sentinel monitor ${name} ${HOST} ${masterPort} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${Math.max(downAfterMs * 3, 3000)}`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const proc = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let exited = false;
  proc.once('exit', () => {
    exited = true;
    live.delete(proc);
  });
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGKILL');
      await gone;
    }
    rmSync(dir, { recursive: true, force: true });
    dirs.delete(dir);
  };
  try {
    await waitFor(`sentinel on port ${port} to answer PING`, async () => {
      if (exited) throw new Error('exited');
      return (await rawCommand(port, ['PING'], 200)) === '+PONG';
    });
  } catch (error) {
    await stop();
    throw new Error(`sentinel on port ${port} did not start: ${(error as Error).message}\n${output}`, { cause: error });
  }
  return { port, stop };
}
