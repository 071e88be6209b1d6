/** Command-line parsing for `floodgate`. */
/**
 * Flags → settings (alone or over a config file), with typed errors for bad flags.
 */
import { parseArgs } from 'node:util';
import { ErrorCode, FloodgateError, parseBucket } from '../../index.js';
import type { SettingsOverrides } from '../config/config-file.js';
import { readAdminTokenFile } from '../config/admin-config.js';
import { GRPC_WORKERS } from '../config/grpc-config.js';
import { parseKeySpec } from '../config/key-spec.js';
import { keyParts } from '../config/key-settings.js';
import { parseRedisNodes, parseSentinelSpec, readPemFile, readSecretEnv, readSecretFile } from '../config/redis-config.js';
import { resolve } from 'node:path';
import {
  parseDecisionPath,
  parseFailurePolicy,
  parseLogLevel,
  InvalidValue,
  leaseConflict,
  makePolicy,
  parseAlgorithm,
  parseHeaders,
  parseLeaseMs,
  parseLimitSpec,
  parseListen,
  parseMs,
  parsePositiveInt,
  parseRedisUrl,
  parseTrustProxy,
  parseUpstream,
} from '../config/values.js';
import {
  DEFAULT_DECISION_PATH,
  DEFAULT_LISTEN,
  DEFAULT_PATHS,
  DEFAULT_PROXY,
  DEFAULT_READINESS,
  DEFAULT_STORE,
  DEFAULT_REDIS_CONNECT_TIMEOUT_MS,
  type GatewaySettings,
  type GrpcSettings,
  type GrpcTlsSettings,
  type StoreSettings,
} from '../config/settings.js';

/** What the command line asks for. */
export type Command =
  | { readonly kind: 'help' }
  | { readonly kind: 'version' }
  | {
      readonly kind: 'serve';
      readonly configFile: string | undefined;
      readonly overrides: SettingsOverrides;
      readonly settings: GatewaySettings | undefined;
    }
  | { readonly kind: 'check'; readonly configFile: string; readonly overrides: SettingsOverrides };

const OPTIONS = {
  upstream: { type: 'string' },
  listen: { type: 'string' },
  limit: { type: 'string', multiple: true },
  key: { type: 'string' },
  algorithm: { type: 'string' },
  'block-duration': { type: 'string' },
  burst: { type: 'string' },
  shadow: { type: 'boolean' },
  redis: { type: 'string' },
  'redis-cluster': { type: 'string' },
  'redis-sentinel': { type: 'string' },
  'redis-user': { type: 'string' },
  'redis-password-file': { type: 'string' },
  'redis-password-env': { type: 'string' },
  'redis-tls': { type: 'boolean' },
  'redis-ca': { type: 'string' },
  'redis-cert': { type: 'string' },
  'redis-key': { type: 'string' },
  'local-first': { type: 'boolean' },
  lease: { type: 'string' },
  'on-store-failure': { type: 'string' },
  workers: { type: 'string' },
  config: { type: 'string' },
  'no-watch': { type: 'boolean' },
  admin: { type: 'string' },
  'admin-token-file': { type: 'string' },
  'trust-proxy': { type: 'string' },
  headers: { type: 'string' },
  'drain-timeout': { type: 'string' },
  'decision-path': { type: 'string' },
  'ready-upstream': { type: 'boolean' },
  'log-level': { type: 'string' },
  otel: { type: 'boolean' },
  grpc: { type: 'string' },
  'rls-config': { type: 'string' },
  'grpc-cert': { type: 'string' },
  'grpc-key': { type: 'string' },
  'grpc-client-ca': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const;

/** Flags that define the default rule, which a config file defines instead. */
const RULE_FLAGS = ['limit', 'key', 'algorithm', 'burst', 'block-duration', 'shadow'] as const;

function bad(message: string): FloodgateError {
  return new FloodgateError(ErrorCode.INVALID_ARGUMENT, message);
}

/** Parses one flag's value, naming the flag in the error. */
function flag<T>(name: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof InvalidValue || error instanceof FloodgateError) {
      // The parsers name the config file's field ("trustProxy entries must…"); on the command line the flag says it.
      const field = name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
      const message = error.message
        .replace(new RegExp(`^(?:the )?${field} `, 'i'), '')
        .replace(/^the (\w+) (?=must )/, (whole, word: string) => (field.toLowerCase().includes(word.toLowerCase()) ? '' : whole));
      throw bad(`--${name} ${message}`);
    }
    throw error;
  }
}

