/** The opt-in readiness check of the upstream (`readiness.upstream`). */
/**
 * A TCP connect, shared by concurrent probes and reused for a second.
 */
import { connect } from 'node:net';
import type { GatewaySettings } from '../config/settings.js';
import { SharedResult } from '../runtime/shared-result.js';

/** How long one connect may take before the upstream counts as down; below the usual probe timeout (1 s). */
const CONNECT_TIMEOUT_MS = 500;
/** How long one answer stands: a probe flood costs at most one connect per second. */
const REUSE_MS = 1000;

/**
 * Whether the upstream accepts connections. A TCP connect is the cheapest
 * question that tells "down" (refused, unroutable, not answering) from "up"
 * without touching the application's routes or its logs.
 */
export class UpstreamCheck {
  private readonly shared: SharedResult<string | undefined>;

  /** @param upstream - the upstream URL (http: or https:) */
  constructor(readonly upstream: URL) {
    const port = upstream.port === '' ? (upstream.protocol === 'https:' ? 443 : 80) : Number(upstream.port);
    // URL keeps an IPv6 host in brackets; connect() wants it bare.
    const host = upstream.hostname.replace(/^\[(.*)\]$/, '$1');
    this.shared = new SharedResult(() => probe(host, port), REUSE_MS);
  }

  /** Why the upstream is not usable, or undefined when a connection succeeded within the last second. */
  notReady(): Promise<string | undefined> {
    return this.shared.get();
  }
}

function probe(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (reason: string | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reason);
    };
    const timer = setTimeout(
      () => done(`upstream ${host}:${port} did not accept a connection within ${CONNECT_TIMEOUT_MS} ms`),
      CONNECT_TIMEOUT_MS,
    );
    socket.once('connect', () => done(undefined));
    socket.once('error', (error: NodeJS.ErrnoException) => done(`upstream ${host}:${port} not reachable (${error.code ?? error.message})`));
  });
}

/** The upstream probe readiness asks, when `readiness.upstream` is on. */
export function upstreamCheckFor(settings: GatewaySettings): UpstreamCheck | undefined {
  return settings.readiness.upstream && settings.upstream !== undefined ? new UpstreamCheck(settings.upstream) : undefined;
}
