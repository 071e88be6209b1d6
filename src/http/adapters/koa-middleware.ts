/** The Koa middleware around the shared HTTP path, used by `rateLimit` and `grounded` in floodgate/koa. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpLimiter } from '../http-limiter.js';
import { combinedValue, type HeaderPair } from '../headers.js';
import { abandoned, abortOnClose, goneBeforeAdmission } from '../client-gone.js';
import { endAbandoned } from '../handler-done.js';

/**
 * The parts of a Koa context the adapter uses. Typed structurally rather
 * than imported from `koa`, so the types do not depend on `@types/koa`'s
 * version; a Koa `Context` fits.
 */
export interface KoaContextLike {
  /** The node:http request. */
  req: IncomingMessage;
  /** The node:http response. */
  res: ServerResponse;
  /** Koa's client address (per `app.proxy`); read only with `trustProxy: "framework"`. */
  ip: string;
  /** URL path. */
  path: string;
  /** HTTP method. */
  method: string;
  /** Response status. */
  status: number;
  /** Response body. */
  body: unknown;
  /** Sets a response header. */
  set(field: string, value: string): void;
  /** Koa's per-request namespace; floodgate puts its decision in `state.rateLimit`. */
  state?: Record<string, unknown>;
  /** Koa's switch to leave the response alone (set false for a request whose client left while it waited). */
  respond?: boolean;
}

/** A Koa middleware. */
export type KoaMiddleware<Ctx extends KoaContextLike = KoaContextLike> = (ctx: Ctx, next: () => Promise<unknown>) => Promise<void>;

/** Wraps a built {@link HttpLimiter} as a Koa middleware; shared by `rateLimit` and `grounded`. */
export function koaMiddleware<Ctx extends KoaContextLike>(limiter: HttpLimiter<Ctx>): KoaMiddleware<Ctx> {
  return async (ctx, next) => {
    const url = ctx.req.url ?? '/';
    const view = {
      raw: ctx,
      socketAddress: ctx.req.socket?.remoteAddress,
      frameworkIp: limiter.usesFrameworkIp ? ctx.ip : undefined,
      headers: ctx.req.headers,
      method: ctx.method,
      path: ctx.path ?? url.split('?')[0]!,
      ...(limiter.mayWait ? { signal: abortOnClose(ctx.res) } : {}),
    };
    // Awaited only when it is a promise: a refusal the in-memory block already knows needs no turn of the queue.
    const decided = limiter.decide(view);
    const outcome = decided instanceof Promise ? await decided : decided;
    switch (outcome.action) {
      case 'continue':
        setAll(ctx, outcome.headers);
        if (outcome.info !== undefined) {
          (ctx.state ??= {}).rateLimit = outcome.info;
          limiter.watchResponse(ctx, ctx.res, outcome.info);
        }
        // Its client left while it was decided: its slot went back, so its work must not run without one.
        if (limiter.holdsSlots && goneBeforeAdmission(ctx.res)) {
          ctx.respond = false;
          endAbandoned(ctx.res);
          return;
        }
        try {
          await next();
        } finally {
          // Koa does not respond on a closed socket, so a handler whose client left never ends its response:
          // end it here, which frees the slot held until the handler is done (see whenHandlerDone).
          if (limiter.holdsSlots) endAbandoned(ctx.res);
        }
        return;
      case 'respond':
        ctx.status = outcome.status;
        setAll(ctx, outcome.headers);
        // Set before the body: Koa keeps an existing Content-Type instead of guessing one from a string body.
        ctx.set('Content-Type', outcome.contentType);
        ctx.body = outcome.body;
        return;
      case 'error':
        // A wait its client left: nothing was spent and nobody is there to answer; Koa is told not to respond.
        if (abandoned(outcome.error)) {
          ctx.respond = false;
          return;
        }
        throw outcome.error;
    }
  };
}

/** Sets headers through Koa, appending to IETF list fields an earlier middleware set. */
function setAll(ctx: KoaContextLike, headers: readonly HeaderPair[]): void {
  for (const pair of headers) ctx.set(pair[0], combinedValue(pair, ctx.res.getHeader(pair[0])));
}
