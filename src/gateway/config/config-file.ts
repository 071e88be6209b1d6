/** The gateway config file: YAML loading and strict validation, with errors that name the file, line and field. */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Document, LineCounter } from 'yaml';
import { describe } from '../../duration.js';
import { ErrorCode, FloodgateError, type ErrorCodeValue } from '../../errors.js';
import { loadYaml } from '../serve/optional-deps.js';
import { PATH_FIELDS, PATH_MODES, parseMode, parsePathPattern } from './path-config.js';
import {
  InvalidValue,
  leaseConflict,
  makePolicy,
  parseAlgorithm,
  parseBoolean,
  parseHeaderName,
  parseHeaders,
  parseKeySpec,
  parseLeaseMs,
  parseLimitSpec,
  parseListen,
  parseMs,
  parsePositiveInt,
  parseRedisUrl,
  parseStripHeaders,
  parseTrustProxy,
  parseUpgrades,
  parseUpstream,
} from './values.js';
import {
  DEFAULT_DECISION_PATH,
  DEFAULT_LISTEN,
  DEFAULT_PATHS,
  DEFAULT_PROXY,
  DEFAULT_READINESS,
  DEFAULT_STORE,
  FAILURE_POLICIES,
  LOG_LEVELS,
  type FailurePolicy,
  type GatewaySettings,
  type KeySettings,
  type LogLevel,
  type MatchSettings,
  type PathSettings,
  type PolicySettings,
  type ProxySettings,
  type ReadinessSettings,
  type RuleSettings,
  type StoreSettings,
} from './settings.js';

/** A config file problem, placed in the file. `code` is INVALID_CONFIG, CONFIG_SYNTAX or CONFIG_UNREADABLE. */
export class ConfigError extends FloodgateError {
  /** The file. */
  readonly file: string;
  /** 1-based line, when known. */
  readonly line: number | undefined;
  /** 1-based column, when known. */
  readonly column: number | undefined;
  /** Dotted path of the field, e.g. `rules[1].policies[0].limit`, when one is at fault. */
  readonly field: string | undefined;

  /** @param where - file, position and field; the message is prefixed with `file:line:column: field:` */
  constructor(
    code: ErrorCodeValue,
    where: { file: string; line?: number; column?: number; field?: string },
    message: string,
    cause?: unknown,
  ) {
    const position = where.line === undefined ? where.file : `${where.file}:${where.line}:${where.column ?? 1}`;
    super(code, `${position}: ${where.field === undefined ? '' : `${where.field}: `}${message}`, cause);
    this.name = 'ConfigError';
    this.file = where.file;
    this.line = where.line;
    this.column = where.column;
    this.field = where.field;
  }
}

/** Settings given on the command line; they win over the file's, on start and on every reload. */
export type SettingsOverrides = { -readonly [K in keyof GatewaySettings]?: GatewaySettings[K] } & {
  /** Partial store settings (e.g. only the URL from `--redis`). */
  storeOverrides?: Partial<StoreSettings>;
};

type Path = ReadonlyArray<string | number>;

/** Walks a parsed value, knowing how to place each path in the file. */
class Cursor {
  constructor(
    private readonly file: string,
    private readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
    private readonly yaml: typeof import('yaml'),
  ) {}

  /** Throws INVALID_CONFIG placed at `path` (its value, or the nearest part of it that exists). */
  fail(path: Path, message: string, cause?: unknown, atKey = false): never {
    const offset = this.offsetOf(path, atKey);
    const pos = offset === undefined ? undefined : this.lines.linePos(offset);
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      { file: this.file, line: pos?.line, column: pos?.col, field: fieldName(path) },
      message,
      cause,
    );
  }

  /** Runs `parse`; an InvalidValue or FloodgateError it throws is placed at `path`. */
  at<T>(path: Path, parse: () => T): T {
    try {
      return parse();
    } catch (error) {
      if (error instanceof InvalidValue || (error instanceof FloodgateError && !(error instanceof ConfigError))) {
        this.fail(path, error.message, error);
      }
      throw error;
    }
  }

  /** Where `path` starts in the file: its value, or its key when `atKey` (for fields that should not be there at all). */
  private offsetOf(path: Path, atKey: boolean): number | undefined {
    const { isMap, isSeq, isScalar } = this.yaml;
    let node: unknown = this.doc.contents;
    let offset: number | undefined = rangeStart(node);
    for (const [i, segment] of path.entries()) {
      if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && p.key.value === segment);
        if (pair === undefined) return offset;
        offset = rangeStart(pair.key) ?? offset;
        if (atKey && i === path.length - 1) return offset;
        node = pair.value;
        offset = rangeStart(node) ?? offset;
      } else if (isSeq(node) && typeof segment === 'number') {
        node = node.items[segment];
        offset = rangeStart(node) ?? offset;
      } else {
        return offset;
      }
    }
    return offset;
  }
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
  return range?.[0];
}

