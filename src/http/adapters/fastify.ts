/** Fastify 4 and 5 adapter (`floodgate/fastify`). */
/**
 * A plugin that adds a rate-limit hook to every route, with per-route options in `config.rateLimit`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { assertKnownOptions } from '../../core/validate.js';
import { HTTP_OPTION_NAMES, type HttpOutcome, type HttpRateLimitOptions, type RateLimitInfo } from '../types.js';
import { HttpLimiter } from '../http-limiter.js';
import { combinedValue, type HeaderPair } from '../headers.js';
import { abandoned, abortOnClose, goneBeforeAdmission } from '../client-gone.js';
import { endAbandoned } from '../handler-done.js';
import { assertNotLimiter, factoryMisused, isRequestLike, VALIDATE_NAMES, type ValidateOptions } from '../slips.js';
import { checkFastifyVersion, routesBefore } from './fastify-checks.js';
import { warnOnce, WarningCode } from '../../core/warnings.js';

/** Options a route may set in `config: { rateLimit: { … } }`; they override the plugin's. `false` turns limiting off for the route. */
export type FastifyRouteRateLimit = Partial<HttpRateLimitOptions<FastifyRequest>> | false;

/** The hook the limiter runs in. */
export type FastifyRateLimitHook = 'onRequest' | 'preValidation' | 'preHandler';

declare module 'fastify' {
  interface FastifyRequest {
    /** The decision floodgate made for this request, when it counted it (see RateLimitInfo). */
    rateLimit?: RateLimitInfo;
  }
  interface FastifyContextConfig {
    /** floodgate's options for this route (they override the plugin's), or `false` for no limit here. */
    rateLimit?: FastifyRouteRateLimit;
  }
}

/** The plugin's `validate`: the shared warnings, plus the one only a plugin can give. */
export interface FastifyValidateOptions extends ValidateOptions {
  /** Warn once when routes were registered before the plugin (they are not limited). Default true. */
  readonly routesBeforePlugin?: boolean;
}

/** Options of the Fastify plugin: the shared options (callbacks receive the Fastify request) plus `global` and `hook`. */
export interface FastifyRateLimitOptions extends Partial<Omit<HttpRateLimitOptions<FastifyRequest>, 'validate'>> {
  /** The plugin's one-time warnings: `true` (default), `false` for none, or an object turning single ones off. */
  validate?: boolean | FastifyValidateOptions;
  /**
   * Limit every route (default `true`; `limiter` is then required here), or
   * only routes with `config.rateLimit` (`false`).
   */
  global?: boolean;
  /**
   * Where the check runs. Default `"onRequest"`: before the body is read, so
   * refused requests cost the least. Use `"preHandler"` when `key` needs
   * what other hooks add (an authenticated user, a parsed body).
   */
  hook?: FastifyRateLimitHook;
}

/** The Fastify plugin type, without naming Fastify's generic parameters. */
export interface FastifyRateLimitPlugin {
  (instance: FastifyInstance, options: FastifyRateLimitOptions): Promise<void>;
}

const PLUGIN_OPTION_NAMES = [...HTTP_OPTION_NAMES, 'global', 'hook'] as const;
/** Options Fastify's `register` itself understands; they may reach the plugin and are ignored. */
const REGISTER_OPTION_NAMES = ['prefix', 'logLevel', 'logSerializers'] as const;
const HOOKS: readonly FastifyRateLimitHook[] = ['onRequest', 'preValidation', 'preHandler'];
/** The Content-Type Fastify 4 and 5 set for a string body sent without one; the same as floodgate's text bodies. */
const FASTIFY_TEXT_TYPE = 'text/plain; charset=utf-8';
/** Marks floodgate's hooks so a route seen twice (e.g. an automatic HEAD route) is not limited twice. */
const MARK = Symbol.for('floodgate.fastify.hook');

/**
 * A callback-style hook: Fastify runs a three-argument hook without a promise,
 * so a refusal the in-memory block already knows is answered in the same turn.
 */
