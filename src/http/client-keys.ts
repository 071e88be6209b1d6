/** Client identity for the HTTP adapters: IP parsing and normalising, CIDR matching, trusted proxies, IPv6 prefix grouping, API-key headers and hashing of over-long keys. */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';
import { describe } from '../duration.js';
import { ErrorCode, FloodgateError } from '../errors.js';

/** A parsed IP address. IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) are always returned as IPv4. */
export interface IpAddress {
  /** 4 or 6. */
  readonly version: 4 | 6;
  /** 4 bytes for IPv4, 16 for IPv6, network order. */
  readonly bytes: Uint8Array;
}

/** A parsed CIDR range; `bytes` is already masked to `bits`. */
export interface Cidr {
  /** 4 or 6. */
  readonly version: 4 | 6;
  /** The network address, masked. */
  readonly bytes: Uint8Array;
  /** Prefix length. */
  readonly bits: number;
}

/**
 * Which proxies to believe about the client address.
 *
 * - `false` (default): the socket's peer address; proxy headers are ignored,
 *   so a client cannot choose its own key by sending X-Forwarded-For.
 * - a number `n`: exactly `n` reverse proxies stand in front of the app; the
 *   client is the address the outermost of them saw.
 * - a list of IPs / CIDRs (and the names `"loopback"`, `"private"`,
 *   `"linklocal"`): proxies at those addresses are trusted; the client is the
 *   nearest address that is not one of them.
 * - `"framework"`: use the address the framework computed (`req.ip`,
 *   `ctx.ip`, `request.ip`) under its own trust settings.
 */
export type TrustProxy = false | number | readonly string[] | 'framework';

/** The proxy header read when {@link TrustProxy} allows it. Each proxy in front of the app must write this one. */
export type ProxyHeader = 'x-forwarded-for' | 'forwarded';

/** Options of {@link createIpResolver}. */
export interface IpResolverOptions {
  /** See {@link TrustProxy}. Default `false`. `"framework"` is handled by the adapters, not here. */
  trustProxy?: Exclude<TrustProxy, 'framework'>;
  /** See {@link ProxyHeader}. Default `"x-forwarded-for"`. */
  proxyHeader?: ProxyHeader;
}

/** Named ranges accepted in a trusted-proxy or allow/deny list, as in Express's `trust proxy`. */
export const NAMED_RANGES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
};

/** Most hops a trusted-proxy count may name; more is almost surely a mistake. */
const MAX_HOPS = 32;

/**
 * Parses an IP address as found on a socket or in a proxy header: plain
 * IPv4/IPv6, `[v6]`, `[v6]:port`, `v4:port`, or with a zone (`fe80::1%eth0`,
 * the zone is dropped). Returns undefined for anything else (`unknown`,
 * obfuscated Forwarded identifiers, garbage).
 */
export function parseIp(text: string): IpAddress | undefined {
  let s = text.trim();
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0) return undefined;
    const rest = s.slice(end + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return undefined;
    s = s.slice(1, end);
  } else if (/^[\d.]+:\d{1,5}$/.test(s)) {
    // IPv4 with a port (some proxies append one); an IPv6 address never matches this.
    s = s.slice(0, s.indexOf(':'));
  }
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (isIPv4(s)) return { version: 4, bytes: Uint8Array.from(s.split('.').map(Number)) };
  if (!isIPv6(s)) return undefined;
  const bytes = expandIpv6(s);
  if (bytes === undefined) return undefined;
  if (isV4Mapped(bytes)) return { version: 4, bytes: bytes.slice(12) };
  return { version: 6, bytes };
}