function fieldName(path: Path): string | undefined {
  if (path.length === 0) return undefined;
  let out = '';
  for (const s of path) out += typeof s === 'number' ? `[${s}]` : out === '' ? s : `.${s}`;
  return out;
}

type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks that `value` is a mapping with only `known` keys. */
function mapping(c: Cursor, path: Path, value: unknown, known: readonly string[]): Obj {
  if (!isObject(value)) c.fail(path, `must be a mapping (key: value lines); got ${describe(value)}.`);
  for (const key of Object.keys(value)) {
    if (!known.includes(key))
      c.fail([...path, key], `unknown field ${JSON.stringify(key)}; known fields here: ${known.join(', ')}.`, undefined, true);
  }
  return value;
}

const TOP_FIELDS = [
  'upstream',
  'listen',
  'admin',
  'workers',
  'store',
  'trustProxy',
  'headers',
  'inMemoryBlock',
  'proxy',
  'decisionPath',
  'readiness',
  'drainTimeout',
  'logLevel',
  'watch',
  'paths',
  'rules',
] as const;
const STORE_FIELDS = ['type', 'url', 'localFirst', 'lease', 'timeout', 'onFailure', 'prefix', 'maxKeys', 'overflowCells'] as const;
const PROXY_FIELDS = [
  'connectTimeout',
  'headersTimeout',
  'bodyTimeout',
  'idleTimeout',
  'connections',
  'maxHeaderSize',
  'clientHeadersTimeout',
  'clientRequestTimeout',
  'clientKeepAliveTimeout',
  'maxConnections',
  'upgrades',
  'requestBuffer',
  'minBodyRate',
  'clientWriteTimeout',
  'queueTimeout',
  'stripHeaders',
] as const;
const READINESS_FIELDS = ['upstream'] as const;
const RULE_FIELDS = ['name', 'match', 'key', 'policies', 'shadow', 'final'] as const;
const MATCH_FIELDS = ['method', 'methods', 'path', 'pathPattern', 'host', 'hosts', 'headers'] as const;
const KEY_FIELDS = ['header', 'fallbackToIp', 'maxLength', 'pattern', 'allowList'] as const;
const POLICY_FIELDS = ['name', 'limit', 'window', 'algorithm', 'blockDuration'] as const;
const RULE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const METHOD = /^[A-Z]+$/;

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

/**
 * Validates config text (YAML) as if read from `file`.
 * @throws ConfigError CONFIG_SYNTAX or INVALID_CONFIG
 */
export async function parseConfigText(text: string, file: string, overrides: SettingsOverrides = {}): Promise<GatewaySettings> {
  const yaml = await loadYaml();
  const lines = new yaml.LineCounter();
  const doc = yaml.parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  const problem = doc.errors[0];
  if (problem !== undefined) {
    const pos = lines.linePos(problem.pos[0]);
    const first = problem.message.split('\n')[0];
    throw new ConfigError(ErrorCode.CONFIG_SYNTAX, { file, line: pos.line, column: pos.col }, `not valid YAML: ${first}`, problem);
  }
  const c = new Cursor(file, doc, lines, yaml);
  const raw: unknown = doc.toJS();
  // An empty file is far more often a truncated write than a wish for a gateway without upstream or rules;
  // applied on reload it would turn the proxy off.
  if (raw === null || raw === undefined) {
    throw new ConfigError(ErrorCode.INVALID_CONFIG, { file }, 'the config file is empty (a truncated write?); nothing was applied.');
  }
  const top = mapping(c, [], raw, TOP_FIELDS);
  return validate(c, top, file, overrides);
}

