/** The gateway config file: YAML loading and strict validation, with errors that name the file, line and field. */
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ErrorCode } from '../../index.js';
import {
  leaseConflict,
  parseBoolean,
  parseHeaders,
  parseListen,
  parseMs,
  parsePositiveInt,
  parseRetryAfterJitterMs,
  parseTrustProxy,
  parseUpstream,
  parseDecisionPath,
  parseLogLevel,
} from './values.js';
import { DEFAULT_DECISION_PATH, DEFAULT_LISTEN, type GatewaySettings, type GrpcSettings, type StoreSettings } from './settings.js';
import { ConfigError } from './config-error.js';
import { mapping, readYaml, type Cursor, type Obj } from './yaml-cursor.js';
import { pathSettings, readinessSettings, storeSettings, proxySettings } from './sections.js';
import { ruleList } from './rule-sections.js';
import { planSettings } from './override-config.js';
import { adminSection } from './admin-config.js';
import { telemetrySettings } from './telemetry-config.js';
import { overloadSettings } from './overload-config.js';
import { grpcSection, GRPC_WORKERS } from './grpc-config.js';
import { jwtSection, UNVERIFIED_FIELD } from './jwt-config.js';
import { keyParts } from './key-settings.js';
import { loadJose } from '../runtime/optional-deps.js';

/** Settings given on the command line; they win over the file's, on start and on every reload. */
export type SettingsOverrides = { -readonly [K in keyof GatewaySettings]?: GatewaySettings[K] } & {
  /** Partial store settings (e.g. only the URL from `--redis`). */
  storeOverrides?: Partial<StoreSettings>;
  /** Partial rate limit service settings (`--grpc`, `--rls-config`). */
  grpcOverrides?: Partial<GrpcSettings>;
};

const TOP_FIELDS = [
  'upstream',
  'listen',
  'admin',
  'workers',
  'store',
  'trustProxy',
  'headers',
  'retryAfterJitter',
  'inMemoryBlock',
  'proxy',
  'decisionPath',
  'readiness',
  'drainTimeout',
  'logLevel',
  'watch',
  'paths',
  'plans',
  'rules',
  'telemetry',
  'grpc',
  'jwt',
  'overload',
] as const;

/**
 * Reads and validates a config file, then applies `overrides` (the CLI's
 * flags) on top.
 *
 * @throws ConfigError CONFIG_UNREADABLE, CONFIG_SYNTAX or INVALID_CONFIG; MISSING_DEPENDENCY without the yaml package
 */
export async function loadConfigFile(file: string, overrides: SettingsOverrides = {}): Promise<GatewaySettings> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(ErrorCode.CONFIG_UNREADABLE, { file }, `cannot read the config file: ${(error as Error).message}`, error);
  }
  return parseConfigText(text, file, overrides);
}

/** Options of {@link parseConfigText}. */
export interface ParseOptions {
  /**
   * Refuse a file without a `rules` key (INVALID_CONFIG), as `floodgate
   * serve`, `check` and reloads do: limiting is a gateway's only job, and
   * a file that forgot its rules would forward every request unlimited.
   * An explicit `rules: []` is accepted (with a warning where it runs, see
   * rule-warnings.ts).
   */
  readonly requireRules?: boolean;
}

/**
 * Validates config text (YAML) as if read from `file`.
 * @throws ConfigError CONFIG_SYNTAX or INVALID_CONFIG
 */
export async function parseConfigText(
  text: string,
  file: string,
  overrides: SettingsOverrides = {},
  options: ParseOptions = {},
): Promise<GatewaySettings> {
  const { cursor: c, value: raw } = await readYaml(text, file);
  // An empty file is far more often a truncated write than a wish for a gateway without upstream or rules;
  // applied on reload it would turn the proxy off.
  if (raw === null || raw === undefined) {
    throw new ConfigError(ErrorCode.INVALID_CONFIG, { file }, 'the config file is empty (a truncated write?); nothing was applied.');
  }
  // Each independent problem of the file is reported, not only the first (see Cursor.collect).
  const settings = c.collect(() => validate(c, mapping(c, [], raw, TOP_FIELDS), file, overrides, options.requireRules === true));
  // Loaded now, so a gateway without the package says so at start (and `check` too), not at the first token.
  if (settings.jwt !== undefined) await loadJose();
  return settings;
}

