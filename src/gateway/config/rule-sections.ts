/** The config file's rules: match, key and policies of each rule, checked and placed in the file. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  CALENDAR_UNITS,
  type CalendarUnit,
  ErrorCode,
  FloodgateError,
  longestPeriodMs,
  parseBucket,
  parseCalendarWindow,
  type CalendarSpec,
  type Algorithm,
} from '../../index.js';
import { describeValue } from '../../core/describe-value.js';
import { costSettings } from './cost-config.js';
import { countSettings, nearLimitRatio } from './count-config.js';
import { concurrencySettings, waitSettings } from './in-flight-config.js';
import { knownKeysSettings } from './known-keys-config.js';
import { parsePathPattern } from './path-config.js';
import { parseKeySpec } from './key-spec.js';
import { keyParts } from './key-settings.js';
import {
  InvalidValue,
  makePolicy,
  parseAlgorithm,
  parseBoolean,
  parseHeaderName,
  parseLimitSpec,
  parseMs,
  parsePositiveInt,
} from './values.js';
import { type KeySettings, type MatchSettings, type PlanSettings, type PolicySettings, type RuleSettings } from './settings.js';
import { overrideSettings } from './override-config.js';
import { policyName } from './policy-names.js';
import { Cursor, mapping, isObject, type Path, type Obj } from './yaml-cursor.js';

const RULE_FIELDS = [
  'name',
  'match',
  'key',
  'policies',
  'shadow',
  'final',
  'cost',
  'count',
  'nearLimit',
  'concurrency',
  'wait',
  'overrides',
] as const;
const MATCH_FIELDS = ['method', 'methods', 'path', 'pathPattern', 'host', 'hosts', 'headers'] as const;
const KEY_FIELDS = ['header', 'fallbackToIp', 'maxLength', 'pattern', 'allowList'] as const;
const POLICY_FIELDS = [
  'name',
  'limit',
  'window',
  'timeZone',
  'weekStart',
  'algorithm',
  'burst',
  'initialTokens',
  'blockDuration',
  'key',
] as const;
const RULE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const METHOD = /^[A-Z]+$/;

/** The `rules` list: each rule's match, key and policies, checked and placed. */
export function ruleList(c: Cursor, value: unknown, baseDir: string, plans: PlanSettings = new Map()): RuleSettings[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) c.fail(['rules'], `must be a list of rules (lines starting with "- "); got ${describeValue(value)}.`);
  const names = new Set<string>();
  // Each rule stands alone: a bad one is reported (and left out) while the others are still checked.
  return value.flatMap((entry, i) => {
    const rule = c.keep(() => ruleSettings(c, ['rules', i], entry, i, baseDir, plans), undefined, true);
    if (rule === undefined) return [];
    if (names.has(rule.name))
      c.fail(
        ['rules', i, 'name'],
        `two rules are named ${JSON.stringify(rule.name)}; rule names must be unique (they name metrics and store keys).`,
      );
    names.add(rule.name);
    return rule;
  });
}