function validate(c: Cursor, top: Obj, file: string, o: SettingsOverrides): GatewaySettings {
  const get = <T>(key: string, parse: (v: unknown) => T, fallback: T): T =>
    top[key] === undefined ? fallback : c.at([key], () => parse(top[key]));

  const upstream = o.upstream ?? get('upstream', parseUpstream, undefined);
  const listen = o.listen ?? get('listen', parseListen, DEFAULT_LISTEN);
  const admin = o.admin ?? get('admin', parseListen, undefined);
  const workers = o.workers ?? get('workers', (v) => parsePositiveInt(v, 256, true), 0);
  const trustProxy = o.trustProxy ?? get('trustProxy', parseTrustProxy, false);
  const headers = o.headers ?? get('headers', parseHeaders, ['ietf'] as const);
  const inMemoryBlock = o.inMemoryBlock ?? get('inMemoryBlock', parseBoolean, true);
  const decisionPath = o.decisionPath ?? get('decisionPath', parseDecisionPath, DEFAULT_DECISION_PATH);
  const drainTimeoutMs = o.drainTimeoutMs ?? get('drainTimeout', (v) => parseMs(v), 30_000);
  const logLevel = o.logLevel ?? get('logLevel', parseLogLevel, 'info');
  const watch = o.watch ?? get('watch', parseBoolean, true);
  const store = { ...storeSettings(c, top.store), ...o.storeOverrides };
  if (store.kind === 'redis' && store.url === undefined)
    c.fail(['store', 'url'], 'is required when store.type is redis, e.g. url: redis://127.0.0.1:6379.');
  if (store.localFirst && store.kind !== 'redis')
    c.fail(['store', 'localFirst'], 'needs the Redis store (store.type: redis or --redis URL); local-first spends a Redis quota locally.');
  const leaseProblem = leaseConflict(store, workers);
  if (leaseProblem !== undefined) c.fail(['store', 'lease'], leaseProblem);
  const proxy = proxySettings(c, top.proxy);
  const rules = o.rules ?? ruleList(c, top.rules, dirname(file));
  const readiness = o.readiness ?? readinessSettings(c, top.readiness);
  const paths = o.paths ?? pathSettings(c, top.paths);
  if (readiness.upstream && upstream === undefined)
    c.fail(['readiness', 'upstream'], 'needs an upstream to probe; remove it or set upstream.');
  return {
    configFile: file,
    upstream,
    listen,
    admin,
    workers,
    store,
    trustProxy,
    headers,
    inMemoryBlock,
    proxy,
    decisionPath,
    readiness,
    drainTimeoutMs,
    logLevel,
    watch,
    paths,
    rules,
  };
}

function pathSettings(c: Cursor, value: unknown): PathSettings {
  if (value === undefined) return DEFAULT_PATHS;
  const p = mapping(c, ['paths'], value, PATH_FIELDS);
  const at = <T>(key: string, parse: (v: unknown) => T, fallback: T): T =>
    p[key] === undefined ? fallback : c.at(['paths', key], () => parse(p[key]));
  return {
    caseSensitive: at('caseSensitive', parseBoolean, DEFAULT_PATHS.caseSensitive),
    escapedSlashes: at('escapedSlashes', (v) => parseMode<'escapedSlashes'>(v, PATH_MODES.escapedSlashes), DEFAULT_PATHS.escapedSlashes),
    semicolons: at('semicolons', (v) => parseMode<'semicolons'>(v, PATH_MODES.semicolons), DEFAULT_PATHS.semicolons),
    doubleEncoding: at('doubleEncoding', (v) => parseMode<'doubleEncoding'>(v, PATH_MODES.doubleEncoding), DEFAULT_PATHS.doubleEncoding),
  };
}

function readinessSettings(c: Cursor, value: unknown): ReadinessSettings {
  if (value === undefined) return DEFAULT_READINESS;
  const r = mapping(c, ['readiness'], value, READINESS_FIELDS);
  return {
    upstream: r.upstream === undefined ? DEFAULT_READINESS.upstream : c.at(['readiness', 'upstream'], () => parseBoolean(r.upstream)),
  };
}