/** The rate limit service's flags (`--grpc`, `--rls-config`, `--grpc-cert`, `--grpc-key`, `--grpc-client-ca`); undefined when none is given. */
function grpcOverrides(v: { [K in keyof typeof OPTIONS]?: unknown }): Partial<GrpcSettings> | undefined {
  const grpc: { -readonly [K in keyof GrpcSettings]?: GrpcSettings[K] } = {};
  if (typeof v.grpc === 'string') grpc.listen = flag('grpc', () => parseListen(v.grpc));
  if (typeof v['rls-config'] === 'string') grpc.config = resolve(v['rls-config']);
  const tls: { -readonly [K in keyof GrpcTlsSettings]?: string } = {};
  if (typeof v['grpc-cert'] === 'string') tls.cert = resolve(v['grpc-cert']);
  if (typeof v['grpc-key'] === 'string') tls.key = resolve(v['grpc-key']);
  if (typeof v['grpc-client-ca'] === 'string') tls.clientCa = resolve(v['grpc-client-ca']);
  // Partial: a config file's grpc.tls supplies the rest (grpcSection checks the whole).
  if (Object.keys(tls).length > 0) grpc.tls = tls as GrpcTlsSettings;
  return Object.keys(grpc).length === 0 ? undefined : grpc;
}

/** The flags that name the Redis store: one at most. */
const REDIS_FLAGS = ['redis', 'redis-cluster', 'redis-sentinel'] as const;
/** The flags that say how to reach it. */
const REDIS_CONNECTION_FLAGS = [
  'redis-user',
  'redis-password-file',
  'redis-password-env',
  'redis-tls',
  'redis-ca',
  'redis-cert',
  'redis-key',
] as const;

/**
 * The store fields of the Redis flags: `--redis URL`, `--redis-cluster HOST:PORT,…` or
 * `--redis-sentinel NAME@HOST:PORT,…`, with `--redis-user`, `--redis-password-file`/`-env` and `--redis-ca`/`-cert`/`-key`.
 * They replace the config file's whole store connection (its url, cluster or sentinel and their credentials).
 */
