/** Parsers for the values the CLI and the config file share (addresses, URLs, limits, keys). */
/**
 * They throw plain messages that the caller places (flag or file:line).
 */
import { parseDuration, CALENDAR_UNITS, ALGORITHMS, type Algorithm } from '../../index.js';
import { describeValue } from '../../core/describe-value.js';
import { parseHeaderModes, type HeaderMode, type TrustProxy, AddressMatcher } from '../../http/index.js';
import { MAX_LEASE_MS } from '../../stores/cluster/index.js';
import {
  FAILURE_POLICIES,
  LOG_LEVELS,
  type FailurePolicy,
  type ListenAddress,
  type LogLevel,
  type PolicySettings,
  type StoreSettings,
} from './settings.js';

/** A bad value; the message says what was expected. The CLI and the config loader add where it came from. */
export class InvalidValue extends Error {
  /**
   * @param message - what is wrong and what would be right
   * @param code - a stable code (an ErrorCode) when the value breaks a bound the library names, for answers that carry one (the admin API's)
   */
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'InvalidValue';
  }
}

/** Runs `parse`, turning any error it throws into an {@link InvalidValue} with the same message. */
function asInvalid<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof InvalidValue) throw error;
    throw new InvalidValue(error instanceof Error ? error.message : String(error));
  }
}

/** Parses `HOST:PORT`, `:PORT`, `PORT` or `[v6]:PORT`. */
export function parseListen(value: unknown): ListenAddress {
  if (typeof value === 'number') return { host: '127.0.0.1', port: checkPort(value, String(value)) };
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidValue(`must be HOST:PORT such as "127.0.0.1:8080" or "0.0.0.0:8080"; got ${describeValue(value)}.`);
  }
  const text = value.trim();
  let host = '127.0.0.1';
  let port: string;
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(text);
  if (v6) {
    host = v6[1]!;
    port = v6[2]!;
  } else if (/^\d+$/.test(text)) {
    port = text;
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) throw new InvalidValue(`must be HOST:PORT such as "127.0.0.1:8080"; got ${describeValue(value)} (no port).`);
    if (colon > 0) host = text.slice(0, colon);
    port = text.slice(colon + 1);
  }
  if (!/^\d+$/.test(port)) throw new InvalidValue(`must be HOST:PORT with a numeric port; got ${describeValue(value)}.`);
  return { host, port: checkPort(Number(port), text) };
}

function checkPort(port: number, text: string): number {
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535) {
    throw new InvalidValue(`port must be a whole number from 0 to 65535; got ${JSON.stringify(text)}.`);
  }
  return port;
}

/** Parses an upstream URL: http or https, no query or fragment. */
export function parseUpstream(value: unknown): URL {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidValue(`must be an http(s) URL such as "http://127.0.0.1:3000"; got ${describeValue(value)}.`);
  }
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new InvalidValue(`must be an http(s) URL such as "http://127.0.0.1:3000"; got ${describeValue(value)}.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidValue(`must use http:// or https://; got ${describeValue(value)}.`);
  }
  if (url.search !== '' || url.hash !== '')
    throw new InvalidValue(`must not have a query string or fragment; got ${describeValue(value)}.`);
  if (url.username !== '' || url.password !== '')
    throw new InvalidValue("must not carry credentials; the gateway forwards the client's own Authorization header.");
  return url;
}

/** Parses a Redis URL (redis:// or rediss://). */
export function parseRedisUrl(value: unknown): string {
  if (typeof value !== 'string' || !/^rediss?:\/\/[^\s]+$/.test(value.trim())) {
    throw new InvalidValue(`must be a Redis URL such as "redis://127.0.0.1:6379"; got ${describeValue(value)}.`);
  }
  return value.trim();
}

