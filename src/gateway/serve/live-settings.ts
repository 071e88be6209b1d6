/** What a config reload can change in a running gateway, and what waits for a restart. */
/**
 * What waits for a restart: listeners, the store, workers.
 */
import { sameAddress } from './listeners.js';
import type { GatewaySettings } from '../config/settings.js';

/**
 * The settings a reload can apply live: `next`, but with those that need new
 * listeners, a new store or new workers kept as `prev` has them, and the
 * names of those that changed (a restart applies them).
 */
export function liveSettings(prev: GatewaySettings, next: GatewaySettings): { kept: string[]; effective: GatewaySettings } {
  const kept: string[] = [];
  if (!sameAddress(prev.listen, next.listen)) kept.push('listen');
  if (!sameAddress(prev.admin, next.admin)) kept.push('admin');
  if (prev.adminToken !== next.adminToken) kept.push('admin token');
  if (prev.workers !== next.workers) kept.push('workers');
  if (JSON.stringify(prev.adminHosts) !== JSON.stringify(next.adminHosts)) kept.push('admin.hosts');
  if (JSON.stringify(prev.store) !== JSON.stringify(next.store)) kept.push('store');
  if (prev.proxy.maxHeaderSize !== next.proxy.maxHeaderSize) kept.push('proxy.maxHeaderSize');
  if (prev.proxy.listenSockets !== next.proxy.listenSockets) kept.push('proxy.listenSockets');
  // Instruments and the store wrapper are made once, at start.
  if ((prev.telemetry?.otel ?? false) !== (next.telemetry?.otel ?? false)) kept.push('telemetry.otel');
  // The rate limit service's own file reloads by itself; its listener and path need a restart.
  if (JSON.stringify(prev.grpc) !== JSON.stringify(next.grpc)) kept.push('grpc');
  const effective: GatewaySettings = {
    ...next,
    listen: prev.listen,
    admin: prev.admin,
    adminToken: prev.adminToken,
    adminHosts: prev.adminHosts,
    workers: prev.workers,
    store: prev.store,
    proxy: { ...next.proxy, maxHeaderSize: prev.proxy.maxHeaderSize, listenSockets: prev.proxy.listenSockets },
    telemetry: prev.telemetry,
    grpc: prev.grpc,
  };
  return { kept, effective };
}