function redisOverrides(v: { [K in keyof typeof OPTIONS]?: unknown }): Partial<StoreSettings> {
  const named = REDIS_FLAGS.filter((name) => v[name] !== undefined);
  const extras = REDIS_CONNECTION_FLAGS.filter((name) => v[name] !== undefined);
  if (named.length === 0) {
    if (extras.length > 0)
      throw bad(`--${extras[0]} needs the Redis store: --redis URL, --redis-cluster HOST:PORT,… or --redis-sentinel NAME@HOST:PORT,….`);
    return {};
  }
  if (named.length > 1) throw bad(`--${named[0]} and --${named[1]} both name the Redis store; give one.`);
  const which = named[0]!;
  const text = (name: Exclude<(typeof REDIS_CONNECTION_FLAGS)[number], 'redis-tls'>): string | undefined => v[name] as string | undefined;
  if (which === 'redis' && extras.length === 0)
    return { kind: 'redis', url: flag('redis', () => parseRedisUrl(v.redis)), connection: undefined };
  const here = process.cwd();
  const pem = (name: 'redis-ca' | 'redis-cert' | 'redis-key'): string | undefined =>
    text(name) === undefined ? undefined : flag(name, () => readPemFile(text(name), here));
  const tls = { ca: pem('redis-ca'), cert: pem('redis-cert'), key: pem('redis-key') };
  if ((tls.cert === undefined) !== (tls.key === undefined))
    throw bad(
      `--${tls.cert === undefined ? 'redis-key needs --redis-cert' : 'redis-cert needs --redis-key'} FILE (PEM): a client certificate is a pair.`,
    );
  if (text('redis-password-file') !== undefined && text('redis-password-env') !== undefined)
    throw bad('--redis-password-file and --redis-password-env both give the password; keep one.');
  const password =
    text('redis-password-file') !== undefined
      ? flag('redis-password-file', () => readSecretFile(text('redis-password-file')!, here, 'Redis password'))
      : text('redis-password-env') !== undefined
        ? flag('redis-password-env', () => readSecretEnv(text('redis-password-env'), 'Redis password'))
        : undefined;
  const user = text('redis-user');
  if (user !== undefined && !/^[\x21-\x7e]{1,256}$/.test(user))
    throw bad(`--redis-user must be the ACL user name; got ${JSON.stringify(user)}.`);
  const common = {
    username: user,
    password,
    sentinelUsername: undefined,
    sentinelPassword: undefined,
    // --redis-tls alone: TLS with the system's CAs, as `tls: true` in the file.
    tls: tls.ca === undefined && tls.cert === undefined && v['redis-tls'] !== true ? undefined : tls,
    connectTimeoutMs: DEFAULT_REDIS_CONNECT_TIMEOUT_MS,
    field: `--${which}`,
  };
  if (which === 'redis') {
    const url = flag('redis', () => parseRedisUrl(v.redis));
    if (password !== undefined && /^rediss?:\/\/[^@/]*:[^@/]*@/.test(url))
      throw bad('--redis holds a password in its URL and --redis-password-* gives one too; keep one.');
    return { kind: 'redis', url, connection: { topology: 'single', nodes: [], masterName: undefined, ...common } };
  }
  if (which === 'redis-cluster') {
    const nodes = flag('redis-cluster', () => parseRedisNodes(v['redis-cluster'], 'cluster', '--redis-cluster'));
    return { kind: 'redis', url: undefined, connection: { topology: 'cluster', nodes, masterName: undefined, ...common } };
  }
  const { name, nodes } = flag('redis-sentinel', () => parseSentinelSpec(String(v['redis-sentinel']), '--redis-sentinel'));
  return { kind: 'redis', url: undefined, connection: { topology: 'sentinel', nodes, masterName: name, ...common } };
}

/** The store's flags (the Redis ones, `--local-first`, `--lease`, `--on-store-failure`); undefined when none is given. */
function storeOverrides(v: { [K in keyof typeof OPTIONS]?: unknown }): Partial<StoreSettings> | undefined {
  const store: { -readonly [K in keyof StoreSettings]?: StoreSettings[K] } = {};
  Object.assign(store, redisOverrides(v));
  if (v['local-first'] === true) store.localFirst = true;
  if (v.lease !== undefined) store.leaseMs = flag('lease', () => parseLeaseMs(v.lease));
  if (v['on-store-failure'] !== undefined) store.onFailure = flag('on-store-failure', () => parseFailurePolicy(v['on-store-failure']));
  return Object.keys(store).length > 0 ? store : undefined;
}

/**
 * Parses `argv` (without node and the script).
 * @throws FloodgateError INVALID_ARGUMENT for an unknown command or flag, a missing or malformed value, or conflicting flags
 */
