// Installs the packed floodgate as a user would: into apps that already hold an older major of an optional peer (each install succeeds without flags), and floodgate-gateway into an empty directory, where `npx floodgate serve --limit 3/5s` refuses the 4th request of a key.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { freePort } from '../support/redis-server.js';
import { cleanEnv, installMode, npm, packBoth, unreachable, type InstallMode, type Tarballs } from './npm.js';

/** Older majors of the optional peers that made `npm install floodgate` fail with ERESOLVE. */
const OLD_PEERS = ['redis@4', 'ioredis@4', 'prom-client@14', 'yaml@1', 'pino@8', 'fastify@3', 'undici@6'];
const QUIET = ['--no-audit', '--no-fund'];

let tarballs: Tarballs | undefined;
let mode: InstallMode = { flags: ['--prefer-offline'], describe: 'the npm registry' };

before(async () => {
  tarballs = await packBoth();
  mode = await installMode(tarballs.dir);
});

after(() => {
  if (tarballs !== undefined) rmSync(tarballs.dir, { recursive: true, force: true });
});

const packed = (): Tarballs => {
  assert.ok(tarballs, 'the tarballs were not packed');
  return tarballs;
};

/** Runs a short script with node in `cwd`, resolving to its exit code and output. */
function runNode(cwd: string, script: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['-e', script], { cwd, env: cleanEnv(), timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, output: stdout + stderr });
    });
  });
}

test('npm install floodgate in an app that holds an older optional peer: no ERESOLVE, no flags', { concurrency: true }, async (t) => {
  await Promise.all(
    OLD_PEERS.map((spec) =>
      t.test(spec, async (st) => {
        const { dir, floodgate } = packed();
        const name = spec.slice(0, spec.lastIndexOf('@'));
        const major = spec.slice(spec.lastIndexOf('@') + 1);
        const app = join(dir, `app-${name}-${major}`);
        mkdirSync(app);
        assert.ok((await npm(['init', '-y'], app)).ok, 'npm init -y failed');
        const old = await npm(['install', spec, ...mode.flags, ...QUIET], app);
        if (unreachable(old)) {
          st.skip(`npm could not fetch ${spec} from ${mode.describe}: ${old.stderr.trim().split('\n').at(-1) ?? ''}`);
          return;
        }
        assert.ok(old.ok, `npm install ${spec} failed:\n${old.stderr}`);

        const result = await npm(['install', floodgate, ...mode.flags, ...QUIET], app);
        assert.ok(result.ok, `npm install floodgate failed next to ${spec}:\n${result.stderr}`);
        assert.doesNotMatch(result.stderr, /ERESOLVE/, 'npm reported a peer conflict');

        // npm kept the app's own major, and floodgate runs beside it.
        const kept = JSON.parse(readFileSync(join(app, 'node_modules', name, 'package.json'), 'utf8')) as { version: string };
        assert.equal(kept.version.split('.')[0], major, `npm replaced the app's ${spec} with ${kept.version}`);
        const run = await runNode(
          app,
          "const { RateLimiter } = require('floodgate'); const l = new RateLimiter({ limit: 1, window: '1s' });" +
            "l.consume('k').then((a) => l.consume('k').then((b) => process.exit(a.allowed && !b.allowed ? 0 : 3)));",
        );
        assert.equal(run.code, 0, `floodgate did not run next to ${spec}:\n${run.output}`);
      }),
    ),
  );
});

/** Resolves once something accepts TCP connections on the port (no HTTP request, so no quota is spent). */
async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`floodgate serve exited with ${child.exitCode}:\n${log()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`floodgate serve did not listen on ${port} within 30 s:\n${log()}`);
}

test('npm install floodgate-gateway in an empty directory, then npx floodgate serve: the 4th request of a key gets 429', async (t) => {
  const { dir, floodgate, gateway } = packed();
  const app = join(dir, 'gateway-app');
  mkdirSync(app);
  // The documented step is `npm install floodgate-gateway`; floodgate is not on the registry, so npm gets both tarballs.
  const install = await npm(['install', gateway, floodgate, ...mode.flags, ...QUIET], app);
  if (unreachable(install)) {
    t.skip(`npm could not fetch the gateway's packages from ${mode.describe}: ${install.stderr.trim().split('\n').at(-1) ?? ''}`);
    return;
  }
  assert.ok(install.ok, `npm install floodgate-gateway failed:\n${install.stderr}`);
  const installed = JSON.parse(readFileSync(join(app, 'node_modules/floodgate/package.json'), 'utf8')) as { name: string; bin?: unknown };
  assert.deepEqual(installed.bin, { floodgate: 'bin/floodgate.mjs' }, 'node_modules/floodgate is not this project');
  for (const dep of ['undici', 'prom-client', 'yaml', 'pino', 'ioredis']) {
    assert.ok(existsSync(join(app, 'node_modules', dep, 'package.json')), `floodgate-gateway did not install ${dep}`);
  }

  const upstream: Server = createServer((_req, res) => res.end('upstream ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as { port: number }).port;
  const port = await freePort();
  let output = '';
  const child = spawn(
    'npx',
    ['floodgate', 'serve', '--upstream', `http://127.0.0.1:${upstreamPort}`, '--limit', '3/5s', '--listen', `127.0.0.1:${port}`],
    // Its own process group, so the kill reaches node behind npx.
    { cwd: app, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPort(port, child, () => output);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/hello`);
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429], `gateway output:\n${output}`);
  } finally {
    if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    await exited;
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  }
});