function ruleSettings(c: Cursor, path: Path, value: unknown, index: number, baseDir: string, plans: PlanSettings): RuleSettings {
  const r = mapping(c, path, value, RULE_FIELDS);
  const name =
    r.name === undefined
      ? `rule-${index}`
      : c.at([...path, 'name'], () => {
          if (typeof r.name !== 'string' || !RULE_NAME.test(r.name)) {
            throw new InvalidValue(`must be 1–64 letters, digits, ".", "_" or "-"; got ${describeValue(r.name)}.`);
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
    c.fail([...path, 'policies'], `must be a non-empty list of policies; got ${describeValue(r.policies)}.`);
  const policies = r.policies.map((p, i) => policySettings(c, [...path, 'policies', i], p));
  // By the name serve reports each policy under (headers, violated-policies, the admin API), which must be unique:
  // two unnamed policies with equal numbers and different keys would pass a check of the numbers and keys, and stop serve.
  const seen = new Set<string>();
  policies.forEach((p, i) => {
    const name = policyName(p);
    if (seen.has(name))
      c.fail(
        [...path, 'policies', i],
        p.name === undefined
          ? `has the name ${JSON.stringify(name)} of another policy of this rule (an unnamed policy is named by its numbers, whatever its key); give one of them a name: { name: ..., limit: ${p.limit}, window: ... }.`
          : `duplicates the name ${JSON.stringify(name)} of another policy of this rule; give each a distinct name.`,
      );
    seen.add(name);
  });
  const match = matchSettings(c, [...path, 'match'], r.match);
  checkPathGroups(c, [...path, 'key'], key, match);
  policies.forEach((p, i) => {
    if (p.key !== undefined) checkPathGroups(c, [...path, 'policies', i, 'key'], p.key, match);
  });
  const cost = r.cost === undefined ? undefined : costSettings(c, [...path, 'cost'], r.cost, policies, shadow);
  const count = r.count === undefined ? undefined : countSettings(c, [...path, 'count'], r.count, cost !== undefined, shadow);
  const nearLimit = r.nearLimit === undefined ? undefined : nearLimitRatio(c, [...path, 'nearLimit'], r.nearLimit);
  const concurrency = r.concurrency === undefined ? undefined : concurrencySettings(c, [...path, 'concurrency'], r.concurrency, shadow);
  const wait = r.wait === undefined ? undefined : waitSettings(c, [...path, 'wait'], r.wait, policies, concurrency !== undefined, shadow);
  const overrides = r.overrides === undefined ? undefined : overrideSettings(c, [...path, 'overrides'], r.overrides, policies, plans);
  return {
    name,
    match,
    key,
    policies,
    shadow,
    final,
    ...(cost === undefined ? {} : { cost }),
    ...(count === undefined ? {} : { count }),
    ...(nearLimit === undefined ? {} : { nearLimit }),
    ...(concurrency === undefined ? {} : { concurrency }),
    ...(wait === undefined ? {} : { wait }),
    ...(overrides === undefined ? {} : { overrides }),
    line: c.lineOf(path),
  };
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
  const algorithm = p.algorithm === undefined ? 'fixed-window' : c.at([...path, 'algorithm'], () => parseAlgorithm(p.algorithm));
  const calendar = calendarWindow(c, path, p, algorithm);
  const windowMs = calendar ? longestPeriodMs(calendar.unit) : c.at([...path, 'window'], () => parseMs(p.window));
  const blockMs = p.blockDuration === undefined ? 0 : c.at([...path, 'blockDuration'], () => parseMs(p.blockDuration));
  const name =
    p.name === undefined
      ? undefined
      : c.at([...path, 'name'], () => {
          // Printable ASCII, as serve's HttpLimiter requires: the name is sent in the RateLimit-Policy header.
          if (typeof p.name !== 'string' || !/^[\x20-\x7e]+$/.test(p.name))
            throw new InvalidValue(`must be a non-empty string of printable ASCII (it is sent in a header); got ${describeValue(p.name)}.`);
          return p.name;
        });
  const key = p.key === undefined ? undefined : policyKey(c, [...path, 'key'], p.key);
  const bucket = bucketFields(c, path, p, limit, algorithm, windowMs);
  const policy = { ...c.at(path, () => makePolicy(name, limit, windowMs, algorithm, blockMs)), ...bucket };
  const withCalendar = calendar === undefined ? policy : { ...policy, calendar };
  return key === undefined ? withCalendar : { ...withCalendar, key };
}

/** A token bucket's burst and initial tokens, checked as the library checks them, the error at the field it is about. */
function bucketFields(c: Cursor, path: Path, p: Obj, limit: number, algorithm: Algorithm, windowMs: number) {
  try {
    return parseBucket({ limit, burst: p.burst, initialTokens: p.initialTokens }, algorithm, windowMs);
  } catch (error) {
    if (!(error instanceof FloodgateError)) throw error;
    return c.fail([...path, error.code === ErrorCode.INVALID_INITIAL_TOKENS ? 'initialTokens' : 'burst'], error.message, error);
  }
}

/**
 * A policy's calendar window (`window: day`, `week` or `month`, with its
 * `timeZone` and, for weeks, `weekStart`), checked; undefined for a duration
 * window, which then may not name a zone.
 */
function calendarWindow(c: Cursor, path: Path, p: Obj, algorithm: Algorithm): CalendarSpec | undefined {
  if (!(CALENDAR_UNITS as readonly unknown[]).includes(p.window)) {
    for (const field of ['timeZone', 'weekStart'] as const) {
      if (p[field] !== undefined) {
        c.fail(
          [...path, field],
          `applies to calendar windows only (window: day, week or month); window ${describeValue(p.window)} is a duration, which runs from the first request whatever the zone. Remove ${field}, or use a calendar window.`,
        );
      }
    }
    return undefined;
  }
  if (p.timeZone === undefined) {
    c.fail(
      [...path, 'window'],
      `a calendar window needs the time zone its ${String(p.window)} follows, e.g. { limit: 10000, window: ${String(p.window)}, timeZone: Europe/Berlin } (or timeZone: UTC).`,
    );
  }
  if (algorithm !== 'fixed-window') {
    c.fail(
      [...path, 'algorithm'],
      `calendar windows are fixed windows (a quota that resets when the ${String(p.window)} ends); ${algorithm} rolls over time instead. Remove algorithm, or use a duration window such as 30d.`,
    );
  }
  if (p.weekStart !== undefined && p.window !== 'week')
    c.fail([...path, 'weekStart'], `applies to weeks only, not to window: ${String(p.window)}.`);
  const window = { calendar: p.window as CalendarUnit, timeZone: p.timeZone as string, weekStart: p.weekStart as number | undefined };
  try {
    return parseCalendarWindow(window, 'window');
  } catch (error) {
    // The library names the option (window.timeZone …); the file names the field, where the cursor points.
    const message = (error as Error).message;
    const named = /^window\.(timeZone|weekStart) ([\s\S]*)$/.exec(message);
    return c.fail(named ? [...path, named[1]!] : [...path, 'window'], named ? named[2]! : message, error);
  }
}

/**
 * A policy's own key: the string forms only. Validation (maxLength,
 * pattern, allowList) is the rule key's; a policy keyed by a header still
 * gets the header checks every header key gets (sent once, else 400;
 * missing, 401).
 */
function policyKey(c: Cursor, path: Path, value: unknown): KeySettings {
  if (isObject(value)) {
    c.fail(
      path,
      'a policy key is a string form (ip, header:NAME, cookie:NAME, query:NAME, path, method, jwt:CLAIM, global, or parts joined by " + "); checks on the key (maxLength, pattern, allowList) go in the rule key mapping.',
    );
  }
  return c.at(path, () => parseKeySpec(value));
}

/** Parses a `match` mapping (a rule's, or a priority class's): methods, path prefix or pattern, hosts, headers. */
export function matchSettings(c: Cursor, path: Path, value: unknown): MatchSettings {
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
            if (!METHOD.test(up)) throw new InvalidValue(`must be HTTP methods such as GET or POST; got ${describeValue(s)}.`);
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
              throw new InvalidValue(`must be host names such as "api.example.com" or "*.example.com" (no port); got ${describeValue(s)}.`);
            // A fully qualified name's trailing dot names the same host; requests are matched without it (see canonicalHost).
            return s.toLowerCase().replace(/\.+$/, '');
          }),
        );
  const pathPrefix =
    m.path === undefined
      ? undefined
      : c.at([...path, 'path'], () => {
          if (typeof m.path !== 'string' || !m.path.startsWith('/'))
            throw new InvalidValue(`must be a path prefix starting with "/", e.g. "/api/"; got ${describeValue(m.path)}.`);
          return m.path;
        });
  const pathPattern = m.pathPattern === undefined ? undefined : c.at([...path, 'pathPattern'], () => parsePathPattern(m.pathPattern));
  const headers =
    m.headers === undefined
      ? undefined
      : c.at([...path, 'headers'], () => {
          if (!isObject(m.headers))
            throw new InvalidValue(
              `must map header names to a value or true (present), e.g. { x-tenant: acme }; got ${describeValue(m.headers)}.`,
            );
          return Object.entries(m.headers).map(([name, v]) => {
            const header = parseHeaderName(name);
            if (v === true) return [header, true] as const;
            if (typeof v === 'string' || typeof v === 'number') return [header, String(v)] as const;
            throw new InvalidValue(`header ${name} must map to a value or true (present); got ${describeValue(v)}.`);
          });
        });
  return { methods, pathPrefix, pathPattern, hosts, headers };
}

