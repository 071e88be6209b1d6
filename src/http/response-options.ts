/** The HTTP middleware's options that act while a response runs. */
/**
 * The concurrency limiter whose slot a request holds, and the cost settled when the response ends.
 */
import { ConcurrencyLimiter } from '../limiter/concurrency-limiter.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { optionalFunction } from '../core/validate.js';
import type { ResponseSettings, RewardRule } from './settings.js';
import type { HttpRateLimitOptions } from './types.js';

/**
 * Checks `concurrency` and `actualCost`.
 * @throws FloodgateError INVALID_OPTIONS for a concurrency that is no ConcurrencyLimiter or an actualCost that is no function,
 *   CONFLICTING_OPTIONS for actualCost with a reward rule (both would settle the same units)
 */
export function parseResponseOptions<Raw>(
  o: HttpRateLimitOptions<Raw>,
  rewardRule: RewardRule<Raw> | undefined,
  owner: string,
): ResponseSettings<Raw> {
  let concurrency: ResponseSettings<Raw>['concurrency'];
  if (o.concurrency !== undefined) {
    if (!(o.concurrency instanceof ConcurrencyLimiter)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `${owner} concurrency takes a ConcurrencyLimiter, e.g. concurrency: new ConcurrencyLimiter({ store, limit: 10 }); got ${describeValue(o.concurrency)}.`,
      );
    }
    concurrency = { limiter: o.concurrency, name: `${o.concurrency.limit}-in-flight` };
  }
  const actualCost = optionalFunction(o.actualCost, 'actualCost');
  if (actualCost !== undefined && rewardRule !== undefined) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${owner} actualCost and skipFailedRequests/skipSuccessfulRequests both settle a request's units when its response ends; keep actualCost and return 0 for a response that should not count.`,
    );
  }
  return { concurrency, actualCost };
}