/** Formats an address canonically: dotted IPv4, RFC 5952 IPv6 (lower case, longest zero run compressed). */
export function formatIp(ip: IpAddress): string {
  if (ip.version === 4) return Array.from(ip.bytes).join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((ip.bytes[i]! << 8) | ip.bytes[i + 1]!);
  // RFC 5952 §4.2: compress the longest run of two or more zero groups, the first on a tie.
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i += 1;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j += 1;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

/**
 * Normalises an address string: IPv4-mapped IPv6 becomes IPv4, IPv6 is
 * written canonically. Returns undefined when `text` is not an address.
 */
export function normalizeIp(text: string): string | undefined {
  const ip = parseIp(text);
  return ip === undefined ? undefined : formatIp(ip);
}

/**
 * Parses `"10.0.0.0/8"`, `"2001:db8::/32"` or a single address (a /32 or
 * /128). An IPv4-mapped IPv6 range with a prefix of at least 96 becomes the
 * IPv4 range, since mapped addresses are compared as IPv4. Returns undefined
 * when malformed.
 */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const ip = parseIpStrict(address);
  if (ip === undefined) return undefined;
  let bits = ip.mappedFrom6 ? 128 : ip.version === 4 ? 32 : 128;
  if (slash >= 0) {
    const tail = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(tail)) return undefined;
    bits = Number(tail);
    if (bits > (ip.mappedFrom6 ? 128 : ip.version === 4 ? 32 : 128)) return undefined;
  }
  if (ip.mappedFrom6) {
    // A range that only partly covers ::ffff:0:0/96 cannot be expressed in IPv4; refuse rather than guess.
    if (bits < 96) return undefined;
    bits -= 96;
  }
  return { version: ip.version, bytes: mask(ip.bytes, bits), bits };
}

/** True when `ip` lies in `cidr`. */
export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  if (cidr.version !== ip.version) return false;
  const whole = cidr.bits >> 3;
  for (let i = 0; i < whole; i += 1) if (cidr.bytes[i] !== ip.bytes[i]) return false;
  const rest = cidr.bits & 7;
  if (rest === 0) return true;
  const m = (0xff << (8 - rest)) & 0xff;
  return (ip.bytes[whole]! & m) === cidr.bytes[whole];
}

/** A set of CIDR ranges; built once, matched per request. */
export class AddressMatcher {
  private readonly ranges: readonly Cidr[];

  /**
   * @param entries - IPs, CIDRs or the names in {@link NAMED_RANGES}
   * @param owner - option name used in error messages
   * @throws FloodgateError INVALID_OPTIONS for an entry that is none of these
   */
  constructor(entries: readonly string[], owner: string) {
    const ranges: Cidr[] = [];
    for (const entry of entries) {
      const named = typeof entry === 'string' ? NAMED_RANGES[entry] : undefined;
      for (const text of named ?? [entry]) {
        const cidr = typeof text === 'string' ? parseCidr(text) : undefined;
        if (cidr === undefined) {
          throw new FloodgateError(
            ErrorCode.INVALID_OPTIONS,
            `${owner} entries must be IP addresses, CIDR ranges such as "10.0.0.0/8" or "2001:db8::/32", or one of ${Object.keys(
              NAMED_RANGES,
            )
              .map((n) => JSON.stringify(n))
              .join(', ')}; got ${describe(text)}.`,
          );
        }
        ranges.push(cidr);
      }
    }
    this.ranges = ranges;
  }

  /** True when `ip` lies in any range. */
  matches(ip: IpAddress): boolean {
    for (const range of this.ranges) if (cidrContains(range, ip)) return true;
    return false;
  }
}

/**
 * The `for=` values of an RFC 7239 Forwarded field, one per element, in
 * order; undefined for an element without `for`. Quoted strings may hold
 * commas and semicolons, so the value is tokenised rather than split.
 */
export function parseForwardedFor(value: string): Array<string | undefined> {
  const out: Array<string | undefined> = [];
  let current: string | undefined;
  let i = 0;
  const n = value.length;
  while (i < n) {
    // One pair: token "=" ( token / quoted-string ), then ";" or "," or end.
    while (i < n && (value[i] === ' ' || value[i] === '\t' || value[i] === ';')) i += 1;
    if (i < n && value[i] === ',') {
      out.push(current);
      current = undefined;
      i += 1;
      continue;
    }
    let nameEnd = i;
    while (nameEnd < n && value[nameEnd] !== '=' && value[nameEnd] !== ';' && value[nameEnd] !== ',') nameEnd += 1;
    const name = value.slice(i, nameEnd).trim().toLowerCase();
    i = nameEnd;
    let pairValue = '';
    if (i < n && value[i] === '=') {
      i += 1;
      while (i < n && (value[i] === ' ' || value[i] === '\t')) i += 1;
      if (value[i] === '"') {
        i += 1;
        while (i < n && value[i] !== '"') {
          if (value[i] === '\\' && i + 1 < n) i += 1;
          pairValue += value[i];
          i += 1;
        }
        i += 1;
      } else {
        const start = i;
        while (i < n && value[i] !== ';' && value[i] !== ',') i += 1;
        pairValue = value.slice(start, i).trim();
      }
    }
    if (name === 'for' && current === undefined) current = pairValue;
  }
  if (n > 0) out.push(current);
  return out;
}