function stringList(value: unknown, each: (s: string) => string): string[] {
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0) throw new InvalidValue('must not be empty.');
  return list.map((s) => {
    if (typeof s !== 'string') throw new InvalidValue(`must be a string or a list of strings; got ${describeValue(s)}.`);
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
            throw new InvalidValue(
              `must be a regular expression as a string, e.g. "^[A-Za-z0-9_-]{20,64}$"; got ${describeValue(k.pattern)}.`,
            );
          // Anchored, so that "[a-z]+" cannot admit "abc<anything>" by matching a part of it.
          try {
            return new RegExp(`^(?:${k.pattern})$`);
          } catch (error) {
            throw new InvalidValue(`is not a valid regular expression: ${(error as Error).message}`);
          }
        });
  let allowList: Set<string> | undefined;
  let allowListFile: string | undefined;
  // The mapping form names a Redis set, checked per key through a cache (see known-keys.ts).
  const knownKeys = isObject(k.allowList) ? knownKeysSettings(c, [...path, 'allowList'], k.allowList) : undefined;
  if (k.allowList !== undefined && knownKeys === undefined) {
    allowListFile = c.at([...path, 'allowList'], () => {
      if (typeof k.allowList !== 'string' || k.allowList === '')
        throw new InvalidValue(
          `must be the path of a file with one key per line, or { redis: SET } for a Redis set; got ${describeValue(k.allowList)}.`,
        );
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
    maxLength === undefined && pattern === undefined && allowList === undefined && knownKeys === undefined
      ? undefined
      : { maxLength, pattern, allowList, allowListFile, ...(knownKeys === undefined ? {} : { knownKeys }) };
  return { kind: 'header', header, fallbackToIp, ...(validation === undefined ? {} : { validation }) };
}

/**
 * A `path:{name}` key needs the rule's `pathPattern` to have the group
 * `(?<name>...)`: without it every request would miss the key.
 */
function checkPathGroups(c: Cursor, path: Path, key: KeySettings, match: MatchSettings): void {
  for (const part of keyParts(key)) {
    if (part.kind !== 'path' || part.group === undefined) continue;
    const pattern = match.pathPattern;
    if (pattern === undefined)
      c.fail(
        path,
        `path:{${part.group}} names a group of the rule's pathPattern, but the rule has none; add match: { pathPattern: "^/users/(?<${part.group}>[^/]+)" }, or key by segment (path:N).`,
      );
    // A pattern that also matches the empty string (through `|`) lists every named group, matched or not.
    const groups = new RegExp(`${pattern.source}|`).exec('')?.groups ?? {};
    if (!(part.group in groups))
      c.fail(
        path,
        `path:{${part.group}}: the rule's pathPattern ${JSON.stringify(pattern.source.replaceAll('\\/', '/'))} has no group named ${part.group}; write it as (?<${part.group}>...).`,
      );
  }
}
