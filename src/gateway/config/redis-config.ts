/** The store's Redis connection: Cluster seed nodes, Sentinel, ACL user, password from a file or env var, TLS files. */
/**
 * Shared by the config file's `store` section and the `--redis-*` flags. Files and environment variables are read
 * here, when the settings are, so `floodgate check` and a start both name a missing one; nothing here connects.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { describeValue } from '../../core/describe-value.js';
import { WarningCode, warnOnce } from '../../core/warnings.js';
import { InvalidValue, parseMs } from './values.js';
import {
  DEFAULT_REDIS_CONNECT_TIMEOUT_MS,
  type RedisConnection,
  type RedisNode,
  type RedisTlsSettings,
  type RedisTopology,
} from './settings.js';
import { mapping, type Cursor, type Obj, type Path } from './yaml-cursor.js';

/** The `store` fields this file reads (besides `url`). */
export const REDIS_STORE_FIELDS = [
  'cluster',
  'sentinel',
  'username',
  'password',
  'passwordFile',
  'passwordEnv',
  'tls',
  'connectTimeout',
] as const;
const CLUSTER_FIELDS = ['nodes'] as const;
const SENTINEL_FIELDS = ['name', 'sentinels', 'username', 'password', 'passwordFile', 'passwordEnv'] as const;
const TLS_FIELDS = ['ca', 'cert', 'key'] as const;

/** The default port of a node given without one: Redis's for Cluster nodes, Sentinel's for sentinels. */
const DEFAULT_PORT: Record<Exclude<RedisTopology, 'single'>, number> = { cluster: 6379, sentinel: 26379 };

/**
 * One `HOST:PORT` (or `[v6]:PORT`; the port may be left out). A `redis://`
 * URL is taken for its host and port, with a one-time warning: the list
 * holds addresses, and the URL's scheme and credentials would say nothing.
 * @param where - the field or flag, for the warning
 */
