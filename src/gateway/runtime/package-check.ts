/** The gateway's packages, all that a command line needs checked at once. */
/**
 * Undici, prom-client, pino, yaml, ioredis, @opentelemetry/api when telemetry is on, and @grpc/grpc-js and protobufjs
 * for the RLS server, checked at once so one message lists every missing or outdated one and the one command that
 * installs them.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCode, FloodgateError } from '../../index.js';
import { nodeModulesChain, readPackageJson } from './own-package.js';

/** A package the gateway loads, what for, and the oldest major it works with. */
export interface GatewayPackage {
  /** The npm name. */
  readonly name: string;
  /** What the gateway uses it for, as shown to the user. */
  readonly purpose: string;
  /** The oldest supported major version. */
  readonly major: number;
}

/** Every package `floodgate serve` may load (the ranges of package.json's peerDependencies). */
export const GATEWAY_PACKAGES = {
  undici: { name: 'undici', purpose: 'the upstream connection pool', major: 7 },
  'prom-client': { name: 'prom-client', purpose: 'the /metrics endpoint', major: 15 },
  pino: { name: 'pino', purpose: 'structured logs', major: 9 },
  yaml: { name: 'yaml', purpose: 'reading --config files', major: 2 },
  ioredis: { name: 'ioredis', purpose: 'the Redis store', major: 5 },
  pg: { name: 'pg', purpose: 'the PostgreSQL store (store.type: postgres)', major: 8 },
  '@opentelemetry/api': { name: '@opentelemetry/api', purpose: 'OpenTelemetry metrics and spans (telemetry.otel, --otel)', major: 1 },
  '@grpc/grpc-js': { name: '@grpc/grpc-js', purpose: 'the Envoy rate limit service on grpc.server: grpc-js', major: 1 },
  jose: { name: 'jose', purpose: 'verifying bearer tokens for jwt:CLAIM keys', major: 6 },
} as const satisfies Record<string, GatewayPackage>;

/** One of {@link GATEWAY_PACKAGES}' names. */
export type GatewayPackageName = keyof typeof GATEWAY_PACKAGES;

/** The package that depends on floodgate and on every package of {@link GATEWAY_PACKAGES}. */
export const GATEWAY_BUNDLE = 'floodgate-gateway';

/** What was found of one package. */
export type PackageState =
  | { readonly status: 'ok'; readonly version: string | undefined }
  | { readonly status: 'missing' }
  | { readonly status: 'outdated'; readonly version: string };

/**
 * Finds `name` the way a bare import from this file does (the nearest
 * node_modules folder that holds it) and reads its version. A package
 * whose package.json has no readable version is taken as it is: the
 * import then says whether it works.
 */
export function packageState(pkg: GatewayPackage, chain: readonly string[] = nodeModulesChain()): PackageState {
  for (const dir of chain) {
    const file = join(dir, pkg.name, 'package.json');
    if (!existsSync(file)) continue;
    const version = readPackageJson(file)?.version;
    if (typeof version !== 'string') return { status: 'ok', version: undefined };
    const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
    return Number.isInteger(major) && major < pkg.major ? { status: 'outdated', version } : { status: 'ok', version };
  }
  return { status: 'missing' };
}

/**
 * The packages `floodgate serve` needs: undici, prom-client and pino
 * always, yaml with a config file, ioredis with the Redis store,
 * @opentelemetry/api with OpenTelemetry on, and with the rate limit service
 * (`--grpc`) yaml, and @grpc/grpc-js when it runs on it (`grpc.server: grpc-js`).
 */
export function packagesFor(uses: {
  readonly config: boolean;
  readonly redis: boolean;
  readonly postgres?: boolean;
  readonly otel?: boolean | undefined;
  readonly grpc?: boolean;
  readonly grpcJs?: boolean;
}): GatewayPackage[] {
  const out: GatewayPackage[] = [GATEWAY_PACKAGES.undici, GATEWAY_PACKAGES['prom-client'], GATEWAY_PACKAGES.pino];
  if (uses.config) out.push(GATEWAY_PACKAGES.yaml);
  if (uses.redis) out.push(GATEWAY_PACKAGES.ioredis);
  if (uses.postgres === true) out.push(GATEWAY_PACKAGES.pg);
  if (uses.otel === true) out.push(GATEWAY_PACKAGES['@opentelemetry/api']);
  // The RLS server reads its YAML with the yaml package whether or not a --config file names it.
  if (uses.grpc === true && !uses.config) out.push(GATEWAY_PACKAGES.yaml);
  if (uses.grpc === true && uses.grpcJs === true) out.push(GATEWAY_PACKAGES['@grpc/grpc-js']);
  return out;
}

/**
 * Checks every package of `needed` at once.
 *
 * @param command - the command named in the message
 * @throws FloodgateError MISSING_DEPENDENCY listing each missing or outdated package, and the install commands
 */
export function requirePackages(
  needed: readonly GatewayPackage[],
  command = 'floodgate serve',
  chain: readonly string[] = nodeModulesChain(),
): void {
  const missing: GatewayPackage[] = [];
  const outdated: Array<{ pkg: GatewayPackage; version: string }> = [];
  for (const pkg of needed) {
    const state = packageState(pkg, chain);
    if (state.status === 'missing') missing.push(pkg);
    else if (state.status === 'outdated') outdated.push({ pkg, version: state.version });
  }
  if (missing.length === 0 && outdated.length === 0) return;
  const lines = [
    `${command} needs these packages next to floodgate:`,
    ...missing.map((p) => `  ${p.name} (${p.purpose}): not installed`),
    ...outdated.map(({ pkg, version }) => `  ${pkg.name} (${pkg.purpose}): ${version} is installed; ${pkg.major} or later is needed`),
    `Install them with: npm install ${GATEWAY_BUNDLE}`,
    // @latest for an outdated one: a bare name could keep the major the app's package.json already lists.
    `or only these: npm install ${[...missing, ...outdated.map((o) => o.pkg)].map((p) => (missing.includes(p) ? p.name : `${p.name}@latest`)).join(' ')}`,
  ];
  throw new FloodgateError(ErrorCode.MISSING_DEPENDENCY, lines.join('\n'));
}
