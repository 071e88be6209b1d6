/** Express 4 and 5 adapter (`floodgate/express`): `rateLimit(options)` returns a middleware `(req, res, next)`. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpLimiter } from '../http-limiter.js';
import type { HttpOutcome, HttpRateLimitOptions, RateLimitInfo } from '../types.js';
import { setHeaders, viewOf, writeResponse } from '../respond.js';
import { abandoned, abortOnClose, goneBeforeAdmission } from '../client-gone.js';
import { endAbandoned } from '../handler-done.js';
import { factoryMisused, isRequestLike } from '../slips.js';
import { overloadCheck, type OverloadOutcome, type OverloadProtectionOptions } from '../overload-guard.js';

export type { OverloadProtectionOptions } from '../overload-guard.js';

const OWNER = 'floodgate/express rateLimit';

/**
 * The parts of an Express request the adapter reads. Typed structurally
 * rather than imported from `express`, so the types work for Express 4 and
 * 5 and without `@types/express` installed; an Express `Request` fits.
 */
export interface ExpressRequestLike extends IncomingMessage {
  /** Express's client address (per its `trust proxy` setting); read only with `trustProxy: "framework"`. */
  ip?: string | undefined;
  /** The URL before mount paths were stripped. */
  originalUrl?: string;
}

/** An Express middleware. */
export type ExpressMiddleware<Req extends ExpressRequestLike = ExpressRequestLike> = (
  req: Req,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/** Options of the Express adapter: the shared options; callbacks receive the Express request. */
export type ExpressRateLimitOptions<Req extends ExpressRequestLike = ExpressRequestLike> = HttpRateLimitOptions<Req>;

/**
 * Creates an Express middleware. Mount it on the app for a global limit or
 * on a route for a per-route limit. Errors from callbacks go to `next(err)`;
 * store failures never do (they follow `onStoreError`).
 *
 * `Req` is the request type the callbacks receive, e.g. `Request & { user: User }`
 * when an earlier middleware sets `user`. The middleware itself takes any
 * Express request: typed with `Req`, it would not fit `app.use` under
 * `strict` (TS2769), since Express's own `Request` has no `user`.
 *
 * @example
 * app.use(rateLimit({ limiter: new RateLimiter({ limit: 100, window: '1m' }) }));
 *
 * @throws FloodgateError for invalid options
 */
export function rateLimit<Req extends ExpressRequestLike = ExpressRequestLike>(options: ExpressRateLimitOptions<Req>): ExpressMiddleware {
  if (isRequestLike(options)) {
    // `app.use(rateLimit)`: Express calls the factory with (req, res, next) on every request.
    // eslint-disable-next-line prefer-rest-params
    const next: unknown = arguments[2];
    const error = factoryMisused(OWNER, 'app.use(rateLimit({ … }))');
    if (typeof next !== 'function') throw error;
    (next as (error: unknown) => void)(error);
    return undefined as unknown as ExpressMiddleware;
  }
  const limiter = new HttpLimiter<Req>(options, { owner: OWNER, frameworkIp: true });
  const act = (req: ExpressRequestLike, res: ServerResponse, next: (error?: unknown) => void, outcome: HttpOutcome): void => {
    switch (outcome.action) {
      case 'continue':
        setHeaders(res, outcome.headers);
        if (outcome.info !== undefined) {
          (req as { rateLimit?: RateLimitInfo }).rateLimit = outcome.info;
          limiter.watchResponse(req as Req, res, outcome.info);
        }
        // Its client left while it was decided: its slot went back, so its work must not run without one.
        // Ended here, since no handler will: that frees the slot now (see whenHandlerDone).
        if (limiter.holdsSlots && goneBeforeAdmission(res)) return endAbandoned(res);
        next();
        return;
      case 'respond':
        writeResponse(res, outcome.status, outcome.headers, outcome.contentType, outcome.body);
        return;
      case 'error':
        // A wait its client left: nothing was spent, and nobody is there to answer; not an error for the app.
        if (abandoned(outcome.error)) return;
        next(outcome.error);
        return;
    }
  };
  return (req, res, next) => {
    // The app vouches for `Req` (see above); the callbacks get the request as it comes.
    const raw = req as Req;
    const plain = viewOf(req, raw, req.originalUrl ?? req.url, limiter.usesFrameworkIp ? req.ip : undefined);
    const view = limiter.mayWait ? { ...plain, signal: abortOnClose(res) } : plain;
    const decided = limiter.decide(view);
    // A refusal the in-memory block already knows is answered in this turn, without a promise.
    if (!(decided instanceof Promise)) {
      act(req, res, next, decided);
      return;
    }
    // Express 4 ignores a returned promise, so the chain ends here, with every path calling next or answering.
    void decided.then((outcome) => act(req, res, next, outcome)).catch((error: unknown) => limiter.reportError(error, raw));
  };
}

/**
 * Creates an Express middleware that protects what comes after it from overload: every request takes a slot of an
 * `OverloadLimiter` (adaptive by default) until the app is done with its response, waiting by priority class and tenant when
 * none is free, or is answered 503 with `Retry-After` and `Floodgate-Overload`. Mount it after the rate limit, so requests
 * refused for their quota never take a slot. See docs/overload.md.
 *
 * @example
 * const overload = new OverloadLimiter({ adaptive: { maxLimit: 200 } });
 * app.use('/api', overloadProtection({ limiter: overload, priority: (req) => (req.path.startsWith('/batch') ? 'sheddable' : undefined) }));
 *
 * @throws FloodgateError for invalid options
 */
export function overloadProtection<Req extends ExpressRequestLike = ExpressRequestLike>(
  options: OverloadProtectionOptions<Req>,
): ExpressMiddleware {
  const check = overloadCheck(options, 'floodgate/express overloadProtection');
  const act = (res: ServerResponse, next: (error?: unknown) => void, outcome: OverloadOutcome): void => {
    if (outcome.action === 'continue') next();
    else if (outcome.action === 'respond') writeResponse(res, outcome.status, outcome.headers, outcome.contentType, outcome.body);
  };
  return (req, res, next) => {
    let decided: OverloadOutcome | Promise<OverloadOutcome>;
    try {
      decided = check(req as Req, req, res);
    } catch (error) {
      next(error);
      return;
    }
    if (decided instanceof Promise) void decided.then((outcome) => act(res, next, outcome), next);
    else act(res, next, decided);
  };
}
