/** The start-up warning for `trustProxy: N` (a hop count) on a listener other clients can reach. */
/**
 * Any peer is then believed.
 */
import type { TrustProxy } from '../../http/index.js';
import type { ListenAddress } from './settings.js';

/** True for addresses only this host can connect from. */
function loopbackOnly(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * The warning to log when `trustProxy` is a hop count and `listen` accepts
 * connections from other hosts, or undefined. A hop count believes the last
 * N `X-Forwarded-For` entries whoever sent them, so a client that connects
 * directly picks its own address key; a list of the proxies' addresses does not.
 */
export function hopCountWarning(trustProxy: TrustProxy, listen: ListenAddress): string | undefined {
  if (typeof trustProxy !== 'number' || trustProxy === 0 || loopbackOnly(listen.host)) return undefined;
  return (
    `trustProxy: ${trustProxy} is a hop count: the last ${trustProxy} X-Forwarded-For entr${trustProxy === 1 ? 'y' : 'ies'} are believed from any peer, ` +
    `and ${listen.host}:${listen.port} accepts clients directly, so a client can choose its own address key. ` +
    'List the proxies in front of the gateway instead, e.g. trustProxy: ["10.0.0.0/8"] (or --trust-proxy 10.0.0.0/8).'
  );
}
