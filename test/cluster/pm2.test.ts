// PM2 in cluster mode: a real PM2 (isolated PM2_HOME) runs the app with 2 instances and the floodgate primary as a fork-mode app; the limit is shared.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PM2 = join(root, 'node_modules/pm2/bin/pm2');
const PM2_RUNTIME = join(root, 'node_modules/pm2/bin/pm2-runtime');
const ENTRY = fileURLToPath(new URL('./fixtures/pm2-entry.mjs', import.meta.url));
const LIMIT = 10;

function pm2(home: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [PM2, ...args],
      { cwd: root, env: { ...process.env, PM2_HOME: home }, timeout: 60_000 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`pm2 ${args.join(' ')} failed: ${error.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
    );
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

interface Answer {
  allowed?: boolean;
  remaining?: number;
  source?: string;
  error?: string;
  pid: number;
}

/** One GET on a fresh connection, so PM2's cluster spreads requests over the instances. */
function fetchJson(port: number, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = get({ host: '127.0.0.1', port, path, agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        try {
          resolve(JSON.parse(body) as Answer);
        } catch (error) {
          reject(error);
        }
      });
    });
    request.on('error', reject);
    request.setTimeout(30_000, () => request.destroy(new Error('request timed out')));
  });
}

test(
  'PM2 cluster mode (-i 2): the limit is shared by both instances; requests made before the primary starts wait for it',
  { timeout: 120_000 },
  async () => {
    const home = mkdtempSync(join(tmpdir(), 'fg-pm2-'));
    const port = await freePort();
    const ecosystem = join(home, 'ecosystem.json');
    const common = { script: ENTRY, cwd: root, autorestart: false, merge_logs: true };
    writeFileSync(
      ecosystem,
      JSON.stringify({
        apps: [
          {
            ...common,
            name: 'fg-app',
            exec_mode: 'cluster',
            instances: 2,
            env: { FG_ENTRY: 'pm2-app.ts', PORT: String(port), FG_LIMIT: String(LIMIT) },
          },
          { ...common, name: 'fg-primary', exec_mode: 'fork', instances: 1, env: { FG_ENTRY: 'pm2-primary.ts' } },
        ],
      }),
    );
    // The PM2 daemon ("God") runs in the foreground as pm2-runtime, so it is
    // this test's child and is reaped when it exits; the pm2 CLI talks to it
    // through PM2_HOME like to any daemon. The app first, alone: its instances
    // start with no primary anywhere.
    const runtime = spawn(process.execPath, [PM2_RUNTIME, ecosystem, '--only', 'fg-app', '--no-auto-exit'], {
      cwd: root,
      env: { ...process.env, PM2_HOME: home },
      stdio: 'ignore',
    });
    const runtimeExited = new Promise<void>((resolve) => runtime.once('exit', () => resolve()));
    try {
      const deadline = Date.now() + 60_000;
      for (;;) {
        try {
          await fetchJson(port, '/health');
          break;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await delay(200);
        }
      }
      const early = fetchJson(port, '/?key=shared');
      await delay(500);
      await pm2(home, 'start', ecosystem, '--only', 'fg-primary');
      const first = await early;
      assert.equal(first.source, 'store', JSON.stringify(first));
      assert.equal(first.allowed, true);

      const answers: Answer[] = [first];
      for (let i = 0; i < 3 * LIMIT; i++) answers.push(await fetchJson(port, '/?key=shared'));
      assert.deepEqual(
        answers.filter((a) => a.error),
        [],
        'no request failed',
      );
      assert.equal(answers.filter((a) => a.allowed).length, LIMIT, 'exactly the limit is admitted across both instances');
      // Both PM2 cluster-mode instances answered.
      const list = JSON.parse(await pm2(home, 'jlist')) as { name: string; pid: number; pm2_env: { exec_mode: string } }[];
      const instances = list.filter((p) => p.name === 'fg-app');
      assert.deepEqual(
        instances.map((p) => p.pm2_env.exec_mode),
        ['cluster_mode', 'cluster_mode'],
      );
      assert.deepEqual([...new Set(answers.map((a) => a.pid))].sort(), instances.map((p) => p.pid).sort());
      assert.ok(answers.every((a) => a.source === 'store'));
      // The remaining counts form one sequence: one counter, not one per instance.
      assert.deepEqual(
        answers.filter((a) => a.allowed).map((a) => a.remaining),
        Array.from({ length: LIMIT }, (_, i) => LIMIT - 1 - i),
      );
    } finally {
      await pm2(home, 'kill').catch((error: Error) => console.error(error.message));
      const killer = setTimeout(() => runtime.kill('SIGKILL'), 10_000);
      await runtimeExited;
      clearTimeout(killer);
      rmSync(home, { recursive: true, force: true });
    }
  },
);
