/** The gateway's answer to an HTTP upgrade (WebSocket). */
/**
 * The request target and the handshake checked before any decision, then the rules, then a tunnel to the upstream that
 * holds its rules' slots until it closes.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { abortOnClose, viewOf } from '../../http/index.js';
import type { GatewaySettings } from '../config/settings.js';
import { acceptTarget } from '../rules/path-match.js';
import type { RuleSet } from '../rules/rule-set.js';
import { freeWhenClosed } from '../rules/rule-slots.js';
import { whenDecided } from '../rules/verdict.js';
import type { UpstreamProxy } from './proxy.js';
import { writeRaw } from './response-head.js';
import { checkUpgrade } from './tunnel.js';

/** What an upgrade is decided with: the gateway's state at the moment it arrives. */
export interface UpgradeContext {
  readonly settings: GatewaySettings;
  /** The upstream; undefined for a gateway with no upstream (decision endpoint only). */
  readonly proxy: UpstreamProxy | undefined;
  /** True while the gateway drains: no new tunnel is opened. */
  readonly draining: boolean;
  readonly rules: RuleSet;
  /** The open tunnels, which a drain closes. */
  readonly tunnels: Set<Duplex>;
}

/**
 * Answers one upgrade request. What routers read in different ways is
 * refused before counting (400), as is any upgrade but a complete WebSocket
 * handshake (checkUpgrade); the connection then closes, so nothing written
 * after it reaches the upstream.
 */
export function handleUpgrade(context: UpgradeContext, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const { settings, proxy, rules, tunnels } = context;
  const url = acceptTarget(req, settings.paths);
  if (url === undefined) {
    writeRaw(socket, 400, []);
    return;
  }
  if (proxy === undefined || context.draining) {
    writeRaw(socket, 502, []);
    return;
  }
  const protocol = checkUpgrade(req, settings.proxy.upgrades);
  if (typeof protocol !== 'string') {
    writeRaw(socket, protocol.status, [['Content-Type', 'text/plain; charset=utf-8']], `${protocol.detail}\n`);
    return;
  }
  tunnels.add(socket);
  socket.once('close', () => tunnels.delete(socket));
  proxy.hold();
  const view = rules.waits ? { ...viewOf(req, req), signal: abortOnClose(socket) } : viewOf(req, req);
  whenDecided(rules.decide(view, req.headers.host), (verdict) => {
    if (verdict.forward) {
      freeWhenClosed(req, socket, verdict);
      proxy.upgrade(req, socket, head, protocol, verdict.headers);
      return;
    }
    proxy.release();
    writeRaw(socket, verdict.status, [...verdict.headers, ['Content-Type', verdict.contentType]], verdict.body);
  });
}
