/** Which request headers reach the upstream. */
/**
 * The standard hop-by-hop ones dropped, identity headers of untrusted peers stripped, X-Forwarded-* written.
 */
import type { IncomingMessage } from 'node:http';
import { type TrustProxy, AddressMatcher, parseIp } from '../../http/index.js';

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1); never forwarded in either direction. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Builds the upstream request headers for one gateway configuration.
 *
 * Only a peer inside a `trustProxy` CIDR list is a trusted proxy here: its
 * X-Forwarded-For is appended to, its X-Forwarded-Proto/-Host and identity
 * headers kept. A hop count (`trustProxy: N`) describes a chain, not who the
 * peer is, so it never makes the peer trusted: the last N X-Forwarded-For
 * entries are kept (the same ones the IP key believes) and everything else is
 * treated as coming from a direct client.
 */
export class ForwardHeaders {
  private readonly trusted: (peer: string | undefined) => boolean;
  private readonly hops: number;
  private readonly strip: ReadonlySet<string>;

  /**
   * @param trustProxy - the gateway's `trustProxy`
   * @param stripHeaders - headers removed from untrusted peers' requests, or false
   */
  constructor(trustProxy: TrustProxy, stripHeaders: readonly string[] | false) {
    this.trusted = trustCheck(trustProxy);
    this.hops = typeof trustProxy === 'number' ? trustProxy : 0;
    this.strip = new Set(stripHeaders === false ? [] : stripHeaders);
  }

  /**
   * The headers to send upstream for `req`.
   *
   * Only the fixed {@link HOP_BY_HOP} set is dropped; the names a client
   * lists in its `Connection` header are not. The rules decided on the
   * request's headers (the key header, `match.headers`, key checks), so a
   * header the client could have removed by naming it in `Connection` would
   * be counted under one identity and served upstream under another (a
   * made-up API key counted, an anonymous request served). nginx and Envoy
   * forward the same way.
   */
  build(req: IncomingMessage): Record<string, string | string[]> {
    const incoming = req.headers;
    const out: Record<string, string | string[]> = {};
    const trusted = this.trusted(req.socket.remoteAddress);
    for (const name in incoming) {
      const value = incoming[name];
      if (value === undefined || HOP_BY_HOP.has(name) || name === 'host' || name === 'expect') continue;
      if (!trusted && this.strip.has(name)) continue;
      out[name] = value;
    }
    const peer = stripMapped(req.socket.remoteAddress) ?? 'unknown';
    out['x-forwarded-for'] = this.forwardedFor(incoming['x-forwarded-for'], peer, trusted);
    if (!(trusted && incoming['x-forwarded-proto'] !== undefined)) out['x-forwarded-proto'] = 'http';
    if (!(trusted && incoming['x-forwarded-host'] !== undefined)) {
      if (incoming.host !== undefined) out['x-forwarded-host'] = incoming.host;
      else delete out['x-forwarded-host'];
    }
    return out;
  }

  /** A trusted proxy's chain is extended; a hop count keeps its last N entries; anyone else's claim is replaced by the peer. */
  private forwardedFor(header: string | string[] | undefined, peer: string, trusted: boolean): string {
    const chain = Array.isArray(header) ? header.join(', ') : header;
    if (chain === undefined || chain.trim() === '') return peer;
    if (trusted) return `${chain}, ${peer}`;
    if (this.hops === 0) return peer;
    const entries = chain
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e !== '');
    const kept = entries.slice(-this.hops);
    return kept.length === 0 ? peer : `${kept.join(', ')}, ${peer}`;
  }
}

/**
 * The lower-case field names a Connection header lists (besides close and
 * keep-alive), or undefined for none. Used on the upstream's responses only:
 * a client's list is not obeyed (see {@link ForwardHeaders.build}).
 */
export function connectionTokens(value: string | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  const tokens = new Set<string>();
  for (const t of value.split(',')) {
    const name = t.trim().toLowerCase();
    if (name !== '' && name !== 'close' && name !== 'keep-alive') tokens.add(name);
  }
  return tokens.size === 0 ? undefined : tokens;
}

function stripMapped(address: string | undefined): string | undefined {
  return address !== undefined && address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function trustCheck(trust: TrustProxy): (peer: string | undefined) => boolean {
  if (trust === false || typeof trust === 'number' || trust === 'framework') return () => false;
  const matcher = new AddressMatcher(trust, 'trustProxy');
  return (peer) => {
    const ip = peer === undefined ? undefined : parseIp(peer);
    return ip !== undefined && matcher.matches(ip);
  };
}