function validate(c: Cursor, top: Obj, file: string, o: SettingsOverrides, requireRules: boolean): GatewaySettings {
  const get = <T>(key: string, parse: (v: unknown) => T, fallback: T): T =>
    top[key] === undefined ? fallback : c.keep(() => c.at([key], () => parse(top[key])), fallback);

  const upstream = o.upstream ?? get('upstream', parseUpstream, undefined);
  const listen = o.listen ?? get('listen', parseListen, DEFAULT_LISTEN);
  const adminGiven = top.admin === undefined ? undefined : adminSection(c, top.admin, dirname(file));
  const admin = o.admin ?? adminGiven?.listen;
  const adminToken = o.adminToken ?? adminGiven?.token;
  const workers = o.workers ?? get('workers', (v) => parsePositiveInt(v, 256, true), 0);
  const trustProxy = o.trustProxy ?? get('trustProxy', parseTrustProxy, false);
  const headers = o.headers ?? get('headers', parseHeaders, ['ietf'] as const);
  const retryAfterJitterMs = get('retryAfterJitter', parseRetryAfterJitterMs, 0);
  const inMemoryBlock = o.inMemoryBlock ?? get('inMemoryBlock', parseBoolean, true);
  const decisionPath = o.decisionPath ?? get('decisionPath', parseDecisionPath, DEFAULT_DECISION_PATH);
  const drainTimeoutMs = o.drainTimeoutMs ?? get('drainTimeout', (v) => parseMs(v), 30_000);
  const logLevel = o.logLevel ?? get('logLevel', parseLogLevel, 'info');
  const watch = o.watch ?? get('watch', parseBoolean, true);
  const store = { ...storeSettings(c, top.store, dirname(file)), ...o.storeOverrides };
  if (store.kind === 'redis' && store.url === undefined && store.connection === undefined)
    c.fail(
      ['store', 'url'],
      'is required when store.type is redis, e.g. url: redis://127.0.0.1:6379 (or cluster: { nodes: [...] }, or sentinel: { name, sentinels: [...] }).',
    );
  if (store.localFirst && store.kind !== 'redis')
    c.fail(['store', 'localFirst'], 'needs the Redis store (store.type: redis or --redis URL); local-first spends a Redis quota locally.');
  if (adminToken !== undefined && admin === undefined)
    c.fail(
      ['admin'],
      'has a token but no listen address: the admin API runs only on the admin listener (e.g. admin: { listen: 127.0.0.1:9090, tokenFile: ./admin-token }).',
    );
  const leaseProblem = leaseConflict(store, workers);
  if (leaseProblem !== undefined) c.fail(['store', 'lease'], leaseProblem);
  const proxy = proxySettings(c, top.proxy);
  const overload = overloadSettings(c, top.overload, proxy.connections);
  if (overload !== undefined && upstream === undefined)
    c.fail(['overload'], 'protects the upstream, but there is none: set upstream, or remove overload.');
  const grpc = grpcSection(c, top.grpc, dirname(file), o.grpcOverrides);
  if (grpc !== undefined && workers > 0) c.fail(['grpc'], GRPC_WORKERS);
  // The rate limit service is a gateway's job of its own: its file may leave out the HTTP rules.
  if (requireRules && grpc === undefined && o.rules === undefined && top.rules === undefined)
    c.fail(
      ['rules'],
      'is missing, so every request would be forwarded without limits. Add rules, e.g. rules: [{ name: all, policies: ["100/1m"] }]; to forward without limits on purpose, write rules: [].',
    );
  const plans = planSettings(c, top.plans);
  const rules = o.rules ?? ruleList(c, top.rules, dirname(file), plans);
  if (upstream === undefined && o.rules === undefined) {
    const i = rules.findIndex((r) => r.concurrency !== undefined);
    if (i >= 0)
      c.fail(
        ['rules', i, 'concurrency'],
        "needs an upstream: without one the gateway only answers its decision endpoint, which decides before the response exists and so cannot hold a slot until it ends. Set upstream so the gateway proxies (and holds the slot while the response runs), or limit requests in flight in the proxy that calls the endpoint (nginx's limit_conn).",
      );
  }
  if (store.kind !== 'redis') {
    const i = rules.findIndex((r) => r.key.kind === 'header' && r.key.validation?.knownKeys !== undefined);
    if (i >= 0)
      c.fail(
        ['rules', i, 'key', 'allowList'],
        'names a Redis set, but the gateway has no Redis store: set store: { type: redis, url: redis://HOST:6379 } (or --redis URL), or list the keys in a file: allowList: ./api-keys.txt.',
      );
  }
  const jwt = jwtSection(c, top.jwt, dirname(file));
  if (jwt === undefined) {
    const at = jwtKeyAt(rules);
    if (at !== undefined)
      c.fail(
        at,
        `counts by a claim of the bearer token, which anyone can write unless it is verified: add a jwt section with the key that signs the tokens (jwt: { jwks: ./jwks.json }, publicKey: ./issuer.pem or secretFile: ./hmac-secret), or, knowing that a client can then pick its own key, jwt: { ${UNVERIFIED_FIELD}: true }.`,
      );
  }
  // --ready-upstream sets one field: the file's others stay.
  const readiness = { ...readinessSettings(c, top.readiness), ...o.readiness };
  const telemetry = o.telemetry ?? telemetrySettings(c, top.telemetry);
  const paths = o.paths ?? pathSettings(c, top.paths);
  if (readiness.upstream && upstream === undefined)
    c.fail(['readiness', 'upstream'], 'needs an upstream to probe; remove it or set upstream.');
  if (store.kind !== 'redis') {
    const i = rules.findIndex((r) => r.overrides?.redis !== undefined);
    if (i >= 0)
      c.fail(
        ['rules', i, 'overrides', 'redis'],
        'names a Redis hash, but the gateway has no Redis store: set store: { type: redis, url: redis://HOST:6379 } (or --redis URL), or list the overrides in the file: overrides: { keys: { KEY: PLAN } }.',
      );
  }
  return {
    plans,
    configFile: file,
    upstream,
    listen,
    admin,
    adminToken,
    ...(adminGiven?.hosts === undefined ? {} : { adminHosts: adminGiven.hosts }),
    workers,
    store,
    trustProxy,
    trustProxyGiven: o.trustProxy !== undefined || top.trustProxy !== undefined,
    headers,
    ...(retryAfterJitterMs > 0 ? { retryAfterJitterMs } : {}),
    inMemoryBlock,
    proxy,
    decisionPath,
    readiness,
    drainTimeoutMs,
    logLevel,
    watch,
    paths,
    rules,
    ...(telemetry === undefined ? {} : { telemetry }),
    ...(grpc === undefined ? {} : { grpc }),
    ...(jwt === undefined ? {} : { jwt }),
    ...(overload === undefined ? {} : { overload }),
  };
}

/** The config path of the first rule or policy key that reads a bearer token's claim, or undefined. */
function jwtKeyAt(rules: GatewaySettings['rules']): Array<string | number> | undefined {
  for (const [i, rule] of rules.entries()) {
    if (keyParts(rule.key).some((p) => p.kind === 'jwt')) return ['rules', i, 'key'];
    for (const [j, p] of rule.policies.entries())
      if (p.key !== undefined && keyParts(p.key).some((k) => k.kind === 'jwt')) return ['rules', i, 'policies', j, 'key'];
  }
  return undefined;
}
