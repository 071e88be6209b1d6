// Replays the Dockerfile outside a container (no engine here): its build stage's COPY/RUN steps in a temp dir with the same Node major, then the final stage's ENTRYPOINT + CMD with a config, checked through /healthz, the HEALTHCHECK command, /readyz, /metrics and a limited request.
import assert from 'node:assert/strict';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { cleanEnv, root } from '../packaging/npm.js';
import { freePort } from '../support/redis-server.js';
import { envPairs, execForm, healthcheckCommand, parseDockerfile, type Stage } from './dockerfile.js';

const stages = parseDockerfile(join(root, 'Dockerfile'));
const build = stages.find((stage) => stage.name === 'build');
const final = stages.at(-1);
let fs: string | undefined;

/** The container's filesystem root, mapped into a temp dir. */
const rootfs = (): string => {
  assert.ok(fs, 'the temp root was not made');
  return fs;
};
/** A container path (absolute, or relative to `workdir`) as a path in the temp root. */
const host = (path: string, workdir: string): string => (isAbsolute(path) ? join(rootfs(), path) : join(rootfs(), workdir, path));

function sh(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile('/bin/sh', ['-c', command], { cwd, env, timeout: 180_000, maxBuffer: 32 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ ok: error === null, output: `${stdout}${stderr}${error === null ? '' : `\n${error.message}`}` });
    });
  });
}

