/** node:http adapter (`floodgate/node`). */
/**
 * `rateLimit(options)` gives `(req, res) => Promise<boolean>`; true means carry on, false means the response was sent.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpLimiter } from '../http-limiter.js';
import type { HttpRateLimitOptions, RateLimitInfo } from '../types.js';
import { setHeaders, viewOf, writeResponse } from '../respond.js';
import { abandoned, abortOnClose, goneBeforeAdmission } from '../client-gone.js';
import { endAbandoned } from '../handler-done.js';
import { factoryMisused, isRequestLike } from '../slips.js';
import { overloadCheck, type OverloadProtectionOptions } from '../overload-guard.js';

export type { OverloadProtectionOptions } from '../overload-guard.js';

const OWNER = 'floodgate/node rateLimit';
const INTERNAL_ERROR = JSON.stringify({ type: 'about:blank', title: 'Internal Server Error', status: 500 });

/** Options of the node:http adapter: the shared options; callbacks receive the IncomingMessage. `trustProxy: "framework"` is not available. */
export type NodeRateLimitOptions<Req extends IncomingMessage = IncomingMessage> = HttpRateLimitOptions<Req>;

/**
 * Checks one request. Resolves true when the request may go on (rate-limit
 * headers are already set on `res`), false when the limiter has answered
 * (429, 403, 401/400, 503, or 500 when a callback threw). Never rejects.
 */
export type NodeRateLimit<Req extends IncomingMessage = IncomingMessage> = (req: Req, res: ServerResponse) => Promise<boolean>;

/**
 * Creates a rate-limit check for a plain node:http server.
 *
 * @example
 * const limit = rateLimit({ limiter: new RateLimiter({ limit: 100, window: '1m' }) });
 * http.createServer(async (req, res) => {
 *   if (!(await limit(req, res))) return;
 *   res.end('hello');
 * });
 *
 * @throws FloodgateError for invalid options
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage>(options: NodeRateLimitOptions<Req>): NodeRateLimit<Req> {
  if (isRequestLike(options)) {
    // `await rateLimit(req, res)` or `createServer(rateLimit)`: the factory was handed a request. There is no
    // framework to take the error, so it is the warning, and a 500 rather than a request left open.
    const error = factoryMisused(OWNER, 'const limit = rateLimit({ … }) once, then await limit(req, res) per request');
    // eslint-disable-next-line prefer-rest-params
    const res: unknown = arguments[1];
    if (!isResponse(res)) throw error;
    writeResponse(res, 500, [], 'application/problem+json', INTERNAL_ERROR);
    return Promise.resolve(false) as unknown as NodeRateLimit<Req>;
  }
  const limiter = new HttpLimiter<Req>(options, { owner: OWNER, frameworkIp: false });
  return async (req, res) => {
    const view = limiter.mayWait ? { ...viewOf(req, req), signal: abortOnClose(res) } : viewOf(req, req);
    // Awaited only when it is a promise: a refusal the in-memory block already knows needs no turn of the queue.
    const decided = limiter.decide(view);
    const outcome = decided instanceof Promise ? await decided : decided;
    switch (outcome.action) {
      case 'continue':
        setHeaders(res, outcome.headers);
        if (outcome.info !== undefined) {
          (req as { rateLimit?: RateLimitInfo }).rateLimit = outcome.info;
          limiter.watchResponse(req, res, outcome.info);
        }
        // Its client left while it was decided: its slot went back, so its work must not run without one.
        // Ended here, since no handler will: that frees the slot now (see whenHandlerDone).
        if (!(limiter.holdsSlots && goneBeforeAdmission(res))) return true;
        endAbandoned(res);
        return false;
      case 'respond':
        writeResponse(res, outcome.status, outcome.headers, outcome.contentType, outcome.body);
        return false;
      case 'error':
        // A wait its client left: nothing was spent, and nobody is there to answer.
        if (abandoned(outcome.error)) return false;
        // No framework to hand the error to: log it and answer 500 rather than leave the request open.
        limiter.reportError(outcome.error, req);
        writeResponse(res, 500, [], 'application/problem+json', INTERNAL_ERROR);
        return false;
    }
  };
}

/**
 * Creates an overload check for a plain node:http server: every request takes a slot of an `OverloadLimiter` until the
 * handler is done with its response, waiting by priority class and tenant when none is free. Resolves true when the request
 * may go on, false when it was answered (503 with `Retry-After` and `Floodgate-Overload`) or its client left while it
 * waited. Rejects only when a callback threw. See docs/overload.md.
 *
 * @example
 * const overload = overloadProtection({ limiter: new OverloadLimiter(), tenant: (req) => req.headers['x-tenant'] as string });
 * http.createServer(async (req, res) => {
 *   if (!(await overload(req, res))) return;
 *   res.end(await work());
 * });
 *
 * @throws FloodgateError for invalid options
 */
export function overloadProtection<Req extends IncomingMessage = IncomingMessage>(
  options: OverloadProtectionOptions<Req>,
): NodeRateLimit<Req> {
  const check = overloadCheck(options, 'floodgate/node overloadProtection');
  return async (req, res) => {
    const decided = check(req, req, res);
    const outcome = decided instanceof Promise ? await decided : decided;
    if (outcome.action === 'respond') writeResponse(res, outcome.status, outcome.headers, outcome.contentType, outcome.body);
    return outcome.action === 'continue';
  };
}

function isResponse(value: unknown): value is ServerResponse {
  return typeof value === 'object' && value !== null && typeof (value as ServerResponse).writeHead === 'function';
}
