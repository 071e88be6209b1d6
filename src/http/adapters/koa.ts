/** Koa 2+ adapter (`floodgate/koa`). */
/**
 * `rateLimit(options)` returns a Koa middleware; `grounded(options)` takes koa-grounded's option names.
 */
import { HttpLimiter } from '../http-limiter.js';
import type { HttpRateLimitOptions } from '../types.js';
import { koaMiddleware, type KoaContextLike, type KoaMiddleware } from './koa-middleware.js';
import { factoryMisused, isRequestLike } from '../slips.js';

const OWNER = 'floodgate/koa rateLimit';

export { grounded, GROUNDED_OPTION_NAMES } from './compat/koa-grounded.js';
export type { GroundedOptions, GroundedMiddleware } from './compat/koa-grounded.js';
export { koaMiddleware } from './koa-middleware.js';
export type { KoaContextLike, KoaMiddleware } from './koa-middleware.js';

/** Options of the Koa adapter: the shared options; callbacks receive the Koa context. */
export type KoaRateLimitOptions<Ctx extends KoaContextLike = KoaContextLike> = HttpRateLimitOptions<Ctx>;

/**
 * Creates a Koa middleware. Use it with `app.use` for a global limit or on a
 * router route for a per-route limit. Errors from callbacks are thrown to
 * Koa's error handling; store failures never are (they follow
 * `onStoreError`).
 *
 * @example
 * app.use(rateLimit({ limiter: new RateLimiter({ limit: 100, window: '1m' }) }));
 *
 * @throws FloodgateError for invalid options
 */
export function rateLimit<Ctx extends KoaContextLike = KoaContextLike>(options: KoaRateLimitOptions<Ctx>): KoaMiddleware<Ctx> {
  // `app.use(rateLimit)`: Koa calls the factory with (ctx, next) on every request; the error goes to Koa's error handling.
  if (isRequestLike(options)) throw factoryMisused(OWNER, 'app.use(rateLimit({ … }))');
  return koaMiddleware(new HttpLimiter<Ctx>(options, { owner: OWNER, frameworkIp: true }));
}
