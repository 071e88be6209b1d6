// Starts a real PostgreSQL (initdb into a temp dir, a free port) for tests, as an unprivileged user when run as root.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server.js';
import { dirs, installExitHook, live } from './exit-cleanup.js';

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 30_000;
/** The user a root test run starts PostgreSQL as: postgres refuses to run as root. */
const UNPRIVILEGED = { uid: 65534, gid: 65534 };
const INSTALL_HINT =
  'PostgreSQL (initdb, postgres) was found neither on PATH nor under /usr/lib/postgresql/*/bin; the PostgreSQL tests start ' +
  'a real server. Install it, e.g. `apt-get install -y postgresql` on Debian/Ubuntu or `brew install postgresql` on macOS.';

/** A PostgreSQL server the test controls. */
export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:port/postgres` (trust authentication: no password). */
  url: string;
  port: number;
  /** Stops the server (smart shutdown, SIGKILL after 5 s) and removes its directory; idempotent. */
  stop(): Promise<void>;
}

/** The directory holding initdb and postgres: PATH first, then Debian's versioned directories, newest first. */
function binDir(): string {
  const onPath = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' });
  const found = onPath.status === 0 ? onPath.stdout.trim() : '';
  if (found !== '') return join(found, '..');
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) {
    const dir = join(root, version, 'bin');
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  }
  throw new Error(INSTALL_HINT);
}

/** The command that runs `program args` as the unprivileged user when this process is root, else as it is. */
function asUser(program: string, args: string[]): [string, string[]] {
  if (process.getuid?.() !== 0) return [program, args];
  return ['setpriv', [`--reuid=${UNPRIVILEGED.uid}`, `--regid=${UNPRIVILEGED.gid}`, '--clear-groups', program, ...args]];
}

/** Whether the server accepts TCP connections (the postmaster listens once it is ready to start sessions). */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: HOST, port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs PostgreSQL for a test file: initdb into a temp dir (trust authentication, superuser `postgres`), then
 * `postgres` on a free port on 127.0.0.1 with its socket in that dir and durability off (fsync, synchronous_commit,
 * full_page_writes) for speed; resolves once it accepts sessions. As root, both run as `nobody`.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = binDir();
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-postgres-'));
  dirs.add(dir);
  if (process.getuid?.() === 0) chownSync(dir, UNPRIVILEGED.uid, UNPRIVILEGED.gid);
  const data = join(dir, 'data');
  const [initCommand, initArgs] = asUser(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
  const init = spawnSync(initCommand, initArgs, { encoding: 'utf8', cwd: dir, env: { ...process.env, LC_ALL: 'C' } });
  if (init.error || init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    dirs.delete(dir);
    throw new Error(`initdb failed: ${init.error?.message ?? init.stderr}`);
  }
  const port = await freePort();
  const [command, args] = asUser(join(bin, 'postgres'), [
    '-D',
    data,
    '-p',
    String(port),
    '-c',
    `listen_addresses=${HOST}`,
    '-c',
    `unix_socket_directories=${dir}`,
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
  ]);
  const child = spawn(command, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      live.delete(child);
      resolve();
    });
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (!exited) {
        // SIGTERM is the smart shutdown: the server waits for sessions to end instead of ending them. A pool's end()
        // resolves once its connections are told to close, before they are closed, and a session the server ended
        // first would report an error nobody listens to anymore. SIGKILL below if a test leaked a session.
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exit;
        clearTimeout(killer);
      }
      rmSync(dir, { recursive: true, force: true });
      dirs.delete(dir);
    })());

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`postgres exited at start:\n${output}`);
    }
    // The postmaster listens before it takes sessions (during start-up recovery): its log says when it does.
    if (output.includes('ready to accept connections') && (await accepts(port))) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`postgres did not accept connections within ${START_TIMEOUT_MS} ms:\n${output}`);
    }
    await sleep(25);
  }
  return { url: `postgres://postgres@${HOST}:${port}/postgres`, port, stop };
}