/** Runs a stage's WORKDIR, COPY and RUN steps; returns its last WORKDIR and ENV. `note` hears how long each RUN took. */
async function replay(stage: Stage, note: (message: string) => void): Promise<{ workdir: string; env: Record<string, string> }> {
  let workdir = '/';
  const env: Record<string, string> = {};
  for (const step of stage.instructions) {
    switch (step.keyword) {
      case 'WORKDIR':
        workdir = isAbsolute(step.args) ? step.args : join(workdir, step.args);
        mkdirSync(host(workdir, '/'), { recursive: true });
        break;
      case 'ENV':
        for (const [name, value] of envPairs(step.args)) env[name] = value;
        break;
      case 'COPY': {
        const parts = step.args.split(/\s+/);
        const dest = parts.pop()!;
        const from = step.flags.from === undefined ? root : rootfs();
        for (const source of parts) {
          const target =
            dest.endsWith('/') && !source.endsWith('/') ? join(host(dest, workdir), source.split('/').at(-1)!) : host(dest, workdir);
          mkdirSync(dirname(target), { recursive: true });
          cpSync(join(from, source), target, { recursive: true });
        }
        break;
      }
      case 'RUN': {
        // The npm cache first (the registry only for what it lacks): the commands themselves are unchanged.
        const runEnv = { ...cleanEnv(), ...env, npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' };
        const started = Date.now();
        const result = await sh(step.args, host(workdir, '/'), runEnv);
        note(`line ${step.line}: ${((Date.now() - started) / 1000).toFixed(1)} s for RUN ${step.args.slice(0, 60)}`);
        assert.ok(result.ok, `Dockerfile line ${step.line}: RUN ${step.args}\n${result.output}`);
        break;
      }
      default:
        break;
    }
  }
  return { workdir, env };
}

before(() => {
  fs = mkdtempSync(join(tmpdir(), 'floodgate-image-'));
});

after(() => {
  if (fs !== undefined) rmSync(fs, { recursive: true, force: true });
});

test("the Dockerfile's rules: pinned Node base images of this Node's major, a non-root user, a healthcheck, the gateway as entrypoint", () => {
  assert.ok(build, 'no stage named build');
  assert.ok(final !== undefined && final !== build, 'no final stage after build');
  const major = process.versions.node.split('.')[0];
  for (const stage of stages) {
    const tag = /^node:(\d+)\.\d+\.\d+-[a-z0-9.-]+$/.exec(stage.image);
    assert.ok(tag, `${stage.image}: pin an official node image by its full version tag`);
    assert.equal(tag[1], major, `${stage.image}: the test runs on Node ${process.version}; the image's major must match`);
  }
  const all = stages.flatMap((stage) => stage.instructions);
  assert.ok(!all.some((step) => step.keyword === 'ADD'), 'COPY, not ADD (no URLs, no archive unpacking)');
  assert.match(build.instructions.find((step) => step.keyword === 'RUN')!.args, /^npm ci\b/, 'dependencies from the lockfile');
  const user = final.instructions.filter((step) => step.keyword === 'USER').at(-1);
  assert.ok(user, 'the final stage sets USER');
  assert.doesNotMatch(user.args, /^(root|0)(:|$)/, 'the final USER is not root');
  assert.ok(
    final.instructions.some((step) => step.keyword === 'HEALTHCHECK' && healthcheckCommand(step.args) !== undefined),
    'HEALTHCHECK CMD [...]',
  );
  assert.deepEqual(execForm(final.instructions.find((step) => step.keyword === 'ENTRYPOINT')!.args), ['floodgate', 'serve']);
  const expose = final.instructions.find((step) => step.keyword === 'EXPOSE')?.args.split(/\s+/);
  assert.deepEqual(expose, ['8080', '9090']);
});

test('.dockerignore sends the build only what the Dockerfile copies, and everything it copies', () => {
  const lines = readFileSync(join(root, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  assert.equal(lines[0], '*', 'everything is left out first');
  const kept = lines.filter((line) => line.startsWith('!')).map((line) => line.slice(1).replace(/\/$/, ''));
  const copied = stages.flatMap((stage) =>
    stage.instructions
      .filter((step) => step.keyword === 'COPY' && step.flags.from === undefined)
      .flatMap((step) =>
        step.args
          .split(/\s+/)
          .slice(0, -1)
          .map((source) => source.replace(/\/$/, '')),
      ),
  );
  for (const source of copied) {
    assert.ok(
      kept.some((entry) => source === entry || source.startsWith(`${entry}/`)),
      `COPY ${source}: not kept by .dockerignore`,
    );
  }
  for (const entry of kept) assert.ok(existsSync(join(root, entry)), `.dockerignore keeps ${entry}, which does not exist`);
});

/** Starts the entrypoint as the image would and resolves once the admin listener answers /healthz. */
async function startGateway(
  command: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  admin: number,
): Promise<{ child: ChildProcess; log: () => string }> {
  let output = '';
  const child = spawn(command[0]!, command.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const log = (): string => output;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}:\n${log()}`);
    const up = await fetch(`http://127.0.0.1:${admin}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (up) return { child, log };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`the gateway did not answer /healthz within 30 s:\n${log()}`);
}

test("the build stage's steps, run outside a container, make a gateway that the final stage's ENTRYPOINT + CMD start", async (t) => {
  assert.ok(build && final, 'stages missing');
  const note = (message: string): void => t.diagnostic(message);
  await replay(build, note);
  const { workdir, env } = await replay(final, note);

  // Only what runs: floodgate, the gateway's packages, no dev tooling.
  const modules = host('node_modules', workdir);
  for (const name of ['floodgate', 'undici', 'prom-client', 'yaml', 'pino', 'ioredis']) {
    assert.ok(existsSync(join(modules, name, 'package.json')), `${name} is not installed in the runtime tree`);
  }
  for (const name of ['typescript', 'eslint', 'tsx']) assert.ok(!existsSync(join(modules, name)), `${name} (dev) is in the runtime tree`);

  // ENV PATH names container directories; map them into the temp root.
  const path = (env.PATH ?? '$PATH')
    .split(':')
    .map((entry) => (entry === '$PATH' ? (process.env.PATH ?? '') : host(entry, '/')))
    .join(delimiter);
  const entrypoint = execForm(final.instructions.find((step) => step.keyword === 'ENTRYPOINT')!.args)!;
  const cmd = execForm(final.instructions.find((step) => step.keyword === 'CMD')!.args)!;
  const binary = path
    .split(delimiter)
    .map((dir) => join(dir, entrypoint[0]!))
    .find((file) => existsSync(file));
  assert.ok(binary !== undefined && binary.startsWith(rootfs()), `${entrypoint[0]} is not on the image's PATH (${env.PATH})`);
  const configIndex = cmd.indexOf('--config') + 1;
  assert.ok(configIndex > 0, 'CMD passes --config');
  const config = host(cmd[configIndex]!, workdir);
  const runEnv = { ...cleanEnv(), ...env, PATH: path };

  // The image's default config is valid as shipped.
  const shipped = await sh(`"${binary}" check --config "${config}"`, host(workdir, '/'), runEnv);
  assert.ok(shipped.ok, `floodgate check on the image's config:\n${shipped.output}`);

  // A config mounted over the default, as a deployment would: a local upstream, free ports.
  const upstream: Server = createServer((_req, res) => res.end('upstream ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  writeFileSync(
    config,
    [
      `upstream: http://127.0.0.1:${(upstream.address() as { port: number }).port}`,
      `listen: 127.0.0.1:${proxyPort}`,
      `admin: 127.0.0.1:${adminPort}`,
      'logLevel: warn',
      'rules:',
      '  - name: per-address',
      '    key: ip',
      "    policies: ['3/1m']",
      '',
    ].join('\n'),
  );
  const args = cmd.map((arg, i) => (i === configIndex ? config : arg));
  const { child, log } = await startGateway([binary, ...entrypoint.slice(1), ...args], host(workdir, '/'), runEnv, adminPort);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const health = healthcheckCommand(final.instructions.find((step) => step.keyword === 'HEALTHCHECK')!.args)!;
    assert.equal(health[0], 'node', 'the healthcheck runs node (no curl in the image)');
    const healthEnv = { ...runEnv, FLOODGATE_HEALTH_URL: `http://127.0.0.1:${adminPort}/healthz` };
    const healthy = await new Promise<number>((resolve) =>
      execFile(process.execPath, health.slice(1), { env: healthEnv, timeout: 10_000 }, (error) =>
        resolve(error === null ? 0 : Number(error.code)),
      ),
    );
    assert.equal(healthy, 0, `the HEALTHCHECK command failed against a running gateway:\n${log()}`);

    const ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
    const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    assert.match(metrics, /^# TYPE floodgate_/m, 'the admin listener serves floodgate metrics');

    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`http://127.0.0.1:${proxyPort}/hello`);
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429], `gateway output:\n${log()}`);
  } finally {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  }

  // The HEALTHCHECK fails once nothing answers.
  const health = healthcheckCommand(final.instructions.find((step) => step.keyword === 'HEALTHCHECK')!.args)!;
  const down = await new Promise<number>((resolve) =>
    execFile(
      process.execPath,
      health.slice(1),
      { env: { ...runEnv, FLOODGATE_HEALTH_URL: `http://127.0.0.1:${adminPort}/healthz` }, timeout: 10_000 },
      (error) => resolve(error === null ? 0 : Number(error.code)),
    ),
  );
  assert.notEqual(down, 0, 'the HEALTHCHECK command passed with the gateway stopped');
});

test('the ConfigMap in deploy/kubernetes holds a config that floodgate check accepts', async () => {
  const manifest = parse(readFileSync(join(root, 'deploy/kubernetes/configmap.yaml'), 'utf8')) as { data: Record<string, string> };
  const file = manifest.data['floodgate.yaml'];
  assert.ok(file, 'configmap.yaml has no floodgate.yaml');
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-configmap-'));
  try {
    // The Secret's mount is not here: the same token path, pointed at a local file.
    const token = join(dir, 'admin-token');
    writeFileSync(token, 'x'.repeat(32));
    assert.match(file, /tokenFile: \/run\/secrets\/floodgate\/admin-token/);
    writeFileSync(join(dir, 'floodgate.yaml'), file.replace('/run/secrets/floodgate/admin-token', token));
    const result = await sh(`node "${join(root, 'bin/floodgate.mjs')}" check --config floodgate.yaml`, dir, cleanEnv());
    assert.ok(result.ok, `floodgate check on the ConfigMap's config:\n${result.output}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
