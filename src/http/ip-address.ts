/** IP addresses for the HTTP adapters. */
/**
 * Parsing and canonical forms, CIDR ranges and the named ranges, and matching addresses against a list.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';

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

/** Named ranges accepted in a trusted-proxy or allow/deny list, as in Express's `trust proxy`. */
export const NAMED_RANGES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
};

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
              .join(', ')}; got ${describeValue(text)}.`,
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
export function mask(bytes: Uint8Array, bits: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i += 1) {
    const keep = Math.max(0, Math.min(8, bits - 8 * i));
    out[i] = bytes[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}
