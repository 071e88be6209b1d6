/** The config file's store, proxy, paths and readiness sections: each field checked and placed, defaults filled in. */
import { describeValue } from '../../core/describe-value.js';
import { PATH_FIELDS, PATH_MODES, parseMode } from './path-config.js';
import {
  InvalidValue,
  parseBoolean,
  parseLeaseMs,
  parseMs,
  parsePositiveInt,
  parseRedisUrl,
  parseStripHeaders,
  parseUpgrades,
  parseFailurePolicy,
} from './values.js';
import {
  DEFAULT_PATHS,
  DEFAULT_PROXY,
  DEFAULT_READINESS,
  DEFAULT_STORE,
  type PathSettings,
  type ProxySettings,
  type ReadinessSettings,
  type StoreSettings,
} from './settings.js';
import { Cursor, mapping } from './yaml-cursor.js';
import { isAbsolute, resolve } from 'node:path';
import { REDIS_STORE_FIELDS, redisConnection } from './redis-config.js';

const STORE_FIELDS = [
  'type',
  'url',
  'localFirst',
  'lease',
  'timeout',
  'onFailure',
  'prefix',
  'maxKeys',
  'overflowCells',
  'snapshotFile',
  'snapshotEvery',
  'snapshotOnError',
  'table',
  'unlogged',
  ...REDIS_STORE_FIELDS,
] as const;
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
  'listenSockets',
  'upgrades',
  'requestBuffer',
  'minBodyRate',
  'clientWriteTimeout',
  'minResponseRate',
  'responseTimeout',
  'requestBufferTotal',
  'queueTimeout',
  'stripHeaders',
] as const;
const READINESS_FIELDS = ['upstream', 'store'] as const;

/** The `paths` section, with its defaults. */
export function pathSettings(c: Cursor, value: unknown): PathSettings {
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

/** The `readiness` section, with its defaults. */
export function readinessSettings(c: Cursor, value: unknown): ReadinessSettings {
  if (value === undefined) return DEFAULT_READINESS;
  const r = mapping(c, ['readiness'], value, READINESS_FIELDS);
  return {
    upstream: r.upstream === undefined ? DEFAULT_READINESS.upstream : c.at(['readiness', 'upstream'], () => parseBoolean(r.upstream)),
    ...(r.store === undefined ? {} : { store: c.at(['readiness', 'store'], () => parseBoolean(r.store)) }),
  };
}

/**
 * The `store` section, with its defaults.
 * @param dir - where its relative files (passwordFile, tls) are looked for: the config file's directory
 */
export function storeSettings(c: Cursor, value: unknown, dir = process.cwd()): StoreSettings {
  if (value === undefined) return DEFAULT_STORE;
  const s = mapping(c, ['store'], value, STORE_FIELDS);
  const at = <T>(key: string, parse: (v: unknown) => T, fallback: T): T =>
    s[key] === undefined ? fallback : c.at(['store', key], () => parse(s[key]));
  const kind = at(
    'type',
    (v) => {
      if (v !== 'memory' && v !== 'redis' && v !== 'postgres')
        throw new InvalidValue(`must be "memory", "redis" or "postgres"; got ${describeValue(v)}.`);
      return v;
    },
    // A server to reach says which: a postgres:// URL PostgreSQL, any other Redis (`type` may be left out).
    s.url === undefined && s.cluster === undefined && s.sentinel === undefined
      ? 'memory'
      : typeof s.url === 'string' && /^postgres(ql)?:\/\//i.test(s.url)
        ? 'postgres'
        : 'redis',
  ) as StoreSettings['kind'];
  if (kind === 'postgres') return postgresStore(c, s, at);
  for (const field of ['table', 'unlogged'])
    if (s[field] !== undefined) c.fail(['store', field], 'is a setting of the PostgreSQL store (type: postgres).');
  const url = at('url', parseRedisUrl, undefined);
  if (url !== undefined && kind === 'memory') c.fail(['store', 'url'], 'is only used with type: redis; remove it or set type: redis.');
  const connection = redisConnection(c, s, dir);
  return {
    kind,
    url,
    ...(connection === undefined ? {} : { connection }),
    localFirst: at('localFirst', parseBoolean, false),
    leaseMs: at('lease', parseLeaseMs, 0),
    timeoutMs: at('timeout', (v) => parseMs(v), DEFAULT_STORE.timeoutMs),
    onFailure: at('onFailure', parseFailurePolicy, DEFAULT_STORE.onFailure),
    prefix: at('prefix', parsePrefix, DEFAULT_STORE.prefix),
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
    ...snapshotSettings(c, s, kind, dir),
  };
}

/** `store.prefix`: the namespace of the gateway's keys in any store. */
function parsePrefix(v: unknown): string {
  if (typeof v !== 'string' || !/^[\x21-\x7e]{1,64}$/.test(v))
    throw new InvalidValue(`must be 1–64 printable characters without spaces; got ${describeValue(v)}.`);
  // On a Redis Cluster, braces in a key choose its slot: the prefix's would put every counter on one master.
  if (/[{}]/.test(v))
    throw new InvalidValue(`must not hold { or } (on a Redis Cluster they would pick one slot for every key); got ${describeValue(v)}.`);
  return v;
}

/** The fields of the store section the PostgreSQL store takes (the others are the memory store's or Redis's). */
const POSTGRES_FIELDS = new Set(['type', 'url', 'table', 'unlogged', 'timeout', 'onFailure', 'prefix']);

/**
 * `store: { type: postgres, url: postgres://USER@HOST:5432/DB, table, unlogged }`: the shared store of apps that run
 * PostgreSQL and no Redis (floodgate/postgres's PostgresStore, through a pool of node-postgres connections). The
 * password comes from the URL or, better, node-postgres's own PGPASSWORD (never written in the file).
 */
function postgresStore(
  c: Cursor,
  s: Record<string, unknown>,
  at: <T>(key: string, parse: (v: unknown) => T, fallback: T) => T,
): StoreSettings {
  for (const field of Object.keys(s))
    if (!POSTGRES_FIELDS.has(field)) c.fail(['store', field], 'is not a setting of the PostgreSQL store (type: postgres).');
  const url = s.url;
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\/[^/]/i.test(url))
    c.fail(['store', 'url'], `must be the PostgreSQL connection URL, e.g. postgres://floodgate@db:5432/app; got ${describeValue(url)}.`);
  const table = at(
    'table',
    (v) => {
      if (typeof v !== 'string' || !/^([a-z_][a-z0-9_]{0,39}\.)?[a-z_][a-z0-9_]{0,39}$/.test(v))
        throw new InvalidValue(`must be a table name like floodgate_counters or app.rate_limits; got ${describeValue(v)}.`);
      return v;
    },
    undefined,
  );
  return {
    ...DEFAULT_STORE,
    kind: 'postgres',
    url,
    postgres: { table, unlogged: at('unlogged', parseBoolean, false) },
    timeoutMs: at('timeout', (v) => parseMs(v), DEFAULT_STORE.timeoutMs),
    onFailure: at('onFailure', parseFailurePolicy, DEFAULT_STORE.onFailure),
    prefix: at('prefix', parsePrefix, DEFAULT_STORE.prefix),
  };
}