/** Parses a decision endpoint path, or `false`. */
export function parseDecisionPath(value: unknown): string | false {
  if (value === false) return false;
  if (typeof value !== 'string' || !/^\/[\x21-\x7e]*$/.test(value) || value.includes('?')) {
    throw new InvalidValue(
      `must be a path such as "/_floodgate/decide", or false to turn the decision endpoint off; got ${describe(value)}.`,
    );
  }
  return value;
}

/** Parses a log level. */
export function parseLogLevel(value: unknown): LogLevel {
  if (!LOG_LEVELS.includes(value as LogLevel)) throw new InvalidValue(`must be one of ${LOG_LEVELS.join(', ')}; got ${describe(value)}.`);
  return value as LogLevel;
}

/** Parses a store failure policy. */
export function parseFailurePolicy(value: unknown): FailurePolicy {
  if (!FAILURE_POLICIES.includes(value as FailurePolicy)) {
    throw new InvalidValue(`must be one of ${FAILURE_POLICIES.join(', ')}; got ${describe(value)}.`);
  }
  return value as FailurePolicy;
}

function storeSettings(c: Cursor, value: unknown): StoreSettings {
  if (value === undefined) return DEFAULT_STORE;
  const s = mapping(c, ['store'], value, STORE_FIELDS);
  const at = <T>(key: string, parse: (v: unknown) => T, fallback: T): T =>
    s[key] === undefined ? fallback : c.at(['store', key], () => parse(s[key]));
  const kind = at(
    'type',
    (v) => {
      if (v !== 'memory' && v !== 'redis') throw new InvalidValue(`must be "memory" or "redis"; got ${describe(v)}.`);
      return v;
    },
    s.url === undefined ? 'memory' : 'redis',
  ) as StoreSettings['kind'];
  const url = at('url', parseRedisUrl, undefined);
  if (url !== undefined && kind === 'memory') c.fail(['store', 'url'], 'is only used with type: redis; remove it or set type: redis.');
  return {
    kind,
    url,
    localFirst: at('localFirst', parseBoolean, false),
    leaseMs: at('lease', parseLeaseMs, 0),
    timeoutMs: at('timeout', (v) => parseMs(v), DEFAULT_STORE.timeoutMs),
    onFailure: at('onFailure', parseFailurePolicy, DEFAULT_STORE.onFailure),
    prefix: at(
      'prefix',
      (v) => {
        if (typeof v !== 'string' || !/^[\x21-\x7e]{1,64}$/.test(v))
          throw new InvalidValue(`must be 1–64 printable characters without spaces; got ${describe(v)}.`);
        return v;
      },
      DEFAULT_STORE.prefix,
    ),
    maxKeys: at('maxKeys', (v) => parsePositiveInt(v, 100_000_000), DEFAULT_STORE.maxKeys),
    overflowCells: at(
      'overflowCells',
      (v) => {
        const n = parsePositiveInt(v, 2 ** 26);
        if (n < 4) throw new InvalidValue(`must be at least 4 (the sketch has 4 rows); got ${n}.`);
        return n;
      },
      DEFAULT_STORE.overflowCells,
    ),
  };
}