/**
 * Builds the function that finds the client address from the socket peer and
 * the proxy header, under the configured trust. Nothing from a header is
 * used unless the trust says so: spoofed headers from a direct client are
 * ignored.
 *
 * @throws FloodgateError INVALID_OPTIONS for a malformed trust setting
 */
export function createIpResolver(
  options: IpResolverOptions = {},
): (socketAddress: string | undefined, headers: IncomingHttpHeaders) => IpAddress | undefined {
  const trust = options.trustProxy ?? false;
  const header = options.proxyHeader ?? 'x-forwarded-for';
  if (header !== 'x-forwarded-for' && header !== 'forwarded') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `proxyHeader must be "x-forwarded-for" or "forwarded"; got ${describe(header)}.`);
  }
  if (trust === false) {
    return (socketAddress) => (socketAddress === undefined ? undefined : parseIp(socketAddress));
  }
  if (typeof trust === 'number') {
    if (!Number.isSafeInteger(trust) || trust < 1 || trust > MAX_HOPS) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `trustProxy as a number is the count of reverse proxies in front of the app, a whole number from 1 to ${MAX_HOPS}; got ${describe(trust)}.`,
      );
    }
    return (socketAddress, headers) => {
      const socketIp = socketAddress === undefined ? undefined : parseIp(socketAddress);
      const chain = forwardedChain(headers, header);
      // The socket peer is proxy 1; proxy k appended chain[length - k], so with n proxies the client is
      // chain[length - n]. With fewer entries, the left-most one is the best any proxy vouched for.
      const pick = Math.min(trust, chain.length);
      if (pick === 0) return socketIp;
      // A trusted proxy may write "unknown" (RFC 7239); fall back to the nearest real address to its right.
      for (let k = pick; k >= 1; k -= 1) {
        const ip = chain[chain.length - k];
        if (ip !== undefined) return ip;
      }
      return socketIp;
    };
  }
  if (!Array.isArray(trust)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `trustProxy must be false, the number of proxies in front of the app, a list of their IPs/CIDRs, or "framework"; got ${describe(trust)}. (true is not accepted: it would believe any X-Forwarded-For a client sends.)`,
    );
  }
  const trusted = new AddressMatcher(trust, 'trustProxy');
  return (socketAddress, headers) => {
    const socketIp = socketAddress === undefined ? undefined : parseIp(socketAddress);
    if (socketIp === undefined || !trusted.matches(socketIp)) return socketIp;
    const chain = forwardedChain(headers, header);
    let client = socketIp;
    for (let k = chain.length - 1; k >= 0; k -= 1) {
      const ip = chain[k];
      // Unparseable entry: nothing beyond it can be believed; the last trusted hop is the best we know.
      if (ip === undefined) return client;
      client = ip;
      if (!trusted.matches(ip)) return ip;
    }
    return client;
  };
}

/** The addresses in the proxy header, left (client side) to right (nearest proxy); undefined where unparseable. */
function forwardedChain(headers: IncomingHttpHeaders, header: ProxyHeader): Array<IpAddress | undefined> {
  const raw = headers[header];
  if (raw === undefined) return [];
  const value = Array.isArray(raw) ? raw.join(',') : raw;
  const entries = header === 'forwarded' ? parseForwardedFor(value) : value.split(',');
  return entries.map((entry) => (entry === undefined ? undefined : parseIp(entry)));
}

