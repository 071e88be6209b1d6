// The gateway's first run from the built package in a fresh app: every missing or outdated package named in one message with the install command, and --version from both builds.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runCli } from '../support/harness.js';

const root = new URL('../../..', import.meta.url).pathname;
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const apps: string[] = [];
after(() => {
  for (const app of apps) rmSync(app, { recursive: true, force: true });
});

/**
 * A fresh app with floodgate installed as `npm install floodgate` leaves it
 * (dist/, bin/ and package.json under node_modules/floodgate) and nothing
 * else, except the stand-in packages given: name → package.json.
 */
function freshApp(packages: Record<string, Record<string, unknown>> = {}): string {
  assert.ok(existsSync(join(root, 'dist/esm/gateway/cli/cli.js')), 'run node scripts/build.mjs first: this test runs the built package');
  const app = mkdtempSync(join(tmpdir(), 'floodgate-first-run-'));
  apps.push(app);
  // Nothing above the app may hold a node_modules, or resolution would find the packages there.
  for (let dir = join(app, '..'); ; dir = join(dir, '..')) {
    assert.ok(!existsSync(join(dir, 'node_modules')), `${dir}/node_modules exists: the packages there would be found`);
    if (dir === '/') break;
  }
  const pkg = join(app, 'node_modules', 'floodgate');
  mkdirSync(pkg, { recursive: true });
  cpSync(join(root, 'dist'), join(pkg, 'dist'), { recursive: true });
  cpSync(join(root, 'bin'), join(pkg, 'bin'), { recursive: true });
  cpSync(join(root, 'package.json'), join(pkg, 'package.json'));
  for (const [name, json] of Object.entries(packages)) {
    mkdirSync(join(app, 'node_modules', name), { recursive: true });
    writeFileSync(join(app, 'node_modules', name, 'package.json'), JSON.stringify(json));
  }
  writeFileSync(join(app, 'package.json'), '{"name":"app","private":true}\n');
  return app;
}

/** Runs the installed bin in `app` (as npx does) and collects its output. */
function floodgate(app: string, args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(app, 'node_modules/floodgate/bin/floodgate.mjs'), ...args], {
    cwd: app,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('floodgate serve after npm install floodgate alone', () => {
  it('every missing package in one message with one install command, not one failed run per package', async () => {
    const app = freshApp();
    const config = join(app, 'floodgate.yaml');
    writeFileSync(config, 'store: { type: redis, url: "redis://127.0.0.1:1" }\nrules: [{ name: all, policies: ["3/5s"] }]\n');
    const run = await floodgate(app, ['serve', '--upstream', 'http://127.0.0.1:9', '--config', config]);
    assert.equal(run.code, 1);
    assert.equal(
      run.stderr,
      [
        'floodgate: floodgate serve needs these packages next to floodgate: [FLOODGATE_MISSING_DEPENDENCY]',
        '  undici (the upstream connection pool): not installed',
        '  prom-client (the /metrics endpoint): not installed',
        '  pino (structured logs): not installed',
        '  yaml (reading --config files): not installed',
        '  ioredis (the Redis store): not installed',
        'Install them with: npm install floodgate-gateway',
        'or only these: npm install undici prom-client pino yaml ioredis',
        '',
      ].join('\n'),
    );
    // check names the same packages: a config that checks fine must also start.
    const checked = await floodgate(app, ['check', '--config', config]);
    assert.equal(checked.code, 1);
    assert.equal(checked.stderr, run.stderr);
  });

  it('only what the command line needs: no yaml without --config, no ioredis without Redis', async () => {
    const run = await floodgate(freshApp(), ['serve', '--upstream', 'http://127.0.0.1:9', '--limit', '3/5s']);
    assert.equal(run.code, 1);
    assert.equal(
      run.stderr,
      [
        'floodgate: floodgate serve needs these packages next to floodgate: [FLOODGATE_MISSING_DEPENDENCY]',
        '  undici (the upstream connection pool): not installed',
        '  prom-client (the /metrics endpoint): not installed',
        '  pino (structured logs): not installed',
        'Install them with: npm install floodgate-gateway',
        'or only these: npm install undici prom-client pino',
        '',
      ].join('\n'),
    );
  });

  it('pino 8 or prom-client 14 already in the app: found and needed versions, not a crash deep inside', async () => {
    const app = freshApp({
      pino: { name: 'pino', version: '8.21.0' },
      'prom-client': { name: 'prom-client', version: '14.2.0' },
      // A package.json without a version is taken as it is, not a crash.
      undici: { name: 'undici' },
    });
    const run = await floodgate(app, ['serve', '--upstream', 'http://127.0.0.1:9', '--limit', '3/5s', '--redis', 'redis://127.0.0.1:1']);
    assert.equal(run.code, 1);
    assert.equal(
      run.stderr,
      [
        'floodgate: floodgate serve needs these packages next to floodgate: [FLOODGATE_MISSING_DEPENDENCY]',
        '  ioredis (the Redis store): not installed',
        '  prom-client (the /metrics endpoint): 14.2.0 is installed; 15 or later is needed',
        '  pino (structured logs): 8.21.0 is installed; 9 or later is needed',
        'Install them with: npm install floodgate-gateway',
        'or only these: npm install ioredis prom-client@latest pino@latest',
        '',
      ].join('\n'),
    );
  });
});

describe('floodgate --version', () => {
  it('prints the package version from the installed bin (ESM build), with --version and -v', async () => {
    const app = freshApp();
    for (const flag of ['--version', '-v']) {
      const run = await floodgate(app, [flag]);
      assert.deepEqual(run, { code: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('finds the same version from the CommonJS build and from the sources', async () => {
    const app = freshApp();
    const file = join(app, 'node_modules/floodgate/dist/cjs/gateway/runtime/own-package.js');
    const child = spawn(process.execPath, ['-e', `process.stdout.write(String(require(${JSON.stringify(file)}).floodgateVersion()))`]);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    await new Promise((resolve) => child.on('close', resolve));
    assert.equal(out, version);
    const cli = runCli(['--version']);
    assert.equal(await cli.exited, 0);
    assert.deepEqual(cli.text, [version]);
  });
});