function proxySettings(c: Cursor, value: unknown): ProxySettings {
  if (value === undefined) return DEFAULT_PROXY;
  const p = mapping(c, ['proxy'], value, PROXY_FIELDS);
  const ms = (key: string, fallback: number, allowZero = false): number =>
    p[key] === undefined ? fallback : c.at(['proxy', key], () => parseMs(p[key], allowZero));
  const int = (key: string, fallback: number, min: number, max: number): number =>
    p[key] === undefined
      ? fallback
      : c.at(['proxy', key], () => {
          const n = parsePositiveInt(p[key], max);
          if (n < min) throw new InvalidValue(`must be at least ${min}; got ${n}.`);
          return n;
        });
  const out: ProxySettings = {
    connectTimeoutMs: ms('connectTimeout', DEFAULT_PROXY.connectTimeoutMs),
    headersTimeoutMs: ms('headersTimeout', DEFAULT_PROXY.headersTimeoutMs),
    bodyTimeoutMs: ms('bodyTimeout', DEFAULT_PROXY.bodyTimeoutMs, true),
    idleTimeoutMs: ms('idleTimeout', DEFAULT_PROXY.idleTimeoutMs),
    connections: int('connections', DEFAULT_PROXY.connections, 1, 65_536),
    maxHeaderSize: int('maxHeaderSize', DEFAULT_PROXY.maxHeaderSize, 1024, 1_048_576),
    clientHeadersTimeoutMs: ms('clientHeadersTimeout', DEFAULT_PROXY.clientHeadersTimeoutMs),
    clientRequestTimeoutMs: ms('clientRequestTimeout', DEFAULT_PROXY.clientRequestTimeoutMs, true),
    clientKeepAliveTimeoutMs: ms('clientKeepAliveTimeout', DEFAULT_PROXY.clientKeepAliveTimeoutMs),
    maxConnections: int('maxConnections', DEFAULT_PROXY.maxConnections, 1, 1_000_000),
    upgrades: p.upgrades === undefined ? DEFAULT_PROXY.upgrades : c.at(['proxy', 'upgrades'], () => parseUpgrades(p.upgrades)),
    requestBuffer:
      p.requestBuffer === undefined
        ? DEFAULT_PROXY.requestBuffer
        : c.at(['proxy', 'requestBuffer'], () => parsePositiveInt(p.requestBuffer, 64 * 1_048_576, true)),
    minBodyRate:
      p.minBodyRate === undefined
        ? DEFAULT_PROXY.minBodyRate
        : c.at(['proxy', 'minBodyRate'], () => parsePositiveInt(p.minBodyRate, 1_073_741_824, true)),
    clientWriteTimeoutMs: ms('clientWriteTimeout', DEFAULT_PROXY.clientWriteTimeoutMs, true),
    queueTimeoutMs: ms('queueTimeout', DEFAULT_PROXY.queueTimeoutMs, true),
    stripHeaders:
      p.stripHeaders === undefined ? DEFAULT_PROXY.stripHeaders : c.at(['proxy', 'stripHeaders'], () => parseStripHeaders(p.stripHeaders)),
  };
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if (out.clientRequestTimeoutMs > 0 && out.clientHeadersTimeoutMs > out.clientRequestTimeoutMs) {
    c.fail(
      ['proxy', p.clientHeadersTimeout === undefined ? 'clientRequestTimeout' : 'clientHeadersTimeout'],
      `clientHeadersTimeout (${out.clientHeadersTimeoutMs} ms) must not exceed clientRequestTimeout (${out.clientRequestTimeoutMs} ms).`,
    );
  }
  return out;
}

function ruleList(c: Cursor, value: unknown, baseDir: string): RuleSettings[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) c.fail(['rules'], `must be a list of rules (lines starting with "- "); got ${describe(value)}.`);
  const names = new Set<string>();
  return value.map((entry, i) => {
    const rule = ruleSettings(c, ['rules', i], entry, i, baseDir);
    if (names.has(rule.name))
      c.fail(
        ['rules', i, 'name'],
        `two rules are named ${JSON.stringify(rule.name)}; rule names must be unique (they name metrics and store keys).`,
      );
    names.add(rule.name);
    return rule;
  });
}