/** Parses `N/DURATION`, e.g. `"3/5s"`, `"100/1m"`, into a policy's limit and window. */
export function parseLimitSpec(value: unknown): { limit: number; windowMs: number } {
  const match = typeof value === 'string' ? /^\s*(\d+)\s*\/\s*(\S+)\s*$/.exec(value) : null;
  if (!match) {
    throw new InvalidValue(`must be LIMIT/WINDOW such as "3/5s" or "100/1m"; got ${describeValue(value)}.`);
  }
  const limit = Number(match[1]);
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new InvalidValue(`the limit must be a positive whole number; got ${describeValue(value)}.`);
  if ((CALENDAR_UNITS as readonly string[]).includes(match[2]!)) {
    // A calendar window follows a time zone, which the short form has no room for.
    throw new InvalidValue(
      `a calendar window needs its time zone: write the policy as { limit: ${limit}, window: ${match[2]}, timeZone: Europe/Berlin } (or timeZone: UTC); got ${describeValue(value)}.`,
    );
  }
  const windowMs = asInvalid(() => parseDuration(match[2], 'the window'));
  return { limit, windowMs };
}

/** Parses an algorithm name. */
export function parseAlgorithm(value: unknown): Algorithm {
  if (!ALGORITHMS.includes(value as Algorithm)) {
    throw new InvalidValue(`must be one of ${ALGORITHMS.join(', ')}; got ${describeValue(value)}.`);
  }
  return value as Algorithm;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Parses a header name (returned lower-case). */
export function parseHeaderName(value: unknown): string {
  if (typeof value !== 'string' || !HEADER_NAME.test(value))
    throw new InvalidValue(`must be a header name such as "x-api-key"; got ${describeValue(value)}.`);
  return value.toLowerCase();
}

/** Parses a trust-proxy value: `false`, a hop count, or a list of IPs/CIDRs (a comma-separated string on the CLI). */
export function parseTrustProxy(value: unknown): TrustProxy {
  if (value === false || value === 'false' || value === 0 || value === '0') return false;
  if (typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value))) {
    const hops = Number(value);
    if (!Number.isSafeInteger(hops) || hops < 1 || hops > 32)
      throw new InvalidValue(`as a hop count must be from 1 to 32; got ${describeValue(value)}.`);
    return hops;
  }
  const list =
    typeof value === 'string'
      ? value
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '')
      : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((s) => typeof s === 'string')) {
    throw new InvalidValue(
      `must be false, the number of proxies in front of the gateway, or a list of their IPs/CIDRs (e.g. "10.0.0.0/8,loopback"); got ${describeValue(value)}.`,
    );
  }
  asInvalid(() => new AddressMatcher(list as string[], 'trustProxy'));
  return list as string[];
}

/** Parses a header-mode value: one mode, a list, or `"none"`. */
export function parseHeaders(value: unknown): readonly HeaderMode[] | 'none' {
  if (value === 'none' || value === false) return 'none';
  const list = typeof value === 'string' ? value.split(',').map((s) => s.trim()) : value;
  return asInvalid(() => parseHeaderModes(list));
}

/** Parses a whole positive number within `max`. */
export function parsePositiveInt(value: unknown, max = Number.MAX_SAFE_INTEGER, allowZero = false): number {
  const n = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < (allowZero ? 0 : 1) || n > max) {
    throw new InvalidValue(`must be a whole number from ${allowZero ? 0 : 1} to ${max}; got ${describeValue(value)}.`);
  }
  return n;
}

/**
 * Parses a duration (ms, "5s", or digits alone as ms, as the command line
 * spells a number); `allowZero` accepts 0 / "0" meaning "no limit".
 */
export function parseMs(value: unknown, allowZero = false): number {
  if (allowZero && (value === 0 || value === '0')) return 0;
  const ms = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value;
  return asInvalid(() => parseDuration(ms, 'the duration'));
}

/** Longest `retryAfterJitter`: the library's bound (a few seconds is what spreads clients refused together). */
const MAX_RETRY_AFTER_JITTER_MS = 3_600_000;

/** Parses `retryAfterJitter` (a duration up to an hour, or 0 for none). */
export function parseRetryAfterJitterMs(value: unknown): number {
  const ms = parseMs(value, true);
  if (ms > MAX_RETRY_AFTER_JITTER_MS)
    throw new InvalidValue(
      `must be at most 1h (a few seconds spread clients refused together), or 0 for none; got ${describeValue(value)}.`,
    );
  return ms;
}