/** Default `store.snapshotEvery`: what a crash may lose at most, against the cost of writing every table. */
const DEFAULT_SNAPSHOT_EVERY_MS = 30_000;

/** `store.snapshotFile`, `snapshotEvery`, `snapshotOnError`: the memory store's snapshots; nothing when no file is named. */
function snapshotSettings(
  c: Cursor,
  s: Record<string, unknown>,
  kind: StoreSettings['kind'],
  dir: string,
): { snapshot?: StoreSettings['snapshot'] } {
  if (s.snapshotFile === undefined) {
    for (const field of ['snapshotEvery', 'snapshotOnError'])
      if (s[field] !== undefined) c.fail(['store', field], 'needs snapshotFile, the file the snapshots are written to.');
    return {};
  }
  const file = s.snapshotFile;
  if (typeof file !== 'string' || file === '') c.fail(['store', 'snapshotFile'], `must be a file path; got ${describeValue(file)}.`);
  if (kind !== 'memory')
    c.fail(['store', 'snapshotFile'], 'keeps the embedded memory store across restarts; Redis keeps its own counts (remove it).');
  const everyMs =
    s.snapshotEvery === undefined ? DEFAULT_SNAPSHOT_EVERY_MS : c.at(['store', 'snapshotEvery'], () => parseMs(s.snapshotEvery));
  if (everyMs < 1000) c.fail(['store', 'snapshotEvery'], `must be at least 1s (each writes every table); got ${everyMs} ms.`);
  const onError = s.snapshotOnError ?? 'exit';
  if (onError !== 'exit' && onError !== 'start-empty')
    c.fail(
      ['store', 'snapshotOnError'],
      `must be "exit" (refuse to start on a snapshot that cannot be restored, the default) or "start-empty" (log it, move it aside, start with no counts); got ${describeValue(onError)}.`,
    );
  return { snapshot: { file: isAbsolute(file) ? file : resolve(dir, file), everyMs, onError } };
}

/** The `proxy` section, with its defaults. */
export function proxySettings(c: Cursor, value: unknown): ProxySettings {
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
    listenSockets:
      p.listenSockets === undefined || p.listenSockets === 'auto' ? DEFAULT_PROXY.listenSockets : int('listenSockets', 1, 1, 64),
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
    minResponseRate:
      p.minResponseRate === undefined
        ? DEFAULT_PROXY.minResponseRate
        : c.at(['proxy', 'minResponseRate'], () => parsePositiveInt(p.minResponseRate, 1_073_741_824, true)),
    responseTimeoutMs: ms('responseTimeout', DEFAULT_PROXY.responseTimeoutMs, true),
    requestBufferTotal:
      p.requestBufferTotal === undefined
        ? DEFAULT_PROXY.requestBufferTotal
        : c.at(['proxy', 'requestBufferTotal'], () => parsePositiveInt(p.requestBufferTotal, 2 ** 40, true)),
    queueTimeoutMs: ms('queueTimeout', DEFAULT_PROXY.queueTimeoutMs, true),
    stripHeaders:
      p.stripHeaders === undefined ? DEFAULT_PROXY.stripHeaders : c.at(['proxy', 'stripHeaders'], () => parseStripHeaders(p.stripHeaders)),
  };
  // A budget smaller than one buffered body would stream every body of the sizes requestBuffer was raised for.
  if (out.requestBufferTotal > 0 && out.requestBufferTotal < out.requestBuffer) {
    c.fail(
      ['proxy', p.requestBufferTotal === undefined ? 'requestBuffer' : 'requestBufferTotal'],
      `requestBufferTotal (${out.requestBufferTotal} bytes) must be at least requestBuffer (${out.requestBuffer} bytes), or 0 to buffer no body.`,
    );
  }
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if (out.clientRequestTimeoutMs > 0 && out.clientHeadersTimeoutMs > out.clientRequestTimeoutMs) {
    c.fail(
      ['proxy', p.clientHeadersTimeout === undefined ? 'clientRequestTimeout' : 'clientHeadersTimeout'],
      `clientHeadersTimeout (${out.clientHeadersTimeoutMs} ms) must not exceed clientRequestTimeout (${out.clientRequestTimeoutMs} ms).`,
    );
  }
  return out;
}
