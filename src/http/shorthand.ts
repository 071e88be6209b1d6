/** The `limit` / `window` / `store` shorthand of the HTTP options. */
/**
 * The middleware builds its RateLimiter itself, and a `limit` that is a function of the request gets one limiter per
 * distinct limit.
 */
import { type Duration } from '../core/duration.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import type { Store } from '../stores/store.js';
import { isThenable } from './limiter-parts.js';
import type { ClientInfo, LimiterSelector } from './types.js';

/** Distinct limits one `limit` function may answer: plans are few, and a limiter per answer must not grow without bound. */
const MAX_DISTINCT_LIMITS = 100;

/** The shorthand options as given. */
interface Shorthand<Raw> {
  readonly limiter?: unknown;
  readonly limit?: number | ((req: Raw, client: ClientInfo) => number | Promise<number>);
  readonly window?: Duration;
  readonly burst?: number;
  readonly store?: Store;
}

/**
 * The `limiter` the shorthand stands for, or `o.limiter` when none of
 * `limit`, `window`, `burst`, `store` is given (`burst` makes a token bucket). A number `limit` is one RateLimiter;
 * a function gets one per distinct answer (each with the prefix its policy
 * derives, so each limit counts apart: a key that moves to another plan
 * starts afresh there).
 *
 * @throws FloodgateError CONFLICTING_OPTIONS with `limiter` too; INVALID_OPTIONS without `window`; what RateLimiter throws for a bad number
 */
export function limiterOption<Raw>(o: Shorthand<Raw>, owner: string): unknown {
  if (o.limit === undefined && o.window === undefined && o.store === undefined && o.burst === undefined) return o.limiter;
  if (o.limiter !== undefined) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${owner}: give either limiter or limit and window (the middleware then builds the RateLimiter), not both.`,
    );
  }
  if (o.limit === undefined || o.window === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${owner} needs both limit and window, e.g. rateLimit({ limit: 100, window: '15m' }); got ${o.limit === undefined ? 'no limit' : 'no window'}.`,
    );
  }
  const { limit, window, store, burst } = o;
  // A burst is a token bucket's: the shorthand has no algorithm option, so burst chooses it.
  const bucket = burst === undefined ? {} : { algorithm: 'token-bucket' as const, burst };
  const make = (n: number): RateLimiter => new RateLimiter({ limit: n, window, ...bucket, ...(store === undefined ? {} : { store }) });
  if (typeof limit !== 'function') return make(limit);
  const limiters = new Map<number, RateLimiter>();
  const forLimit = (n: unknown): RateLimiter => {
    if (typeof n !== 'number')
      throw new FloodgateError(ErrorCode.INVALID_LIMIT, `the limit function must return a number; got ${describeValue(n)}.`);
    let limiter = limiters.get(n);
    if (limiter === undefined) {
      if (limiters.size >= MAX_DISTINCT_LIMITS) {
        throw new FloodgateError(
          ErrorCode.INVALID_LIMIT,
          `the limit function returned more than ${MAX_DISTINCT_LIMITS} distinct limits; build one RateLimiter per plan and pass limiter: (req) => plans[…].`,
        );
      }
      limiter = make(n);
      limiters.set(n, limiter);
    }
    return limiter;
  };
  const select: LimiterSelector<Raw> = (req, client) => {
    const n = limit(req, client);
    return isThenable(n) ? Promise.resolve(n).then(forLimit) : forLimit(n);
  };
  return select;
}
