/** What a gateway counts with, opened at start. */
/**
 * Its metrics (mirrored to OpenTelemetry when configured), its store, and the throttled log of store failures.
 */
import { throttled } from '../../util/throttle.js';
import { floodgateVersion } from '../runtime/own-package.js';
import type { GatewaySettings } from '../config/settings.js';
import { openStore, type GatewayStore } from '../rules/key-tables.js';
import { keepSnapshots, readSnapshotFile } from './snapshot-file.js';
import { keyId, type GatewayLogger } from '../runtime/log.js';
import { GatewayMetrics } from '../runtime/metrics.js';
import { loadOtelApi, type PromClient } from '../runtime/optional-deps.js';
import { gatewayOtel } from '../runtime/otel-metrics.js';

/** A gateway's metrics and store, and the function that stops its OpenTelemetry callbacks (when on). */
export interface Counting {
  readonly metrics: GatewayMetrics;
  readonly store: GatewayStore;
  readonly stopOtel: (() => void) | undefined;
}

/**
 * Opens the metrics and the store of `settings`.
 * @throws FloodgateError MISSING_DEPENDENCY with telemetry.otel and no @opentelemetry/api, or without ioredis for Redis
 */
export async function openCounting(
  settings: GatewaySettings,
  deps: { readonly prom: PromClient },
  log: GatewayLogger,
  clustered: boolean,
): Promise<Counting> {
  // Off unless configured: without telemetry.otel, @opentelemetry/api is never loaded.
  const otel = settings.telemetry?.otel === true ? gatewayOtel(await loadOtelApi(), floodgateVersion()) : undefined;
  const metrics = new GatewayMetrics(deps.prom, otel?.tap);
  const snapshot = clustered ? undefined : settings.store.snapshot;
  // Read before the store opens: a snapshot that cannot be restored ends the start before anything listens.
  const restored = snapshot === undefined ? undefined : await readSnapshotFile(settings, log, 'per-rule');
  const opened = await openStore(settings.store, metrics, clustered, storeFailureLog(log), overrideRefusalLog(log), otel?.tracer, restored);
  const store =
    snapshot === undefined
      ? opened
      : await keepSnapshots(opened, snapshot, log).catch(async (error: unknown) => {
          await opened.close();
          throw error;
        });
  return { metrics, store, stopOtel: otel?.observe(metrics) };
}

/**
 * Logs store failures at most once per 10 s, with how many were held back:
 * an outage would otherwise log at the request rate. Every failure mode
 * (insurance, fail-open, fail-closed, reject) is logged here, once.
 */
export function storeFailureLog(log: GatewayLogger): (error: unknown) => void {
  return throttled<unknown>(10_000, (error, held) => log.warn({ err: error, suppressed: held }, 'rate-limit store problem'));
}

/**
 * Logs an override entry of a Redis hash that a rule refused (it stays out,
 * and the rule's own numbers apply to the keys it names), at most once per
 * 10 s with how many were held back: a bad entry is read again on every
 * change of its hash. The pattern may be an API key, so it is logged as
 * `key#` and the first 12 hex digits of its SHA-256, as keys are
 * everywhere in the log; `GET /admin/rules/RULE/overrides` lists it in clear.
 */
function overrideRefusalLog(log: GatewayLogger): (hash: string, rule: string, pattern: string, why: string) => void {
  const warn = throttled<{ hash: string; rule: string; pattern: string; why: string }>(10_000, (e, held) =>
    log.warn({ hash: e.hash, rule: e.rule, pattern: `key#${keyId(e.pattern)}`, suppressed: held }, `override entry refused: ${e.why}`),
  );
  return (hash, rule, pattern, why) => warn({ hash, rule, pattern, why });
}
