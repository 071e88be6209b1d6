/** The rate limit service's config. */
/**
 * Envoyproxy/ratelimit YAML files (one domain each, nested descriptors) read into a descriptor tree per domain, with
 * errors at their line.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, ALGORITHMS, type Algorithm } from '../../index.js';
import { ConfigError } from '../config/config-error.js';
import { mapping, readYaml, type Cursor, type Path } from '../config/yaml-cursor.js';

/** The time units of envoyproxy/ratelimit's `rate_limit.unit`. */
export const RLS_UNITS = ['second', 'minute', 'hour', 'day', 'week', 'month', 'year'] as const;
/** One of {@link RLS_UNITS}. */
export type RlsUnit = (typeof RLS_UNITS)[number];

/** Each unit's length in seconds, as envoyproxy/ratelimit counts them (a month is 30 days, a year 365). */
export const UNIT_SECONDS: Readonly<Record<RlsUnit, number>> = {
  second: 1,
  minute: 60,
  hour: 3_600,
  day: 86_400,
  week: 604_800,
  month: 2_592_000,
  year: 31_536_000,
};

/**
 * Most entries in one request descriptor, and so most levels of the
 * descriptor tree: Envoy's route actions make a handful, and a request with
 * more is refused before its entries are kept anywhere.
 */
export const MAX_ENTRIES = 32;

/**
 * The largest `requests_per_unit` floodgate keeps exact per `unit`: limit ×
 * window (ms) must stay under 2^50 for every algorithm's counts. The config
 * loader refuses a larger limit at its line, and the service a larger limit
 * Envoy sends with a descriptor.
 */
export function maxRequestsPerUnit(unit: RlsUnit): number {
  return Math.floor(2 ** 50 / (UNIT_SECONDS[unit] * 1000));
}

/** A JSON-like value of a descriptor's `metadata` (what a google.protobuf.Struct holds). */
export type RlsMetadataValue = string | number | boolean | null | readonly RlsMetadataValue[] | RlsMetadata;
/** A descriptor's `metadata`: a mapping, returned in the response's dynamic metadata (see rls-metadata.ts). */
export interface RlsMetadata {
  readonly [field: string]: RlsMetadataValue;
}

/** A descriptor's `rate_limit`, with the descriptor's flags. */
export interface RlsLimit {
  /** Where it is in its domain, as envoyproxy/ratelimit names it: `domain.key_value.key2`. */
  readonly fullKey: string;
  /** The domain. */
  readonly domain: string;
  /** `requests_per_unit` (0 refuses every request, as there). */
  readonly requestsPerUnit: number;
  /** `unit`; undefined only when `unlimited`. */
  readonly unit: RlsUnit | undefined;
  /** `unlimited: true`: never limited, no store call. */
  readonly unlimited: boolean;
  /** `name`, which other limits' `replaces` refer to. */
  readonly name: string | undefined;
  /** `replaces`: the names of the limits this one replaces in a request where both apply. */
  readonly replaces: readonly string[];
  /** The descriptor's `shadow_mode`: decided and counted, but always answered OK. */
  readonly shadow: boolean;
  /** The descriptor's `quota_mode`: over its limit, it refuses the request only when every quota descriptor of the request is over (and it is counted on its own). */
  readonly quota: boolean;
  /** The descriptor's `detailed_metric`: metrics per full descriptor value. */
  readonly detailedMetric: boolean;
  /** floodgate's extension `algorithm`; `fixed-window` windows align to the clock as envoyproxy/ratelimit's do. */
  readonly algorithm: Algorithm;
  /** The descriptor's `metadata`, for the response's dynamic metadata when this limit applies and is not over. */
  readonly metadata: RlsMetadata | undefined;
}

/** One level of the descriptor tree. */
export interface RlsNode {
  /** Children by `key_value`, or by `key` alone for a key's default entry. */
  readonly children: ReadonlyMap<string, RlsNode>;
  /** Children whose `key_value` holds a `*`, in file order, split on it. */
  readonly wildcards: ReadonlyArray<{ readonly name: string; readonly parts: readonly string[] }>;
  /** This level's limit. */
  readonly limit: RlsLimit | undefined;
  /** `share_threshold`: every value that matches this wildcard entry counts in one counter. */
  readonly shareThreshold: boolean;
}

/** The whole config: one tree per domain. */
export interface RlsConfig {
  /** Domain → its top level. */
  readonly domains: ReadonlyMap<string, RlsNode>;
  /** The files read. */
  readonly files: readonly string[];
}

const ROOT_FIELDS = ['domain', 'descriptors'] as const;
const DESCRIPTOR_FIELDS = [
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
  'quota_mode',
] as const;
const LIMIT_FIELDS = ['requests_per_unit', 'unit', 'unlimited', 'name', 'replaces', 'algorithm'] as const;