/** Parses the cluster store's lease (a duration up to a minute, or 0 for none). */
export function parseLeaseMs(value: unknown): number {
  const ms = parseMs(value, true);
  if (!Number.isSafeInteger(ms) || ms > MAX_LEASE_MS)
    throw new InvalidValue(`must be a whole number of ms up to ${MAX_LEASE_MS} (1m), or 0 for no leases; got ${describeValue(value)}.`);
  return ms;
}

/** Why a lease cannot apply to this store and worker count (the message's subject is the setting), or undefined when it can. */
export function leaseConflict(store: StoreSettings, workers: number): string | undefined {
  if (store.leaseMs === 0) return undefined;
  if (store.kind !== 'memory') return 'applies to the embedded store under workers; on Redis, local-first leases quota instead.';
  if (workers === 0) return 'needs workers ≥ 1: it leases quota from the primary process to each worker.';
  return undefined;
}

/** Parses a boolean; strings only as the CLI would spell them. */
export function parseBoolean(value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  throw new InvalidValue(`must be true or false; got ${describeValue(value)}.`);
}

/** Builds a policy from its parts, checking them. */
export function makePolicy(
  name: string | undefined,
  limit: number,
  windowMs: number,
  algorithm: Algorithm,
  blockMs: number,
): PolicySettings {
  if (name !== undefined && !/^[\x20-\x7e]+$/.test(name))
    throw new InvalidValue(`policy name must be printable ASCII (it is sent in a header); got ${describeValue(name)}.`);
  return { name, limit, windowMs, algorithm, blockMs };
}

/** Upgrade tokens a tunnel may be opened for; `h2c` never (a tunnelled HTTP/2 connection would carry requests no rule sees). */
export function parseUpgrades(value: unknown): string[] {
  if (!Array.isArray(value))
    throw new InvalidValue(`must be a list of upgrade protocols such as [websocket], or [] for no tunnels; got ${describeValue(value)}.`);
  return value.map((v) => {
    if (typeof v !== 'string' || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(v))
      throw new InvalidValue(`must be upgrade protocol tokens such as websocket; got ${describeValue(v)}.`);
    const token = v.toLowerCase();
    if (token === 'h2c' || token === 'h2')
      throw new InvalidValue('h2c cannot be tunnelled: every request inside an HTTP/2 tunnel would reach the upstream uncounted.');
    return token;
  });
}

/** A list of header names to strip from untrusted peers, or false to strip none. */
export function parseStripHeaders(value: unknown): string[] | false {
  if (value === false) return false;
  if (!Array.isArray(value))
    throw new InvalidValue(`must be a list of header names, or false to forward them all; got ${describeValue(value)}.`);
  return value.map((v) => parseHeaderName(v));
}

/** Parses a decision endpoint path, or `false`. */
export function parseDecisionPath(value: unknown): string | false {
  if (value === false) return false;
  if (typeof value !== 'string' || !/^\/[\x21-\x7e]*$/.test(value) || value.includes('?')) {
    throw new InvalidValue(
      `must be a path such as "/_floodgate/decide", or false to turn the decision endpoint off; got ${describeValue(value)}.`,
    );
  }
  return value;
}

/** Parses a log level. */
export function parseLogLevel(value: unknown): LogLevel {
  if (!LOG_LEVELS.includes(value as LogLevel))
    throw new InvalidValue(`must be one of ${LOG_LEVELS.join(', ')}; got ${describeValue(value)}.`);
  return value as LogLevel;
}

/** Parses a store failure policy. */
export function parseFailurePolicy(value: unknown): FailurePolicy {
  if (!FAILURE_POLICIES.includes(value as FailurePolicy)) {
    throw new InvalidValue(`must be one of ${FAILURE_POLICIES.join(', ')}; got ${describeValue(value)}.`);
  }
  return value as FailurePolicy;
}
