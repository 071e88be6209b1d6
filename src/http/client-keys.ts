/** Client identity for the HTTP adapters. */
/**
 * The client address behind trusted proxies, IPv6 prefix grouping, API-key headers and hashing of over-long keys.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { AddressMatcher, formatIp, mask, parseIp, type IpAddress } from './ip-address.js';

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

/** Most hops a trusted-proxy count may name; more is almost surely a mistake. */
const MAX_HOPS = 32;

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
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `proxyHeader must be "x-forwarded-for" or "forwarded"; got ${describeValue(header)}.`,
    );
  }
  if (trust === false) {
    return (socketAddress) => (socketAddress === undefined ? undefined : parseIp(socketAddress));
  }
  if (typeof trust === 'number') {
    if (!Number.isSafeInteger(trust) || trust < 1 || trust > MAX_HOPS) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `trustProxy as a number is the count of reverse proxies in front of the app, a whole number from 1 to ${MAX_HOPS}; got ${describeValue(trust)}.`,
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
      `trustProxy must be false, the number of proxies in front of the app, a list of their IPs/CIDRs, or "framework"; got ${describeValue(trust)}. (true is not accepted: it would believe any X-Forwarded-For a client sends.)`,
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
      `ipv6Subnet must be a prefix length from 1 to 128 (default 64), or false for whole addresses; got ${describeValue(value)}.`,
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