type Hook = ((request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void) & { [MARK]?: true };

/**
 * The plugin. Register it before the routes it should cover:
 *
 * @example
 * await app.register(rateLimit, { limiter: new RateLimiter({ limit: 100, window: '1m' }) });
 * app.get('/login', { config: { rateLimit: { limiter: loginLimiter } } }, handler);
 * app.get('/health', { config: { rateLimit: false } }, handler);
 *
 * It is not encapsulated (like `fastify-plugin`), so it sees the routes of
 * the whole application. Options are validated when it is registered, and
 * each route's when the route is added (errors surface from `ready()`).
 */
export const rateLimit: FastifyRateLimitPlugin = async function floodgateRateLimit(instance, options) {
  const owner = 'floodgate/fastify rateLimit';
  // `app.addHook('onRequest', rateLimit)`: Fastify calls the plugin with (request, reply, done) per request.
  if (isRequestLike((instance as unknown as { raw?: unknown }).raw)) {
    throw factoryMisused(owner, 'await app.register(rateLimit, { … })', 'plugin');
  }
  checkFastifyVersion(instance.version, owner);
  assertNotLimiter(options, `${owner}()`, 'app.register(rateLimit, { limiter })');
  assertKnownOptions(options, [...PLUGIN_OPTION_NAMES, ...REGISTER_OPTION_NAMES], owner);
  const { global = true, hook = 'onRequest', validate, ...rest } = options;
  for (const name of REGISTER_OPTION_NAMES) delete (rest as Record<string, unknown>)[name];
  let warnRoutesBefore = validate !== false;
  if (typeof validate === 'object' && validate !== null) {
    assertKnownOptions(validate, [...VALIDATE_NAMES, 'routesBeforePlugin'], `${owner} validate`);
    const { routesBeforePlugin, ...shared } = validate;
    if (routesBeforePlugin !== undefined && typeof routesBeforePlugin !== 'boolean') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `validate.routesBeforePlugin must be true or false; got ${describeValue(routesBeforePlugin)}.`,
      );
    }
    warnRoutesBefore = routesBeforePlugin ?? true;
    (rest as HttpRateLimitOptions<FastifyRequest>).validate = shared;
  } else if (validate !== undefined) {
    (rest as HttpRateLimitOptions<FastifyRequest>).validate = validate;
  }
  if (typeof global !== 'boolean') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `global must be true or false; got ${describeValue(global)}.`);
  }
  if (!HOOKS.includes(hook)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `hook must be one of ${HOOKS.map((h) => JSON.stringify(h)).join(', ')}; got ${describeValue(hook)}.`,
    );
  }
  const base = rest as Partial<HttpRateLimitOptions<FastifyRequest>>;
  // Built now so that bad plugin options fail at register time, and shared by every route without its own options.
  const shared = global ? new HttpLimiter<FastifyRequest>(base as HttpRateLimitOptions<FastifyRequest>, adapterConfig(owner)) : undefined;
  const sharedHook = shared === undefined ? undefined : makeHook(shared);

  // Fastify tells a plugin only of the routes added after it: earlier ones stay unlimited, silently.
  if (global && warnRoutesBefore) {
    const earlier = routesBefore(instance.printRoutes(), instance.prefix);
    if (earlier.length > 0) {
      const shown = earlier.slice(0, 5).join(', ') + (earlier.length > 5 ? `, and ${earlier.length - 5} more` : '');
      warnOnce(
        WarningCode.PLUGIN_AFTER_ROUTES,
        `${owner} was registered after ${earlier.length === 1 ? 'a route' : `${earlier.length} routes`} (${shown}), which it does not limit (Fastify tells a plugin only of routes added after it): register floodgate before your routes (await app.register(rateLimit, …)); for a route meant to stay unlimited, give it config: { rateLimit: false } instead, or set validate: { routesBeforePlugin: false }.`,
        `${owner} ${instance.prefix}`,
      );
    }
  }

  instance.addHook('onRoute', (route) => {
    const config = (route.config ?? {}) as { rateLimit?: unknown };
    const own = config.rateLimit;
    if (own === false) return;
    if (own === undefined && sharedHook === undefined) return;
    let routeHook: Hook;
    if (own === undefined) {
      routeHook = sharedHook!;
    } else {
      const where = `${owner} (route ${String(route.method)} ${route.url})`;
      assertNotLimiter(own, `${where} config.rateLimit`, 'config: { rateLimit: { limiter } }');
      assertKnownOptions(own, HTTP_OPTION_NAMES, `${where} config.rateLimit`);
      routeHook = makeHook(
        new HttpLimiter<FastifyRequest>({ ...base, ...(own as object) } as HttpRateLimitOptions<FastifyRequest>, adapterConfig(where)),
      );
    }
    const existing = route[hook] as Hook | Hook[] | undefined;
    const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
    if (list.some((h) => h[MARK] === true)) return;
    // First in its phase: a refused request should cost as little as possible.
    (route as unknown as Record<string, unknown>)[hook] = [routeHook, ...list];
  });
};

