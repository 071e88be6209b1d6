// Runs npm for the packaging tests: a clean environment, a registry-or-cache mode chosen once, and `npm pack` of floodgate and floodgate-gateway.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

/** What one npm run printed, and whether it exited 0. */
export interface NpmResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

/**
 * The environment without the `npm_*` variables `npm test` sets: an npm run
 * from a test would otherwise inherit the repository's package and config.
 */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^npm_/i.test(name)) env[name] = value;
  return env;
}

/** Runs `npm ...args` in `cwd`; never rejects, so concurrent runs each report their own outcome. */
export function npm(args: readonly string[], cwd: string, timeoutMs = 85_000): Promise<NpmResult> {
  return new Promise((resolve) => {
    execFile('npm', [...args], { cwd, env: cleanEnv(), timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ ok: error === null, stdout, stderr: error !== null && stderr === '' ? String(error) : stderr });
    });
  });
}

/** How the installs reach packages: the registry (the cache first), or only the cache when the registry does not answer. */
export interface InstallMode {
  /** The flags every install gets besides `--no-audit --no-fund`. */
  flags: string[];
  /** Said in a skip reason. */
  describe: string;
}

/** Pings the registry once: reachable means `--prefer-offline` (cache first), else `--offline` (cache only). */
export async function installMode(cwd: string): Promise<InstallMode> {
  const ping = await npm(['ping'], cwd, 20_000);
  return ping.ok
    ? { flags: ['--prefer-offline'], describe: 'the npm registry' }
    : { flags: ['--offline'], describe: 'the local npm cache (the registry did not answer npm ping)' };
}

/** True when an install failed only because npm could reach neither the registry nor a cached copy. */
export function unreachable(result: NpmResult): boolean {
  return !result.ok && /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network request/i.test(result.stderr);
}

/** The two tarballs, packed into a fresh directory. */
export interface Tarballs {
  dir: string;
  floodgate: string;
  gateway: string;
}

/**
 * Packs the built project and the gateway package. Needs dist/ (`node
 * scripts/build.mjs`, which `npm test` runs first).
 */
export async function packBoth(): Promise<Tarballs> {
  if (!existsSync(join(root, 'dist/esm/index.js')) || !existsSync(join(root, 'dist/cjs/index.js'))) {
    throw new Error('dist/ is missing: run node scripts/build.mjs first (npm test does).');
  }
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-pack-'));
  const pack = async (cwd: string): Promise<string> => {
    const result = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], cwd);
    if (!result.ok) throw new Error(`npm pack failed in ${cwd}:\n${result.stderr}`);
    const [info] = JSON.parse(result.stdout) as { filename: string }[];
    return join(dir, info!.filename);
  };
  const [floodgate, gateway] = await Promise.all([pack(root), pack(join(root, 'packages/gateway'))]);
  return { dir, floodgate, gateway };
}