/**
 * The rate-limit key of an address: IPv4 as is; IPv6 masked to `ipv6Subnet`
 * bits and written as a range (`2001:db8:1:2::/64`), because one subscriber
 * usually holds a whole /64 and could otherwise rotate through its addresses
 * to get a fresh quota each time. `false` keeps full IPv6 addresses.
 */
export function ipKey(ip: IpAddress, ipv6Subnet: number | false = 64): string {
  if (ip.version === 4 || ipv6Subnet === false || ipv6Subnet >= 128) return formatIp(ip);
  return `${formatIp({ version: 6, bytes: mask(ip.bytes, ipv6Subnet) })}/${ipv6Subnet}`;
}

/** Checks an `ipv6Subnet` option value. */
export function assertIpv6Subnet(value: unknown): asserts value is number | false {
  if (value === false) return;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > 128) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `ipv6Subnet must be a prefix length from 1 to 128 (default 64), or false for whole addresses; got ${describe(value)}.`,
    );
  }
}

/**
 * The trimmed value of `name` in `headers`, or undefined when absent or
 * blank. Repeated fields are joined with ", " as Node does for unknown names.
 */
export function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const raw = headers[name.toLowerCase()];
  if (raw === undefined) return undefined;
  const value = (Array.isArray(raw) ? raw.join(', ') : raw).trim();
  return value.length === 0 ? undefined : value;
}

/** Prefix of hashed keys. */
export const HASHED_KEY_PREFIX = 'sha256:';

/**
 * Returns `key` unchanged when it is at most `maxBytes` UTF-8 bytes, else
 * `"sha256:"` + the base64url SHA-256 of it (50 characters). A client
 * choosing its own key (an API key header, a user id) must not be able to
 * make the store hold arbitrarily long keys.
 */
export function boundKey(key: string, maxBytes: number): string {
  // Cheap test first: a string of n UTF-16 units is at most 3n UTF-8 bytes.
  if (key.length * 3 <= maxBytes || Buffer.byteLength(key, 'utf8') <= maxBytes) return key;
  return HASHED_KEY_PREFIX + createHash('sha256').update(key, 'utf8').digest('base64url');
}

/** Parses an address for CIDR use, remembering whether it was written as IPv4-mapped IPv6. */
function parseIpStrict(text: string): (IpAddress & { mappedFrom6: boolean }) | undefined {
  const s = text.trim();
  if (isIPv4(s)) return { version: 4, bytes: Uint8Array.from(s.split('.').map(Number)), mappedFrom6: false };
  if (!isIPv6(s) || s.includes('%')) return undefined;
  const bytes = expandIpv6(s);
  if (bytes === undefined) return undefined;
  if (isV4Mapped(bytes)) return { version: 4, bytes: bytes.slice(12), mappedFrom6: true };
  return { version: 6, bytes, mappedFrom6: false };
}

/** Expands a textual IPv6 address (already validated by node:net) into 16 bytes. */
function expandIpv6(s: string): Uint8Array | undefined {
  const groups: number[] = [];
  const parse = (part: string): boolean => {
    if (part === '') return true;
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        if (!isIPv4(piece)) return false;
        const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number];
        groups.push((a << 8) | b, (c << 8) | d);
      } else {
        groups.push(parseInt(piece, 16));
      }
    }
    return true;
  };
  const gap = s.indexOf('::');
  let head: number[];
  let tail: number[];
  if (gap >= 0) {
    if (!parse(s.slice(0, gap))) return undefined;
    head = groups.splice(0);
    if (!parse(s.slice(gap + 2))) return undefined;
    tail = groups.splice(0);
  } else {
    if (!parse(s)) return undefined;
    head = groups.splice(0);
    tail = [];
  }
  const fill = 8 - head.length - tail.length;
  if (fill < 0 || (gap < 0 && fill !== 0)) return undefined;
  const all = [...head, ...new Array<number>(fill).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  return bytes;
}

/** True for ::ffff:0:0/96. */
function isV4Mapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 10; i += 1) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

/** A copy of `bytes` with everything after the first `bits` bits cleared. */
function mask(bytes: Uint8Array, bits: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i += 1) {
    const keep = Math.max(0, Math.min(8, bits - 8 * i));
    out[i] = bytes[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}