export function parseCommandLine(argv: readonly string[]): Command {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw bad((error as Error).message.replace(/^Unknown option/, 'unknown option'));
  }
  const { values: v, positionals } = parsed;
  if (v.help === true || positionals[0] === 'help' || argv.length === 0) return { kind: 'help' };
  if (v.version === true) return { kind: 'version' };
  const command = positionals[0];
  if (command !== 'serve' && command !== 'check') {
    throw bad(`unknown command ${JSON.stringify(command)}; use "floodgate serve" or "floodgate check".`);
  }
  if (positionals.length > 1) throw bad(`unexpected argument ${JSON.stringify(positionals[1])}; options start with --.`);
  if (command === 'check') {
    if (v.config === undefined) throw bad('check needs --config FILE.');
    // The rate limit service's file and the store's flags can be named here as for serve: check then reads what serve would.
    const grpcFlags = grpcOverrides(v);
    const storeFlags = storeOverrides(v);
    return {
      kind: 'check',
      configFile: v.config,
      overrides: {
        ...(grpcFlags === undefined ? {} : { grpcOverrides: grpcFlags }),
        ...(storeFlags === undefined ? {} : { storeOverrides: storeFlags }),
      },
    };
  }

  const o: SettingsOverrides = {};
  if (v.upstream !== undefined) o.upstream = flag('upstream', () => parseUpstream(v.upstream));
  if (v.listen !== undefined) o.listen = flag('listen', () => parseListen(v.listen));
  if (v.admin !== undefined) o.admin = flag('admin', () => parseListen(v.admin));
  if (v['admin-token-file'] !== undefined) {
    if (v.admin === undefined && v.config === undefined)
      throw bad('--admin-token-file needs --admin HOST:PORT: the admin API runs only on the admin listener.');
    o.adminToken = flag('admin-token-file', () => readAdminTokenFile(v['admin-token-file']!));
  }
  if (v.workers !== undefined) o.workers = flag('workers', () => parsePositiveInt(v.workers, 256, true));
  if (v['trust-proxy'] !== undefined) o.trustProxy = flag('trust-proxy', () => parseTrustProxy(v['trust-proxy']));
  if (v.headers !== undefined) o.headers = flag('headers', () => parseHeaders(v.headers));
  if (v['drain-timeout'] !== undefined) o.drainTimeoutMs = flag('drain-timeout', () => parseMs(v['drain-timeout']));
  if (v['log-level'] !== undefined) o.logLevel = flag('log-level', () => parseLogLevel(v['log-level']));
  if (v['decision-path'] !== undefined)
    o.decisionPath = flag('decision-path', () => parseDecisionPath(v['decision-path'] === 'false' ? false : v['decision-path']));
  if (v['ready-upstream'] === true) o.readiness = { upstream: true };
  if (v.otel === true) o.telemetry = { otel: true };
  if (v['no-watch'] === true) {
    if (v.config === undefined) throw bad('--no-watch only applies with --config FILE.');
    o.watch = false;
  }
  const store = storeOverrides(v);
  if (store !== undefined) o.storeOverrides = store;
  const grpc: Partial<GrpcSettings> = grpcOverrides(v) ?? {};
  if (Object.keys(grpc).length > 0) o.grpcOverrides = grpc;

  if (v.config !== undefined) {
    const given = RULE_FLAGS.filter((name) => v[name] !== undefined);
    if (given.length > 0) {
      throw bad(
        `--${given[0]} defines the default rule, but --config ${v.config} defines the rules; put the policy in the file's rules instead.`,
      );
    }
    return { kind: 'serve', configFile: v.config, overrides: o, settings: undefined };
  }

  // No config file: one rule from the flags, applied to every request; or the rate limit service alone.
  if (grpc.listen !== undefined || grpc.config !== undefined || grpc.tls !== undefined) {
    if (grpc.listen === undefined)
      throw bad(
        `--${grpc.config === undefined ? 'grpc-cert' : 'rls-config'} needs --grpc HOST:PORT, where the rate limit service listens.`,
      );
    if (grpc.config === undefined)
      throw bad('--grpc needs --rls-config PATH: the envoyproxy/ratelimit YAML file, or a directory of them, that it serves.');
    if ((o.workers ?? 0) > 0) throw bad(`--grpc: ${GRPC_WORKERS}`);
    if (grpc.tls !== undefined && (grpc.tls.cert === undefined || grpc.tls.key === undefined))
      throw bad(
        `--${grpc.tls.cert === undefined ? 'grpc-key and --grpc-client-ca need --grpc-cert' : 'grpc-cert needs --grpc-key'} FILE (PEM).`,
      );
  }
  const rlsOnly = grpc.listen !== undefined && o.upstream === undefined;
  if (rlsOnly) {
    const given = RULE_FLAGS.find((name) => v[name] !== undefined);
    if (given !== undefined) throw bad(`--${given} defines the rule of the HTTP proxy, which needs --upstream URL.`);
  }
  if (o.upstream === undefined && !rlsOnly) throw bad('serve needs --upstream URL (where admitted requests go), or --config FILE.');
  if (!rlsOnly && (v.limit === undefined || v.limit.length === 0))
    throw bad('serve needs at least one --limit N/WINDOW (e.g. --limit 100/1m), or --config FILE with rules.');
  const algorithm = v.algorithm === undefined ? 'fixed-window' : flag('algorithm', () => parseAlgorithm(v.algorithm));
  const blockMs = v['block-duration'] === undefined ? 0 : flag('block-duration', () => parseMs(v['block-duration']));
  const seen = new Set<string>();
  const policies = (v.limit ?? []).map((spec) => {
    const { limit, windowMs } = flag('limit', () => parseLimitSpec(spec));
    if (seen.has(`${limit}/${windowMs}`)) throw bad(`--limit ${spec} is given twice.`);
    seen.add(`${limit}/${windowMs}`);
    const policy = flag('limit', () => makePolicy(undefined, limit, windowMs, algorithm, blockMs));
    // Digits become a number; anything else goes to the check as written, which names it.
    const burst = v.burst === undefined ? undefined : /^\d+$/.test(v.burst) ? Number(v.burst) : v.burst;
    return { ...policy, ...flag('burst', () => parseBucket({ limit, burst }, algorithm, windowMs)) };
  });
  const key = v.key === undefined ? ({ kind: 'ip' } as const) : flag('key', () => parseKeySpec(v.key));
  if (keyParts(key).some((p) => p.kind === 'jwt'))
    throw bad(
      `--key ${v.key} counts by a bearer token's claim, which must be verified first: set the key that signs the tokens in a config file's jwt section (jwt: { jwks: ./jwks.json }) and use --config.`,
    );
  if (keyParts(key).some((p) => p.kind === 'path' && p.group !== undefined))
    throw bad(
      `--key ${v.key} names a group of a path pattern, which only a config file's rule has (match: { pathPattern }); key by segment (path:N) here.`,
    );
  const storeSettings: StoreSettings = { ...DEFAULT_STORE, ...store };
  if (storeSettings.localFirst && storeSettings.kind !== 'redis')
    throw bad('--local-first needs --redis URL (or --redis-cluster, --redis-sentinel).');
  const leaseProblem = leaseConflict(storeSettings, o.workers ?? 0);
  if (leaseProblem !== undefined) throw bad(`--lease ${leaseProblem}`);
  const settings: GatewaySettings = {
    configFile: undefined,
    upstream: o.upstream,
    // The rate limit service alone takes a free port for its HTTP listener (decision endpoint and /_floodgate/ health),
    // so several of them run on one host with nothing but --grpc.
    listen: o.listen ?? (rlsOnly ? { host: '127.0.0.1', port: 0 } : DEFAULT_LISTEN),
    admin: o.admin,
    adminToken: o.adminToken,
    workers: o.workers ?? 0,
    store: storeSettings,
    trustProxy: o.trustProxy ?? false,
    trustProxyGiven: o.trustProxy !== undefined,
    headers: o.headers ?? ['ietf'],
    inMemoryBlock: true,
    proxy: DEFAULT_PROXY,
    decisionPath: o.decisionPath ?? DEFAULT_DECISION_PATH,
    readiness: o.readiness ?? DEFAULT_READINESS,
    drainTimeoutMs: o.drainTimeoutMs ?? 30_000,
    logLevel: o.logLevel ?? 'info',
    watch: false,
    paths: DEFAULT_PATHS,
    plans: new Map(),
    ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }),
    ...(grpc.listen !== undefined && grpc.config !== undefined
      ? { grpc: { listen: grpc.listen, config: grpc.config, ...(grpc.tls === undefined ? {} : { tls: grpc.tls as GrpcTlsSettings }) } }
      : {}),
    rules: rlsOnly
      ? []
      : [
          {
            name: 'default',
            match: { methods: undefined, pathPrefix: undefined, pathPattern: undefined, hosts: undefined, headers: undefined },
            key,
            policies,
            shadow: v.shadow === true,
            final: false,
          },
        ],
  };
  return { kind: 'serve', configFile: undefined, overrides: o, settings };
}