/** The files `path` names: itself, or every `.yaml`/`.yml` file of the directory, sorted (envoyproxy/ratelimit reads a directory so). */
export async function rlsConfigFiles(path: string): Promise<string[]> {
  let isDir: boolean;
  try {
    isDir = (await stat(path)).isDirectory();
  } catch (error) {
    throw new ConfigError(
      ErrorCode.CONFIG_UNREADABLE,
      { file: path },
      `cannot read the rate limit config: ${(error as Error).message}`,
      error,
    );
  }
  if (!isDir) return [path];
  const names = (await readdir(path)).filter((n) => /\.ya?ml$/i.test(n) && !n.startsWith('.')).sort();
  return names.map((n) => join(path, n));
}

/**
 * Reads and checks the rate limit config at `path` (a file or a directory).
 * @throws ConfigError CONFIG_UNREADABLE, CONFIG_SYNTAX or INVALID_CONFIG, placed at the file and line
 */
export async function loadRlsConfig(path: string): Promise<RlsConfig> {
  const files = await rlsConfigFiles(path);
  const texts = await Promise.all(
    files.map((file) =>
      readFile(file, 'utf8').catch((error: unknown) => {
        throw new ConfigError(ErrorCode.CONFIG_UNREADABLE, { file }, `cannot read the file: ${(error as Error).message}`, error);
      }),
    ),
  );
  const domains = new Map<string, RlsNode>();
  for (const [i, file] of files.entries()) {
    const { domain, root } = await parseRlsText(texts[i]!, file);
    if (domains.has(domain))
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        { file, field: 'domain' },
        `duplicate domain ${JSON.stringify(domain)}: another file of ${path} defines it too.`,
      );
    domains.set(domain, root);
  }
  return { domains, files };
}

/**
 * Parses one file's text.
 * @throws ConfigError CONFIG_SYNTAX or INVALID_CONFIG
 */
export async function parseRlsText(text: string, file: string): Promise<{ domain: string; root: RlsNode }> {
  const { cursor: c, value } = await readYaml(text, file);
  const top = mapping(c, [], value ?? {}, ROOT_FIELDS);
  if (typeof top.domain !== 'string' || top.domain === '')
    c.fail(['domain'], `must be a non-empty string (the domain Envoy sends); got ${describeValue(top.domain)}.`);
  const domain = top.domain as string;
  return { domain, root: level(c, ['descriptors'], top.descriptors, domain, `${domain}.`) };
}

function level(c: Cursor, path: Path, value: unknown, domain: string, parentKey: string, depth = 1): RlsNode {
  const children = new Map<string, RlsNode>();
  const wildcards: Array<{ name: string; parts: string[] }> = [];
  if (value !== undefined && value !== null) {
    // A request descriptor reaching this level would have more entries than the service accepts.
    if (depth > MAX_ENTRIES)
      c.fail(
        path,
        `is nested ${depth} levels deep; a request descriptor has at most ${MAX_ENTRIES} entries, so no request could reach it.`,
      );
    if (!Array.isArray(value)) c.fail(path, `must be a list of descriptors (lines starting with "- "); got ${describeValue(value)}.`);
    for (const [i, entry] of value.entries()) {
      const at = [...path, i];
      const d = mapping(c, at, entry, DESCRIPTOR_FIELDS);
      if (typeof d.key !== 'string' || d.key === '') c.fail([...at, 'key'], `must be a non-empty string; got ${describeValue(d.key)}.`);
      if (
        d.value !== undefined &&
        d.value !== null &&
        typeof d.value !== 'string' &&
        typeof d.value !== 'number' &&
        typeof d.value !== 'boolean'
      )
        c.fail([...at, 'value'], `must be a string; got ${describeValue(d.value)}.`);
      const val = d.value === undefined || d.value === null ? '' : String(d.value);
      const name = val === '' ? d.key : `${d.key}_${val}`;
      const fullKey = parentKey + name;
      if (children.has(name))
        c.fail(
          [...at, 'key'],
          `duplicate descriptor ${JSON.stringify(fullKey)}: an earlier entry of this list has the same key and value.`,
        );
      const flag = (field: string): boolean => {
        const v = d[field];
        if (v !== undefined && typeof v !== 'boolean') c.fail([...at, field], `must be true or false; got ${describeValue(v)}.`);
        return v === true;
      };
      const shareThreshold = flag('share_threshold');
      if (shareThreshold && !name.includes('*'))
        c.fail([...at, 'share_threshold'], `applies only to a wildcard value (one holding "*"); ${JSON.stringify(fullKey)} has none.`);
      flag('value_to_metric');
      const limit =
        d.rate_limit === undefined || d.rate_limit === null
          ? undefined
          : rateLimit(c, [...at, 'rate_limit'], d.rate_limit, {
              fullKey,
              domain,
              shadow: flag('shadow_mode'),
              quota: flag('quota_mode'),
              detailedMetric: flag('detailed_metric'),
              metadata: d.metadata === undefined || d.metadata === null ? undefined : metadataOf(c, [...at, 'metadata'], d.metadata),
            });
      // A level's wildcard entries are looked up from the level above, so the node carries its children's.
      const sub = level(c, [...at, 'descriptors'], d.descriptors, domain, `${fullKey}.`, depth + 1);
      children.set(name, { children: sub.children, wildcards: sub.wildcards, limit, shareThreshold });
      if (name.includes('*')) wildcards.push({ name, parts: name.split('*') });
    }
  }
  return { children, wildcards, limit: undefined, shareThreshold: false };
}

