/** An allowed upgrade on its way to the upstream: through the overload gate (when there is one), then into its tunnel. */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { HeaderPair } from '../../http/index.js';
import type { OverloadSlot } from '../../index.js';
import type { OverloadGate } from '../rules/overload-gate.js';
import type { ForwardHeaders } from './forward-headers.js';
import { passGate } from './overload-pass.js';
import { writeRaw } from './response-head.js';
import { openTunnel } from './tunnel.js';

/** What a tunnel needs of the proxy it belongs to. */
export interface TunnelDeps {
  /** The `overload` gate; undefined without one. */
  readonly gate: OverloadGate | undefined;
  /** The upstream origin. */
  readonly upstream: URL;
  /** The path the upstream URL carries, prepended to the request's. */
  readonly basePath: string;
  /** Builds the headers sent upstream. */
  readonly forwardHeaders: ForwardHeaders;
  /** The upstream must answer the handshake within this (connect included), ms. */
  readonly timeoutMs: number;
  /** Logs upstream trouble (throttled). */
  warn(error: unknown, message: string): void;
  /** Ends the caller's hold on the proxy's pool. */
  release(): void;
}

/**
 * Opens a tunnel for an upgrade request `checkUpgrade` accepted, on an upstream connection of its own: the upstream must
 * answer 101, after which bytes are copied both ways until either side closes. With an overload gate the handshake waits for
 * a slot like any request, so a reconnect storm under overload waits its turn by class and tenant; the slot ends with the
 * handshake (a tunnel's life is not a request's latency, nor should it hold a slot). Ends the caller's hold.
 */
export function upgradeThrough(
  deps: TunnelDeps,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  protocol: string,
  extra: readonly HeaderPair[],
): void {
  // A client gone while its upgrade was decided: no tunnel is opened for nobody (its slots are already free).
  if (socket.destroyed) {
    deps.release();
    return;
  }
  const gate = deps.gate;
  if (gate === undefined) {
    tunnel(deps, req, socket, head, protocol, extra, undefined);
    return;
  }
  passGate(
    gate,
    req,
    socket,
    (slot) => {
      if (!slot.allowed) {
        writeRaw(socket, 503, [...extra, ['Retry-After', '1'], ['Floodgate-Overload', slot.reason ?? 'limit']]);
        deps.release();
      } else if (socket.destroyed) {
        slot.cancel();
        deps.release();
      } else tunnel(deps, req, socket, head, protocol, extra, slot);
    },
    () => deps.release(),
  );
}

/** Opens the tunnel; with a slot of the overload gate, ends it with the handshake. Ends the caller's hold. */
function tunnel(
  deps: TunnelDeps,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  protocol: string,
  extra: readonly HeaderPair[],
  slot: OverloadSlot | undefined,
): void {
  try {
    const headers = deps.forwardHeaders.build(req);
    const started = performance.now();
    openTunnel(
      deps.upstream,
      socket,
      { path: deps.basePath + (req.url ?? '/'), method: req.method ?? 'GET', headers, protocol, head, extra },
      deps.timeoutMs,
      (error, timeout) => {
        deps.warn(error, 'upstream upgrade failed');
        writeRaw(socket, timeout ? 504 : 502, extra);
      },
      slot === undefined
        ? undefined
        : (how) => {
            if (how === 'failed') slot.drop();
            else if (how === 'left') slot.cancel();
            else slot.release({ latencyMs: performance.now() - started, error: deps.gate!.overloaded(how.status) });
          },
    );
  } finally {
    deps.release();
  }
}