// What fastify-plugin would set: run in the parent's context (so onRoute sees every route), with a readable name.
Object.defineProperty(rateLimit, Symbol.for('skip-override'), { value: true });
Object.defineProperty(rateLimit, Symbol.for('fastify.display-name'), { value: 'floodgate' });
// No `fastify` range here: Fastify 3 would refuse it with a message about plugin metadata; checkFastifyVersion names the versions.
Object.defineProperty(rateLimit, Symbol.for('plugin-meta'), { value: { name: 'floodgate' } });

function adapterConfig(owner: string): { owner: string; frameworkIp: boolean } {
  return { owner, frameworkIp: true };
}

function makeHook(limiter: HttpLimiter<FastifyRequest>): Hook {
  const act = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void, outcome: HttpOutcome): void => {
    switch (outcome.action) {
      case 'continue':
        setAll(reply, outcome.headers);
        if (outcome.info !== undefined) {
          request.rateLimit = outcome.info;
          limiter.watchResponse(request, reply.raw, outcome.info);
        }
        // Its client left while it was decided: its slot went back, so its work must not run without one.
        if (limiter.holdsSlots && goneBeforeAdmission(reply.raw)) {
          reply.code(499).send();
          // Ended here, since no handler will: that frees the slot now (see whenHandlerDone).
          endAbandoned(reply.raw);
          return;
        }
        done();
        return;
      case 'respond':
        reply.code(outcome.status);
        setAll(reply, outcome.headers);
        // Fastify gives a string body without a type this very one; setting it is a header call per refusal.
        if (outcome.contentType !== FASTIFY_TEXT_TYPE || reply.hasHeader('content-type')) reply.header('content-type', outcome.contentType);
        // Answering without calling done ends the request here; Fastify runs no route.
        if (outcome.contentType.includes('charset')) {
          reply.send(outcome.body);
        } else {
          // Fastify appends "; charset=utf-8" to a JSON type sent with a string body; bytes go as typed, as
          // every other adapter sends them (RFC 8259 defines no charset parameter for JSON). A fresh Buffer
          // each time: an onSend hook may change the payload it is given.
          reply.send(Buffer.from(outcome.body));
        }
        return;
      case 'error':
        // A wait its client left: nothing was spent and nobody is there to answer; ended quietly, not as an error.
        if (abandoned(outcome.error)) {
          reply.code(499).send();
          return;
        }
        done(outcome.error instanceof Error ? outcome.error : new Error(String(outcome.error)));
        return;
    }
  };
  const hook: Hook = function floodgateHook(request, reply, done) {
    const url = request.url;
    const q = url.indexOf('?');
    const view = {
      raw: request,
      socketAddress: request.raw.socket?.remoteAddress,
      frameworkIp: limiter.usesFrameworkIp ? request.ip : undefined,
      headers: request.headers,
      method: request.method,
      path: q < 0 ? url : url.slice(0, q),
      ...(limiter.mayWait ? { signal: abortOnClose(reply.raw) } : {}),
    };
    const decided = limiter.decide(view);
    if (!(decided instanceof Promise)) {
      act(request, reply, done, decided);
      return;
    }
    decided.then(
      (outcome) => act(request, reply, done, outcome),
      (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
    );
  };
  hook[MARK] = true;
  return hook;
}

/** Sets headers on the reply, appending to IETF list fields set before (by another floodgate hook, say). */
function setAll(reply: FastifyReply, headers: readonly HeaderPair[]): void {
  for (const pair of headers) {
    // Only IETF list fields combine with an earlier value; asking Fastify for the others is wasted work per request.
    reply.header(pair[0], pair[2] === true ? combinedValue(pair, reply.getHeader(pair[0])) : pair[1]);
  }
}
