/** Counting a rule's admitted requests that leave their key near a policy's limit (`floodgate_near_limit_total`). */
/**
 * As envoyproxy/ratelimit's `near_limit`: per rule and policy, never per key, so a scrape shows which limits clients
 * run close to without a series per client.
 */
import type { RateLimitInfo } from '../../http/index.js';
import type { GatewayMetrics, NearLimitCell } from '../runtime/metrics.js';

/** The near-limit counter of one rule. */
export class NearLimit {
  /** The rule's cells by policy name, bound the first time a policy is near its limit. */
  private readonly cells = new Map<string, NearLimitCell>();

  /**
   * @param rule - the rule's name
   * @param ratio - the share of a policy's limit a key must have used (above 0, at most 1)
   * @param metrics - where the counts go
   */
  constructor(
    readonly rule: string,
    readonly ratio: number,
    private readonly metrics: GatewayMetrics,
  ) {}

  /**
   * Counts an admitted request under each policy that it left with at least
   * `ratio` × limit used (the limit of the key's override, when it has one).
   * A policy that admitted only as a shadow, or did not answer (its store
   * failed), is not counted.
   */
  note(info: RateLimitInfo): void {
    for (const p of info.policies) {
      if (!p.allowed || p.shadowLimited === true || p.limit - p.remaining < this.ratio * p.limit - 1e-9) continue;
      let cell = this.cells.get(p.name);
      if (cell === undefined) {
        cell = this.metrics.nearLimitCell(this.rule, p.name);
        this.cells.set(p.name, cell);
      }
      cell.count += 1;
    }
  }
}