function rateLimit(
  c: Cursor,
  path: Path,
  value: unknown,
  own: { fullKey: string; domain: string; shadow: boolean; quota: boolean; detailedMetric: boolean; metadata: RlsMetadata | undefined },
): RlsLimit {
  const r = mapping(c, path, value, LIMIT_FIELDS);
  if (r.unlimited !== undefined && typeof r.unlimited !== 'boolean')
    c.fail([...path, 'unlimited'], `must be true or false; got ${describeValue(r.unlimited)}.`);
  const unlimited = r.unlimited === true;
  let unit: RlsUnit | undefined;
  if (r.unit !== undefined && r.unit !== null) {
    const u = typeof r.unit === 'string' ? r.unit.toLowerCase() : undefined;
    if (u === undefined || !(RLS_UNITS as readonly string[]).includes(u))
      c.fail([...path, 'unit'], `must be one of ${RLS_UNITS.join(', ')}; got ${describeValue(r.unit)}.`);
    unit = u as RlsUnit;
  }
  if (unlimited && unit !== undefined) c.fail([...path, 'unit'], 'must not be set when unlimited is true.');
  if (!unlimited && unit === undefined) c.fail(path, `needs a unit (${RLS_UNITS.join(', ')}), or unlimited: true.`);
  const rpu = r.requests_per_unit ?? 0;
  if (typeof rpu !== 'number' || !Number.isInteger(rpu) || rpu < 0 || rpu > 0xffff_ffff)
    c.fail([...path, 'requests_per_unit'], `must be a whole number from 0 to 4294967295; got ${describeValue(rpu)}.`);
  if (r.name !== undefined && typeof r.name !== 'string') c.fail([...path, 'name'], `must be a string; got ${describeValue(r.name)}.`);
  const name = r.name === undefined || r.name === '' ? undefined : r.name;
  const replaces: string[] = [];
  if (r.replaces !== undefined && r.replaces !== null) {
    if (!Array.isArray(r.replaces)) c.fail([...path, 'replaces'], `must be a list of { name: NAME }; got ${describeValue(r.replaces)}.`);
    for (const [i, entry] of r.replaces.entries()) {
      const e = mapping(c, [...path, 'replaces', i], entry, ['name']);
      if (typeof e.name !== 'string' || e.name === '')
        c.fail([...path, 'replaces', i, 'name'], `must be a non-empty string; got ${describeValue(e.name)}.`);
      if (e.name === name) c.fail([...path, 'replaces', i, 'name'], 'names this limit itself; a limit cannot replace itself.');
      replaces.push(e.name);
    }
  }
  if (unit !== undefined && rpu > maxRequestsPerUnit(unit))
    c.fail(
      [...path, 'requests_per_unit'],
      `is above what floodgate keeps exact per ${unit} (limit × window must stay under 2^50 ms): at most ${maxRequestsPerUnit(unit)}; use a shorter unit or unlimited: true.`,
    );
  let algorithm: Algorithm = 'fixed-window';
  if (r.algorithm !== undefined) {
    if (!(ALGORITHMS as readonly unknown[]).includes(r.algorithm))
      c.fail([...path, 'algorithm'], `must be one of ${ALGORITHMS.join(', ')} (floodgate's extension); got ${describeValue(r.algorithm)}.`);
    algorithm = r.algorithm as Algorithm;
  }
  return { ...own, requestsPerUnit: rpu, unit, unlimited, name, replaces, algorithm };
}

/** Most levels of nesting in a descriptor's `metadata`. */
const MAX_METADATA_DEPTH = 16;

/** A descriptor's `metadata`: a mapping whose values are what a google.protobuf.Struct holds (no dates, no binary). */
function metadataOf(c: Cursor, path: Path, value: unknown, depth = 0): RlsMetadata {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    c.fail(path, `must be a mapping (e.g. metadata: { service_with_quota: { name: service_1 } }); got ${describeValue(value)}.`);
  const out: Record<string, RlsMetadataValue> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) out[key] = metadataValue(c, [...path, key], v, depth + 1);
  return out;
}

function metadataValue(c: Cursor, path: Path, value: unknown, depth: number): RlsMetadataValue {
  if (depth > MAX_METADATA_DEPTH) c.fail(path, `is nested more than ${MAX_METADATA_DEPTH} levels deep.`);
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) c.fail(path, `must be a finite number; got ${describeValue(value)}.`);
    return value;
  }
  if (Array.isArray(value)) return value.map((v, i) => metadataValue(c, [...path, i], v, depth + 1));
  if (typeof value === 'object') return metadataOf(c, path, value, depth);
  return c.fail(path, `must be a string, number, true/false, null, a list or a mapping; got ${describeValue(value)}.`);
}
