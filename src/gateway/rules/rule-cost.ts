/** A rule whose requests cost what the upstream's response reports: the estimate is taken when the request is admitted, and each admitted request is settled once, when its response ends. */
import type { RateLimitInfo } from '../../http/types.js';
import type { RateLimiter } from '../../limiter.js';
import type { UsageSource } from '../config/settings.js';
import { UsageReader, type UsageWarn } from '../serve/response-usage.js';

/**
 * What a rule with `cost` needs to settle its requests: the estimate its
 * HttpLimiter takes from every policy (as the request's cost, so the
 * rule's policies still decide all or nothing in one step), and each
 * policy's limiter by the name the HttpLimiter reports it under.
 */
export class RuleCost {
  /**
   * @param rule - the rule's name, for warnings
   * @param estimate - units taken when a request is admitted
   * @param source - where the response reports its actual cost
   * @param limiters - each policy's limiter, by policy name
   * @param report - receives a settlement the store failed (logged, never thrown)
   * @param warn - receives one-time warnings about the rule's responses
   */
  constructor(
    readonly rule: string,
    readonly estimate: number,
    readonly source: UsageSource,
    private readonly limiters: ReadonlyMap<string, RateLimiter>,
    private readonly report: (error: unknown) => void,
    private readonly warn: UsageWarn,
  ) {}

  /** The charge of a request this rule admitted with `info`; undefined when nothing was counted (an allow-listed request). */
  charge(info: RateLimitInfo | undefined): Charge | undefined {
    return info === undefined ? undefined : new Charge(this, info, Date.now());
  }

  /** A reader of the response's cost, one per forwarded request. */
  reader(): UsageReader {
    return new UsageReader(this.source, this.rule, this.warn);
  }

  /**
   * Moves what each policy counted from the estimate to `actual`: the
   * excess is charged now (it may put the key over its limit; later
   * requests are then refused until it drains), and what is left over is
   * given back, unless the window that counted it has ended (a give-back
   * there would add units to a window that never held them).
   */
  settle(info: RateLimitInfo, admittedAt: number, actual: number): void {
    const delta = actual - this.estimate;
    if (delta === 0) return;
    const now = Date.now();
    for (const report of info.policies) {
      const limiter = this.limiters.get(report.name);
      if (limiter === undefined) continue;
      const key = report.key ?? info.key;
      if (delta > 0) limiter.penalty(key, delta).then(undefined, this.report);
      else if (sameWindow(limiter, admittedAt, report.resetMs, now)) limiter.reward(key, -delta).then(undefined, this.report);
    }
  }
}

/**
 * True while the units taken at `admittedAt` still count in the policy's
 * current window: a fixed window until its reset (which the admission
 * reported), a sliding window within the aligned window it fell in, a
 * sliding log for one window; a token bucket always takes units back.
 */
function sameWindow(limiter: RateLimiter, admittedAt: number, resetMs: number, now: number): boolean {
  const { algorithm, windowMs } = limiter.policy;
  switch (algorithm) {
    case 'fixed-window':
      return now < admittedAt + resetMs;
    case 'sliding-window':
      return Math.floor(now / windowMs) === Math.floor(admittedAt / windowMs);
    case 'sliding-log':
      return now < admittedAt + windowMs;
    default:
      return true;
  }
}

/**
 * One admitted request's cost, settled exactly once: at the response's end
 * with what it reported, or at the estimate when it reported nothing
 * usable, the client left mid-response, or the upstream failed. Never
 * cancelled: once forwarded, the upstream may have done the work.
 */
export class Charge {
  private settled = false;

  /**
   * @param cost - the rule's cost settings and limiters
   * @param info - what the rule's HttpLimiter counted (its policies and keys)
   * @param admittedAt - when, on this process's clock
   */
  constructor(
    readonly cost: RuleCost,
    private readonly info: RateLimitInfo,
    private readonly admittedAt: number,
  ) {}

  /** Settles at `actual`, or at the estimate when undefined; later calls do nothing. */
  settle(actual: number | undefined): void {
    if (this.settled) return;
    this.settled = true;
    if (actual !== undefined) this.cost.settle(this.info, this.admittedAt, actual);
  }
}
