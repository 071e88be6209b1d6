// A new user's first run, step by step: npm ci on Node 20, npm pack from a fresh clone, npm start with taken ports, and a SIGTERM to npx floodgate serve or npm start.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../support/redis-server.js';
import { cleanEnv, npm, root, unreachable } from './npm.js';

const work = mkdtempSync(join(tmpdir(), 'floodgate-first-run-'));
const servers: Array<{ close(cb: () => void): unknown }> = [];
const children = new Set<ChildProcess>();
after(async () => {
  for (const child of children) if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  rmSync(work, { recursive: true, force: true });
});

/** What a run printed and how it ended. */
interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A command started in its own process group (so a cleanup reaches what it started), its output collected as it comes. */
function start(command: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  const child = spawn(command, [...args], { cwd, env: { ...cleanEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.add(child);
  const run: Run = { code: null, stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (run.stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (run.stderr += d.toString('utf8')));
  const ended = new Promise<Run>((resolve) =>
    child.on('close', (code) => {
      run.code = code;
      children.delete(child);
      resolve(run);
    }),
  );
  /** Resolves once stdout or stderr matches `pattern`; rejects if the command ends first or after `ms`. */
  const output = async (pattern: RegExp, ms = 60_000): Promise<void> => {
    const deadline = Date.now() + ms;
    while (!pattern.test(run.stdout + run.stderr)) {
      if (run.code !== null || child.exitCode !== null)
        throw new Error(`ended (${child.exitCode}) before printing ${pattern}:\n${run.stdout}${run.stderr}`);
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${ms} ms:\n${run.stdout}${run.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, run, ended, output };
}

/** Resolves to whether something accepts TCP connections on 127.0.0.1:`port`. */
function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Whether process `pid` still exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `condition` every 100 ms until it holds; fails with `what` after `ms`. */
async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An HTTP server on a free port of 127.0.0.1 answering 200 to everything, /_floodgate/healthz included. */
async function answeringServer(): Promise<number> {
  const server: Server = createServer((_req, res) => res.end('ok'));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

/** A stack trace's frame line, which a user should not have to read to learn that a port is taken. */
const STACK_FRAME = /^\s+at .+\(.+:\d+:\d+\)$/m;

/** `>=`, `>`, `<`, `<=`, `^`, `~` or exact comparators, space-joined, alternatives joined by `||`: the forms engines.node ranges use. */
function satisfies(version: string, range: string): boolean {
  const parse = (v: string): number[] =>
    v
      .replace(/^v/, '')
      .split('.')
      .map((n) => (n === 'x' || n === '*' ? 0 : Number(n)));
  const compare = (a: number[], b: number[]): number => {
    for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  };
  const v = parse(version);
  return range.split('||').some((alternative) =>
    alternative
      .trim()
      .replace(/(>=|<=|>|<|\^|~|=)\s+/g, '$1')
      .split(/\s+/)
      .every((comparator) => {
        const m = /^(>=|<=|>|<|\^|~|=)?(\d+(?:\.(?:\d+|x|\*))*)$/.exec(comparator);
        if (comparator === '*' || comparator === '') return true;
        assert.ok(m, `cannot read the engines range ${JSON.stringify(range)}`);
        const b = parse(m[2]!);
        const c = compare(v, b);
        switch (m[1]) {
          case '>=':
            return c >= 0;
          case '>':
            return c > 0;
          case '<':
            return c < 0;
          case '<=':
            return c <= 0;
          case '^':
            return c >= 0 && v[0] === b[0];
          case '~':
            return c >= 0 && v[0] === b[0] && v[1] === b[1];
          default:
            return m[2]!.split('.').length < 3 ? v[0] === b[0] : c === 0;
        }
      }),
  );
}

describe('npm ci on Node 20 warned EBADENGINE (cookie@2, pulled in by fastify through light-my-request, needs Node >= 22)', () => {
  it('npm ci --dry-run with the repository manifest and lockfile prints no EBADENGINE on this Node', async () => {
    const dir = join(work, 'ci');
    mkdirSync(dir);
    cpSync(join(root, 'package.json'), join(dir, 'package.json'));
    cpSync(join(root, 'package-lock.json'), join(dir, 'package-lock.json'));
    // A dry run reads the lockfile and checks engines without fetching a package.
    const result = await npm(['ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund', '--offline'], dir);
    assert.ok(result.ok, `npm ci --dry-run failed:\n${result.stderr}`);
    assert.doesNotMatch(result.stderr, /EBADENGINE/, result.stderr);
  });

  it('every locked package accepts Node 20.19, whatever Node runs this test', () => {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refused = Object.entries(lock.packages)
      .map(([path, entry]) => [path, Array.isArray(entry.engines) ? undefined : entry.engines?.node] as const)
      .filter(([, range]) => range !== undefined && !satisfies('20.19.0', range))
      .map(([path, range]) => `${path}: node ${range}`);
    assert.deepEqual(refused, [], 'these locked packages refuse Node 20.19');
    assert.ok(satisfies('20.19.0', '^20.19.0 || ^22.13.0 || >=24') && !satisfies('20.19.0', '>=22'), 'the range check reads ranges');
  });
});

describe('from a fresh clone (no dist/): npm pack, npm start, npx floodgate serve', () => {
  const clone = join(work, 'clone');

  before(() => {
    mkdirSync(clone);
    for (const entry of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.cjs.json', 'README.md', 'LICENSE']) {
      cpSync(join(root, entry), join(clone, entry));
    }
    for (const dir of ['src', 'scripts', 'bin', 'examples', 'proto']) cpSync(join(root, dir), join(clone, dir), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(clone, 'node_modules'), 'dir');
    assert.ok(!existsSync(join(clone, 'dist')));
  });

  it('npm pack without a build: prepack builds, step by step, and the tarball holds dist/ for ESM and CommonJS', async () => {
    const out = join(work, 'packed');
    mkdirSync(out);
    const packed = await npm(['pack', '--pack-destination', out], clone, 300_000);
    assert.ok(packed.ok, `npm pack failed:\n${packed.stderr}`);
    assert.match(packed.stderr, /floodgate build: 3\/3 dist\/cjs/, 'the build shows its steps');
    const [tarball] = readdirSync(out).filter((f) => f.endsWith('.tgz'));
    assert.ok(tarball !== undefined, 'npm pack wrote no tarball');
    const list = start('tar', ['-tzf', join(out, tarball)], work);
    const listed = (await list.ended).stdout.split('\n');
    for (const file of [
      'package/dist/esm/index.js',
      'package/dist/cjs/index.js',
      'package/dist/esm/gateway/cli/cli.js',
      'package/bin/floodgate.mjs',
    ]) {
      assert.ok(listed.includes(file), `${file} is not in the tarball`);
    }
  });

  it('npm start with the demo upstream port taken: skips the current build, names the port and UPSTREAM_PORT, no stack', async () => {
    const taken = await answeringServer();
    const port = await freePort();
    const npmStart = start('npm', ['start'], clone, { PORT: String(port), UPSTREAM_PORT: String(taken) });
    const run = await npmStart.ended;
    const all = run.stdout + run.stderr;
    assert.notEqual(run.code, 0, all);
    assert.match(all, /dist\/ is current .*skipping the build/);
    assert.match(all, new RegExp(`port ${taken} \\(the demo upstream\\) is already in use`));
    assert.match(all, new RegExp(`UPSTREAM_PORT=${taken + 1} npm start`));
    assert.doesNotMatch(all, STACK_FRAME, 'a stack trace was printed');
    assert.doesNotMatch(all, /curl/, 'the curl banner was printed');
  });

  it('npm start with the gateway port held by a server that answers: names the port and PORT, and never prints the curl banner', async () => {
    const taken = await answeringServer();
    const upstreamPort = await freePort();
    const npmStart = start('npm', ['start'], clone, { PORT: String(taken), UPSTREAM_PORT: String(upstreamPort) });
    const run = await npmStart.ended;
    const all = run.stdout + run.stderr;
    assert.notEqual(run.code, 0, all);
    assert.match(all, new RegExp(`port ${taken} \\(the gateway\\) is already in use`));
    assert.match(all, new RegExp(`PORT=${taken + 1} npm start`));
    assert.doesNotMatch(all, /curl/, 'the curl banner was printed for a gateway that never listened');
    assert.doesNotMatch(all, STACK_FRAME, 'a stack trace was printed');
    assert.equal(await accepting(upstreamPort), false, 'the demo upstream was left listening');
  });

  it('npm start on free ports: the banner once listening, the 4th request of a key gets 429; a SIGTERM to npm stops both and frees the ports', async () => {
    const port = await freePort();
    const upstreamPort = await freePort();
    const npmStart = start('npm', ['start'], clone, { PORT: String(port), UPSTREAM_PORT: String(upstreamPort) });
    await npmStart.output(/Ctrl-C stops both/);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/hello`, { headers: { 'x-api-key': 'alice' } });
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    // npm alone, as a process manager or `kill PID` would: npm passes it to its shell only.
    process.kill(npmStart.child.pid!, 'SIGTERM');
    await until(async () => !(await accepting(port)) && !(await accepting(upstreamPort)), 'the gateway and the demo upstream did not stop');
  });

  it('npx floodgate serve: a SIGTERM to npx drains the gateway (it logs the drain, exits, and frees its port)', async () => {
    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), '{"name":"app","private":true,"dependencies":{"floodgate":"*"}}\n');
    // Installed as npm links a package and its bin (the install test installs the tarballs; this one needs only the shim).
    mkdirSync(join(app, 'node_modules/.bin'), { recursive: true });
    symlinkSync(clone, join(app, 'node_modules/floodgate'), 'dir');
    symlinkSync('../floodgate/bin/floodgate.mjs', join(app, 'node_modules/.bin/floodgate'));
    const upstreamPort = await answeringServer();
    const port = await freePort();
    const npx = start(
      'npx',
      ['floodgate', 'serve', '--upstream', `http://127.0.0.1:${upstreamPort}`, '--listen', `127.0.0.1:${port}`, '--limit', '3/5s'],
      app,
    );
    await npx.output(/"msg":"floodgate gateway listening"/);
    const listening = npx.run.stdout.split('\n').find((l) => l.includes('"floodgate gateway listening"'))!;
    const gatewayPid = (JSON.parse(listening) as { pid: number }).pid;
    assert.notEqual(gatewayPid, npx.child.pid, 'the gateway is a process of its own behind npx');

    process.kill(npx.child.pid!, 'SIGTERM');
    await until(() => !alive(gatewayPid), `the gateway (pid ${gatewayPid}) was left running after npx ended`);
    assert.equal(await accepting(port), false, 'the port is still taken');
    assert.match(
      npx.run.stdout,
      /"signal":"SIGTERM".*"msg":"shutting down"|"msg":"shutting down".*"signal":"SIGTERM"/,
      'the gateway drained',
    );
  });

  it('a source changed after the build: npm start says which file and builds again', async () => {
    const future = new Date(Date.now() + 60_000);
    utimesSync(join(clone, 'src/index.ts'), future, future);
    const build = start(process.execPath, ['scripts/build.mjs', '--if-stale'], clone);
    await build.output(/src\/index\.ts changed after the last build: building dist\//);
    await build.output(/1\/3 Lua scripts/);
    process.kill(-build.child.pid!, 'SIGKILL');
    await build.ended;
  });
});

describe("README's Redis snippet failed under moduleResolution node16 (TS2351: the default import of ioredis)", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const snippet = /```ts\n(import \{ Redis \} from 'ioredis';[\s\S]*?)```/.exec(readme)?.[1];

  /** The snippet, pasted into a new project with `ioredis@major` installed and floodgate as npm installs it, type-checked under `resolution`. */
  async function compile(app: string, resolution: 'node16' | 'bundler', code = snippet!): Promise<{ ok: boolean; output: string }> {
    const dir = join(app, `${resolution}-${code === snippet ? 'readme' : 'variant'}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"private":true,"type":"module"}\n');
    const module =
      resolution === 'node16' ? { module: 'node16', moduleResolution: 'node16' } : { module: 'esnext', moduleResolution: 'bundler' };
    const compilerOptions = { target: 'es2022', strict: true, noEmit: true, skipLibCheck: true, types: ['node'], ...module };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['index.ts'] }));
    writeFileSync(join(dir, 'index.ts'), `${code}\nexport { limiter };\n`);
    const tsc = start(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], dir);
    const run = await tsc.ended;
    return { ok: run.code === 0, output: run.stdout + run.stderr };
  }

  for (const major of ['5', '6']) {
    it(`compiles as written with ioredis ${major}, under node16 and bundler`, async (t) => {
      assert.ok(snippet !== undefined, "README.md has a ```ts block starting import { Redis } from 'ioredis'");
      assert.ok(existsSync(join(root, 'dist/esm/index.d.ts')), 'dist/ is missing: run node scripts/build.mjs first (npm test does)');
      const app = join(work, `ioredis-${major}`);
      mkdirSync(app);
      writeFileSync(join(app, 'package.json'), '{"name":"app","private":true}\n');
      const install = await npm(['install', `ioredis@${major}`, '--prefer-offline', '--no-audit', '--no-fund'], app);
      if (unreachable(install)) {
        t.skip(`npm could not fetch ioredis@${major}: ${install.stderr.trim().split('\n').at(-1) ?? ''}`);
        return;
      }
      assert.ok(install.ok, `npm install ioredis@${major} failed:\n${install.stderr}`);
      const pkg = join(app, 'node_modules/floodgate');
      mkdirSync(pkg);
      cpSync(join(root, 'package.json'), join(pkg, 'package.json'));
      cpSync(join(root, 'dist'), join(pkg, 'dist'), { recursive: true, filter: (src) => !src.endsWith('.map') });
      mkdirSync(join(app, 'node_modules/@types'), { recursive: true });
      symlinkSync(join(root, 'node_modules/@types/node'), join(app, 'node_modules/@types/node'), 'dir');
      for (const resolution of ['node16', 'bundler'] as const) {
        const result = await compile(app, resolution);
        assert.ok(result.ok, `ioredis ${major}, moduleResolution ${resolution}:\n${result.output}`);
      }
      // The form the README had: what this test tells apart.
      const before = await compile(app, 'node16', snippet!.replace("import { Redis } from 'ioredis';", "import Redis from 'ioredis';"));
      assert.match(before.output, /TS2351/, `the default import of ioredis ${major} compiled under node16:\n${before.output}`);
    });
  }
});

describe('README and docs/gateway.md as a new user reads them', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');

  it('the options table has the options the limiter takes that it lacked: wait, execEvenly, overrides', () => {
    for (const option of ['wait', 'execEvenly', 'overrides'])
      assert.match(readme, new RegExp(`^\\| \`${option}\` \\|`, 'm'), `no ${option} row`);
  });

  it('mentions the Envoy rate limit service (gRPC) with a link to docs/rls.md', () => {
    assert.match(readme, /Envoy rate limit service.*\n?.*gRPC[\s\S]{0,200}\(docs\/rls\.md\)/);
  });

  it("docs/gateway.md opens with the README's install line for the gateway", () => {
    const gateway = readFileSync(join(root, 'docs/gateway.md'), 'utf8');
    const firstInstall = /```sh\n(npm install [^\n]+)/.exec(gateway)?.[1];
    assert.equal(firstInstall, 'npm install floodgate-gateway');
    assert.ok(readme.includes('```sh\nnpm install floodgate-gateway\n'), "the README's gateway install line");
  });

  it('npm start: the README documents the PORT and UPSTREAM_PORT that examples/start.mjs reads', () => {
    const script = readFileSync(join(root, 'examples/start.mjs'), 'utf8');
    const read = [...script.matchAll(/portFrom\('([A-Z_]+)'/g)].map((m) => m[1]).sort();
    assert.deepEqual(read, ['PORT', 'UPSTREAM_PORT']);
    for (const variable of read) assert.match(readme, new RegExp(`\`${variable}\``), `${variable} is not in the README`);
  });
});
