/** Koa 2+ adapter (`floodgate/koa`). */
/**
 * `rateLimit(options)` returns a Koa middleware; `grounded(options)` takes koa-grounded's option names.
 */
import { HttpLimiter } from '../http-limiter.js';
import type { HttpRateLimitOptions } from '../types.js';
import { koaMiddleware, type KoaContextLike, type KoaMiddleware } from './koa-middleware.js';
import { factoryMisused, isRequestLike } from '../slips.js';
import { overloadCheck, type OverloadProtectionOptions } from '../overload-guard.js';
import { endAbandoned } from '../handler-done.js';

export type { OverloadProtectionOptions } from '../overload-guard.js';

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

/**
 * Creates a Koa middleware that protects what comes after it from overload: every request takes a slot of an
 * `OverloadLimiter` until the handler is done with its response, waiting by priority class and tenant when none is free,
 * or is answered 503 with `Retry-After` and `Floodgate-Overload`. Use it after the rate limit. See docs/overload.md.
 *
 * @example
 * app.use(overloadProtection({ limiter: new OverloadLimiter(), tenant: (ctx) => ctx.state.user?.org }));
 *
 * @throws FloodgateError for invalid options
 */
export function overloadProtection<Ctx extends KoaContextLike = KoaContextLike>(
  options: OverloadProtectionOptions<Ctx>,
): KoaMiddleware<Ctx> {
  const check = overloadCheck(options, 'floodgate/koa overloadProtection');
  return async (ctx, next) => {
    const decided = check(ctx, ctx.req, ctx.res);
    const outcome = decided instanceof Promise ? await decided : decided;
    if (outcome.action === 'gone') {
      ctx.respond = false;
      return;
    }
    if (outcome.action === 'respond') {
      ctx.status = outcome.status;
      for (const [name, value] of outcome.headers) ctx.set(name, value);
      ctx.set('Content-Type', outcome.contentType);
      ctx.body = outcome.body;
      return;
    }
    try {
      await next();
    } finally {
      // Koa does not respond on a closed socket: end it, which frees the slot held until the handler is done.
      endAbandoned(ctx.res);
    }
  };
}
