/** The process's budget of request-body bytes held in memory (`proxy.requestBufferTotal`). */
/**
 * Buffering a body takes from it, its answer's end gives back.
 */
import type { GatewayMetrics } from '../runtime/metrics.js';

/**
 * Bytes of request bodies held in memory at once. Each body is bounded by
 * `proxy.requestBuffer`, but nothing bounded how many: 100 connections
 * pipelining 32 bodies of 64 KiB each held 200 MB, and the defaults allowed
 * about 20 GiB. A body that does not fit streams instead (see readBody).
 */
export class RequestBufferBudget {
  /** Bytes held now. */
  used = 0;

  /** @param limit - most bytes held at once (`proxy.requestBufferTotal`); 0 holds none */
  constructor(public limit: number) {}

  /** Takes `bytes` when they fit under the limit; false (nothing taken) when they do not. */
  take(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  /** Gives back `bytes` taken earlier. */
  give(bytes: number): void {
    this.used -= bytes;
  }
}

const budgets = new WeakMap<GatewayMetrics, RequestBufferBudget>();

/**
 * The budget of the gateway `metrics` belong to, with its limit set to
 * `limit`. One gateway keeps one budget across reloads, so bodies still held
 * by a retired proxy count against the same total as the new proxy's; its
 * use is the `floodgate_request_buffer_bytes` gauge.
 */
export function requestBufferBudget(metrics: GatewayMetrics, limit: number): RequestBufferBudget {
  let budget = budgets.get(metrics);
  if (budget === undefined) {
    const created = new RequestBufferBudget(limit);
    budgets.set(metrics, created);
    metrics.requestBufferBytes = () => created.used;
    budget = created;
  }
  budget.limit = limit;
  return budget;
}
