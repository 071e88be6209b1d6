/** The one-time warning that requests carry X-Forwarded-For (or Forwarded) while trustProxy is unset. */
/**
 * In that case an IP-keyed rule counts every client behind that proxy as one.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { WarningCode, warnOnce } from '../../core/warnings.js';
import type { GatewayLogger } from '../runtime/log.js';

/**
 * Watches IP-keyed decisions until the first request that names a client
 * in a forwarding header the gateway ignores, then warns once: behind a
 * load balancer the peer is the balancer, and without `trustProxy` every
 * client shares its quota. Kept across reloads, so a reload does not warn
 * again; under `--workers` each worker warns once.
 */
export class ForwardedHeaderWatch {
  /** True until the warning was given; the hot path reads only this. */
  pending = true;

  /** @param log - where the warning is logged (level warn) */
  constructor(private readonly log: GatewayLogger) {}

  /**
   * Looks at one request an IP-keyed rule decides about.
   * @param rule - the rule's name
   * @param peer - the socket peer address
   */
  see(rule: string, headers: IncomingHttpHeaders, peer: string | undefined): void {
    const header = headers['x-forwarded-for'] !== undefined ? 'X-Forwarded-For' : headers.forwarded !== undefined ? 'Forwarded' : undefined;
    if (header === undefined) return;
    this.pending = false;
    const message = forwardedHeaderMessage(header, rule, peer);
    this.log.warn({ code: WarningCode.FORWARDED_HEADER_IGNORED, rule, peer: plainAddress(peer), header }, message);
    warnOnce(WarningCode.FORWARDED_HEADER_IGNORED, message, 'floodgate gateway');
  }
}

/** The warning's text: what happens, and the setting that fixes it for this peer. */
function forwardedHeaderMessage(header: string, rule: string, peer: string | undefined): string {
  const address = plainAddress(peer) ?? '<the proxy address>';
  return (
    `requests carry ${header} but trustProxy is not set, so rule ${JSON.stringify(rule)} counts every client behind the proxy ` +
    `at ${address} against one quota (the proxy's address). If that proxy is yours, set trustProxy: ["${address}"] in the config ` +
    `(or --trust-proxy ${address}), or its network's range, e.g. "10.0.0.0/8". If the header is not from a proxy of yours, ` +
    'write trustProxy: false to silence this.'
  );
}

/** An IPv4 peer as Node reports it on a dual-stack socket (::ffff:10.0.0.1) is written as IPv4. */
function plainAddress(peer: string | undefined): string | undefined {
  return peer !== undefined && peer.startsWith('::ffff:') && peer.includes('.') ? peer.slice(7) : peer;
}