function ruleSettings(c: Cursor, path: Path, value: unknown, index: number, baseDir: string): RuleSettings {
  const r = mapping(c, path, value, RULE_FIELDS);
  const name =
    r.name === undefined
      ? `rule-${index}`
      : c.at([...path, 'name'], () => {
          if (typeof r.name !== 'string' || !RULE_NAME.test(r.name)) {
            throw new InvalidValue(`must be 1–64 letters, digits, ".", "_" or "-"; got ${describe(r.name)}.`);
          }
          return r.name;
        });
  const key =
    r.key === undefined
      ? ({ kind: 'ip' } as const)
      : isObject(r.key)
        ? keyObject(c, [...path, 'key'], r.key, baseDir)
        : c.at([...path, 'key'], () => parseKeySpec(r.key));
  const shadow = r.shadow === undefined ? false : c.at([...path, 'shadow'], () => parseBoolean(r.shadow));
  const final = r.final === undefined ? false : c.at([...path, 'final'], () => parseBoolean(r.final));
  if (final && shadow) c.fail([...path, 'final'], 'a shadow rule never ends the list (it only reports); remove final or shadow.');
  if (r.policies === undefined) c.fail(path, 'a rule needs policies, e.g. policies: ["3/5s"] or policies: [{ limit: 3, window: 5s }].');
  if (!Array.isArray(r.policies) || r.policies.length === 0)
    c.fail([...path, 'policies'], `must be a non-empty list of policies; got ${describe(r.policies)}.`);
  const policies = r.policies.map((p, i) => policySettings(c, [...path, 'policies', i], p));
  const seen = new Set<string>();
  policies.forEach((p, i) => {
    const label = p.name ?? `${p.limit}/${p.windowMs}`;
    if (seen.has(label)) c.fail([...path, 'policies', i], `duplicates another policy of this rule; give each a distinct name or limit.`);
    seen.add(label);
  });
  return { name, match: matchSettings(c, [...path, 'match'], r.match), key, policies, shadow, final };
}

function policySettings(c: Cursor, path: Path, value: unknown): PolicySettings {
  if (typeof value === 'string') {
    const { limit, windowMs } = c.at(path, () => parseLimitSpec(value));
    return makePolicy(undefined, limit, windowMs, 'fixed-window', 0);
  }
  const p = mapping(c, path, value, POLICY_FIELDS);
  if (p.limit === undefined) c.fail(path, 'a policy needs a limit, e.g. { limit: 3, window: 5s }.');
  if (p.window === undefined) c.fail(path, 'a policy needs a window, e.g. { limit: 3, window: 5s }.');
  const limit = c.at([...path, 'limit'], () => parsePositiveInt(p.limit));
  const windowMs = c.at([...path, 'window'], () => parseMs(p.window));
  const algorithm = p.algorithm === undefined ? 'fixed-window' : c.at([...path, 'algorithm'], () => parseAlgorithm(p.algorithm));
  const blockMs = p.blockDuration === undefined ? 0 : c.at([...path, 'blockDuration'], () => parseMs(p.blockDuration));
  const name =
    p.name === undefined
      ? undefined
      : c.at([...path, 'name'], () => {
          if (typeof p.name !== 'string' || p.name === '') throw new InvalidValue(`must be a non-empty string; got ${describe(p.name)}.`);
          return p.name;
        });
  return c.at(path, () => makePolicy(name, limit, windowMs, algorithm, blockMs));
}

function matchSettings(c: Cursor, path: Path, value: unknown): MatchSettings {
  if (value === undefined)
    return { methods: undefined, pathPrefix: undefined, pathPattern: undefined, hosts: undefined, headers: undefined };
  const m = mapping(c, path, value, MATCH_FIELDS);
  if (m.method !== undefined && m.methods !== undefined) c.fail([...path, 'methods'], 'give either method or methods, not both.');
  if (m.host !== undefined && m.hosts !== undefined) c.fail([...path, 'hosts'], 'give either host or hosts, not both.');
  const methodKey = m.method !== undefined ? 'method' : 'methods';
  const methods =
    m[methodKey] === undefined
      ? undefined
      : c.at([...path, methodKey], () =>
          stringList(m[methodKey], (s) => {
            const up = s.toUpperCase();
            if (!METHOD.test(up)) throw new InvalidValue(`must be HTTP methods such as GET or POST; got ${describe(s)}.`);
            return up;
          }),
        );
  const hostKey = m.host !== undefined ? 'host' : 'hosts';
  const hosts =
    m[hostKey] === undefined
      ? undefined
      : c.at([...path, hostKey], () =>
          stringList(m[hostKey], (s) => {
            if (!/^(\*\.)?[A-Za-z0-9.-]+$/.test(s))
              throw new InvalidValue(`must be host names such as "api.example.com" or "*.example.com" (no port); got ${describe(s)}.`);
            // A fully qualified name's trailing dot names the same host; requests are matched without it (see canonicalHost).
            return s.toLowerCase().replace(/\.+$/, '');
          }),
        );
  const pathPrefix =
    m.path === undefined
      ? undefined
      : c.at([...path, 'path'], () => {
          if (typeof m.path !== 'string' || !m.path.startsWith('/'))
            throw new InvalidValue(`must be a path prefix starting with "/", e.g. "/api/"; got ${describe(m.path)}.`);
          return m.path;
        });
  const pathPattern = m.pathPattern === undefined ? undefined : c.at([...path, 'pathPattern'], () => parsePathPattern(m.pathPattern));
  const headers =
    m.headers === undefined
      ? undefined
      : c.at([...path, 'headers'], () => {
          if (!isObject(m.headers))
            throw new InvalidValue(
              `must map header names to a value or true (present), e.g. { x-tenant: acme }; got ${describe(m.headers)}.`,
            );
          return Object.entries(m.headers).map(([name, v]) => {
            const header = parseHeaderName(name);
            if (v === true) return [header, true] as const;
            if (typeof v === 'string' || typeof v === 'number') return [header, String(v)] as const;
            throw new InvalidValue(`header ${name} must map to a value or true (present); got ${describe(v)}.`);
          });
        });
  return { methods, pathPrefix, pathPattern, hosts, headers };
}

