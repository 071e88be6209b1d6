/** What the store adds to `/readyz` under each failure policy. */
/**
 * Everything under `reject`, only a first connection still being tried under the others (see ReadinessSettings.store).
 */
import type { GatewaySettings } from '../config/settings.js';
import type { GatewayStore } from '../rules/key-tables.js';

/**
 * True when a store that is down or failing makes the gateway not ready:
 * `readiness.store` when set, else only under `store.onFailure: reject`.
 * Under `insurance`, `fail-open` and `fail-closed` a gateway without its
 * store still answers every request as configured, and the store is shared
 * by every replica: readiness tied to it would empty the load balancer at
 * once, so that no fallback ever answered. The rate limit service's health
 * can ask the same.
 */
export function storeCountsForReadiness(settings: GatewaySettings): boolean {
  return settings.readiness.store ?? settings.store.onFailure === 'reject';
}

/**
 * Why the store keeps the gateway from being ready, or undefined.
 * @param breakerOpen - whether some limiter's circuit breaker keeps calls away from the store (read only when the store counts)
 */
export function storeNotReady(settings: GatewaySettings, store: GatewayStore, breakerOpen: () => boolean): string | undefined {
  if (storeCountsForReadiness(settings)) {
    if (!store.ready()) return 'store not connected';
    // A connected store can still fail every call (a stalled Redis keeps its connection); the limiters' breakers
    // know, and turn readiness back on by themselves once their cooldown passes or a probe gets an answer.
    if (breakerOpen()) return 'store failing (circuit breaker open)';
    return undefined;
  }
  if (store.connecting?.() === true) return 'store connecting';
  return undefined;
}