function parseRedisNode(value: unknown, topology: 'cluster' | 'sentinel', where: string): RedisNode {
  if (typeof value !== 'string' || value.trim() === '')
    throw new InvalidValue(`entries must be HOST:PORT such as "10.0.0.5:${DEFAULT_PORT[topology]}"; got ${describeValue(value)}.`);
  let text = value.trim();
  const url = /^(rediss?):\/\/(?:[^@/]*@)?([^/?#]+)/.exec(text);
  if (url !== null) {
    warnOnce(
      WarningCode.REDIS_URL_AS_NODE,
      `${where} lists ${url[1]}://…; a node list holds HOST:PORT, so ${url[2]} was used. Credentials go in username and passwordFile/passwordEnv, TLS in tls (rediss:// does not turn it on here).`,
      where,
    );
    text = url[2]!;
  }
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  const colon = text.lastIndexOf(':');
  const [host, port] =
    v6 !== null
      ? [v6[1]!, v6[2]]
      : colon < 0 || text.indexOf(':') !== colon
        ? [text, undefined]
        : [text.slice(0, colon), text.slice(colon + 1)];
  // An IPv6 address without brackets cannot be told from its port.
  if (host === '' || /[\s,/@]/.test(host) || (v6 === null && host.includes(':')))
    throw new InvalidValue(
      `entries must be HOST:PORT such as "10.0.0.5:${DEFAULT_PORT[topology]}" (an IPv6 address in brackets: "[::1]:${DEFAULT_PORT[topology]}"); got ${describeValue(value)}.`,
    );
  if (port === undefined) return { host, port: DEFAULT_PORT[topology] };
  const n = /^\d+$/.test(port) ? Number(port) : NaN;
  if (!(n >= 1 && n <= 65535)) throw new InvalidValue(`entries need a port from 1 to 65535; got ${describeValue(value)}.`);
  return { host, port: n };
}

/** A list of nodes: a YAML list, or one comma-separated string (as the flags take it). */
export function parseRedisNodes(value: unknown, topology: 'cluster' | 'sentinel', where: string): RedisNode[] {
  const items = typeof value === 'string' ? value.split(',') : value;
  if (!Array.isArray(items) || items.length === 0)
    throw new InvalidValue(
      `must list at least one HOST:PORT, e.g. [10.0.0.5:${DEFAULT_PORT[topology]}, 10.0.0.6:${DEFAULT_PORT[topology]}]; got ${describeValue(value)}.`,
    );
  const nodes = items.map((item) => parseRedisNode(item, topology, where));
  const seen = new Set<string>();
  for (const n of nodes) {
    const id = `${n.host}:${n.port}`;
    if (seen.has(id)) throw new InvalidValue(`lists ${id} twice.`);
    seen.add(id);
  }
  if (nodes.length === 1)
    warnOnce(
      WarningCode.ONE_SEED_NODE,
      topology === 'cluster'
        ? `${where} lists one node: a gateway starting while it is down cannot find the rest of the cluster. List two or three masters (any node will do; the others are discovered).`
        : `${where} lists one sentinel: Sentinel needs a quorum of several to fail over, and a gateway starting while this one is down cannot find the master. List every sentinel.`,
      where,
    );
  return nodes;
}

/** `NAME@HOST:PORT,HOST:PORT` (`--redis-sentinel`): the master's name and the sentinels. */
export function parseSentinelSpec(value: string, where: string): { name: string; nodes: RedisNode[] } {
  const at = value.indexOf('@');
  if (at <= 0)
    throw new InvalidValue(
      `must be MASTER@HOST:PORT,HOST:PORT such as "mymaster@10.0.0.5:26379,10.0.0.6:26379"; got ${describeValue(value)}.`,
    );
  return { name: checkMasterName(value.slice(0, at)), nodes: parseRedisNodes(value.slice(at + 1), 'sentinel', where) };
}

function checkMasterName(value: unknown): string {
  if (typeof value !== 'string' || !/^[\x21-\x7e]{1,128}$/.test(value))
    throw new InvalidValue(`must be the master's name the sentinels know (sentinel monitor NAME …); got ${describeValue(value)}.`);
  return value;
}

/** The contents of a secret's file, without one trailing newline (as `echo` writes it). */
export function readSecretFile(file: string, base: string, what: string): string {
  const path = isAbsolute(file) ? file : resolve(base, file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidValue(`cannot read the ${what} file ${JSON.stringify(path)}: ${(error as Error).message}`);
  }
  const secret = text.replace(/\r?\n$/, '');
  if (secret === '') throw new InvalidValue(`the ${what} file ${JSON.stringify(path)} is empty.`);
  return secret;
}

/** The value of environment variable `name`. */
export function readSecretEnv(name: unknown, what: string): string {
  if (typeof name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    throw new InvalidValue(`must name an environment variable, e.g. REDIS_PASSWORD; got ${describeValue(name)}.`);
  const value = process.env[name];
  if (value === undefined || value === '')
    throw new InvalidValue(`names ${name}, which is not set (or empty) here: export the ${what} in it.`);
  return value;
}

/** A PEM file's contents. */
export function readPemFile(file: unknown, base: string): string {
  if (typeof file !== 'string' || file === '') throw new InvalidValue(`must be the path of a PEM file; got ${describeValue(file)}.`);
  const path = isAbsolute(file) ? file : resolve(base, file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidValue(`cannot read ${JSON.stringify(path)}: ${(error as Error).message}`);
  }
  if (!text.includes('-----BEGIN ')) throw new InvalidValue(`${JSON.stringify(path)} holds no PEM block (-----BEGIN …).`);
  return text;
}

/** A password given by `passwordFile` or `passwordEnv` in mapping `o` at `path`; `password` itself is refused. */
function password(c: Cursor, path: Path, o: Obj, dir: string, what: string): string | undefined {
  if (o.password !== undefined)
    c.fail(
      [...path, 'password'],
      `is not read from the config file, which is shown, copied and committed: put the ${what} in a file (passwordFile: /run/secrets/redis-password) or an environment variable (passwordEnv: REDIS_PASSWORD).`,
    );
  if (o.passwordFile !== undefined && o.passwordEnv !== undefined)
    c.fail([...path, 'passwordEnv'], 'and passwordFile are both set; keep one.');
  if (o.passwordFile !== undefined) {
    const file = o.passwordFile;
    return c.at([...path, 'passwordFile'], () => {
      if (typeof file !== 'string' || file === '') throw new InvalidValue(`must be a file path; got ${describeValue(file)}.`);
      return readSecretFile(file, dir, what);
    });
  }
  if (o.passwordEnv !== undefined) return c.at([...path, 'passwordEnv'], () => readSecretEnv(o.passwordEnv, what));
  return undefined;
}

function username(c: Cursor, path: Path, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  return c.at(path, () => {
    if (typeof value !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(value))
      throw new InvalidValue(`must be the ACL user name; got ${describeValue(value)}.`);
    return value;
  });
}

/** The `tls` mapping: PEM files read now. */
function tlsSection(c: Cursor, value: unknown, dir: string): RedisTlsSettings {
  const path = ['store', 'tls'];
  // `tls: true`: TLS with the system's CAs and no client certificate.
  if (value === true) return { ca: undefined, cert: undefined, key: undefined };
  const t = mapping(c, path, value, TLS_FIELDS);
  const pem = (key: string): string | undefined =>
    t[key] === undefined ? undefined : c.at([...path, key], () => readPemFile(t[key], dir));
  const tls = { ca: pem('ca'), cert: pem('cert'), key: pem('key') };
  if ((tls.cert === undefined) !== (tls.key === undefined))
    c.fail(
      [...path, tls.cert === undefined ? 'key' : 'cert'],
      `needs ${tls.cert === undefined ? 'cert' : 'key'} too: a client certificate is a pair.`,
    );
  return tls;
}

/**
 * The Redis connection of the `store` mapping `s` (its url's companions),
 * or undefined when the store is reached by a URL alone.
 * @param dir - where relative files are looked for (the config file's directory)
 * @throws ConfigError INVALID_CONFIG naming the field
 */
export function redisConnection(c: Cursor, s: Obj, dir: string): RedisConnection | undefined {
  const extras = REDIS_STORE_FIELDS.filter((k) => s[k] !== undefined);
  if (extras.length === 0) return undefined;
  if (s.type === 'memory') c.fail(['store', extras[0]!], 'is only used with the Redis store; remove it or set type: redis.');
  if (s.cluster !== undefined && s.sentinel !== undefined)
    c.fail(['store', 'sentinel'], 'and cluster are both set: a store is either a Redis Cluster or a master found through Sentinel.');
  const reached = s.cluster !== undefined ? 'cluster' : s.sentinel !== undefined ? 'sentinel' : undefined;
  if (reached !== undefined && s.url !== undefined)
    c.fail(['store', 'url'], `and ${reached} are both set; keep one (url is for one Redis server).`);
  if (reached === undefined && s.url === undefined)
    c.fail(
      ['store'],
      `has ${extras[0]} but no server: set url (one Redis), cluster: { nodes: [...] }, or sentinel: { name, sentinels: [...] }.`,
    );
  let topology: RedisTopology = 'single';
  let nodes: RedisNode[] = [];
  let masterName: string | undefined;
  let sentinelUsername: string | undefined;
  let sentinelPassword: string | undefined;
  if (s.cluster !== undefined) {
    const k = mapping(c, ['store', 'cluster'], s.cluster, CLUSTER_FIELDS);
    if (k.nodes === undefined) c.fail(['store', 'cluster'], 'needs nodes, e.g. nodes: [10.0.0.5:6379, 10.0.0.6:6379].');
    topology = 'cluster';
    nodes = c.at(['store', 'cluster', 'nodes'], () => parseRedisNodes(k.nodes, 'cluster', 'store.cluster.nodes'));
  } else if (s.sentinel !== undefined) {
    const path = ['store', 'sentinel'];
    const k = mapping(c, path, s.sentinel, SENTINEL_FIELDS);
    if (k.name === undefined) c.fail(path, "needs name, the master's name the sentinels monitor (sentinel monitor NAME …).");
    if (k.sentinels === undefined) c.fail(path, 'needs sentinels, e.g. sentinels: [10.0.0.5:26379, 10.0.0.6:26379, 10.0.0.7:26379].');
    topology = 'sentinel';
    masterName = c.at([...path, 'name'], () => checkMasterName(k.name));
    nodes = c.at([...path, 'sentinels'], () => parseRedisNodes(k.sentinels, 'sentinel', 'store.sentinel.sentinels'));
    sentinelUsername = username(c, [...path, 'username'], k.username);
    sentinelPassword = password(c, path, k, dir, 'sentinel password');
  }
  const pass = password(c, ['store'], s, dir, 'Redis password');
  if (pass !== undefined && typeof s.url === 'string' && /^rediss?:\/\/[^@/]*:[^@/]*@/.test(s.url))
    c.fail(
      ['store', 'url'],
      `holds a password and ${s.passwordFile === undefined ? 'passwordEnv' : 'passwordFile'} gives one too; keep one.`,
    );
  return {
    topology,
    nodes,
    masterName,
    username: username(c, ['store', 'username'], s.username),
    password: pass,
    sentinelUsername,
    sentinelPassword,
    tls: s.tls === undefined ? undefined : tlsSection(c, s.tls, dir),
    connectTimeoutMs:
      s.connectTimeout === undefined
        ? DEFAULT_REDIS_CONNECT_TIMEOUT_MS
        : c.at(['store', 'connectTimeout'], () => parseMs(s.connectTimeout)),
    field: 'store',
  };
}