function stringList(value: unknown, each: (s: string) => string): string[] {
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0) throw new InvalidValue('must not be empty.');
  return list.map((s) => {
    if (typeof s !== 'string') throw new InvalidValue(`must be a string or a list of strings; got ${describe(s)}.`);
    return each(s);
  });
}

/** The mapping form of a rule's key: a header, with the validation its values must pass before they are counted. */
function keyObject(c: Cursor, path: Path, k: Obj, baseDir: string): KeySettings {
  mapping(c, path, k, KEY_FIELDS);
  if (k.header === undefined)
    c.fail(path, 'a key mapping needs header, e.g. { header: x-api-key, maxLength: 64 }; for the client address write key: ip.');
  const header = c.at([...path, 'header'], () => parseHeaderName(k.header));
  const fallbackToIp = k.fallbackToIp === undefined ? false : c.at([...path, 'fallbackToIp'], () => parseBoolean(k.fallbackToIp));
  const maxLength = k.maxLength === undefined ? undefined : c.at([...path, 'maxLength'], () => parsePositiveInt(k.maxLength, 8192));
  const pattern =
    k.pattern === undefined
      ? undefined
      : c.at([...path, 'pattern'], () => {
          if (typeof k.pattern !== 'string')
            throw new InvalidValue(`must be a regular expression as a string, e.g. "^[A-Za-z0-9_-]{20,64}$"; got ${describe(k.pattern)}.`);
          // Anchored, so that "[a-z]+" cannot admit "abc<anything>" by matching a part of it.
          try {
            return new RegExp(`^(?:${k.pattern})$`);
          } catch (error) {
            throw new InvalidValue(`is not a valid regular expression: ${(error as Error).message}`);
          }
        });
  let allowList: Set<string> | undefined;
  let allowListFile: string | undefined;
  if (k.allowList !== undefined) {
    allowListFile = c.at([...path, 'allowList'], () => {
      if (typeof k.allowList !== 'string' || k.allowList === '')
        throw new InvalidValue(`must be the path of a file with one key per line; got ${describe(k.allowList)}.`);
      return resolve(baseDir, k.allowList);
    });
    let text: string;
    try {
      text = readFileSync(allowListFile, 'utf8');
    } catch (error) {
      c.fail(
        [...path, 'allowList'],
        `cannot read ${allowListFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
        error,
      );
    }
    allowList = new Set();
    for (const line of text.split(/\r?\n/)) {
      const entry = line.trim();
      if (entry !== '' && !entry.startsWith('#')) allowList.add(entry);
    }
    if (allowList.size === 0)
      c.fail([...path, 'allowList'], `${allowListFile} lists no key (one per line; # starts a comment): every request would be refused.`);
  }
  const validation =
    maxLength === undefined && pattern === undefined && allowList === undefined
      ? undefined
      : { maxLength, pattern, allowList, allowListFile };
  return { kind: 'header', header, fallbackToIp, ...(validation === undefined ? {} : { validation }) };
}
