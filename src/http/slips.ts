/** The likeliest slips in mounting the middleware, each caught with a message that says what was meant. */
/**
 * The slips: the factory mounted itself, a RateLimiter passed as the options, a proxy the limiter is not told about.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import { assertKnownOptions } from '../core/validate.js';
import { warnOnce, WarningCode } from '../core/warnings.js';

/** Which of the middleware's one-time warnings are on; see {@link ValidateOptions}. */
export interface ValidateOptions {
  /**
   * Warn once when requests carry `X-Forwarded-For` or `Forwarded`, the key
   * is the client IP and `trustProxy` is unset (every client behind the
   * proxy would share its quota). Default true.
   */
  readonly forwardedHeader?: boolean;
}

/** The checks of {@link ValidateOptions}, resolved. */
export interface ValidateSettings {
  readonly forwardedHeader: boolean;
}

/** The keys of {@link ValidateOptions}. */
export const VALIDATE_NAMES = ['forwardedHeader'] as const;

/**
 * Checks the `validate` option: `true` (default) or `false` for all of this
 * middleware's warnings, or an object turning single ones off.
 * @throws FloodgateError UNKNOWN_OPTION or INVALID_OPTIONS
 */
export function parseValidate(value: unknown, owner: string): ValidateSettings {
  if (value === undefined || value === true) return { forwardedHeader: true };
  if (value === false) return { forwardedHeader: false };
  assertKnownOptions(value, VALIDATE_NAMES, `${owner} validate`);
  const v = value as ValidateOptions;
  if (v.forwardedHeader !== undefined && typeof v.forwardedHeader !== 'boolean') {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `validate.forwardedHeader must be true or false; got ${describeValue(v.forwardedHeader)}.`,
    );
  }
  return { forwardedHeader: v.forwardedHeader ?? true };
}

/**
 * Throws when `options` is a RateLimiter: the options object was left out
 * around it. Its own option names ("policy", "store", …) would otherwise be
 * reported as unknown options, which names the symptom, not the slip.
 *
 * @param what - what was given the limiter, e.g. `"floodgate/express rateLimit()"`
 * @param usage - the right call, e.g. `"rateLimit({ limiter })"`
 */
export function assertNotLimiter(options: unknown, what: string, usage: string): void {
  if (options instanceof RateLimiter) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${what} takes options, not a RateLimiter: write ${usage}.`);
  }
}

/**
 * True when what a middleware factory got as its options is a request (an
 * IncomingMessage, or a Koa context holding one): the factory itself was
 * mounted, so the framework calls it per request.
 */
export function isRequestLike(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as { headers?: unknown; socket?: unknown; method?: unknown; req?: unknown; res?: unknown };
  if (typeof v.headers === 'object' && v.headers !== null && typeof v.method === 'string' && typeof v.socket === 'object') return true;
  // A Koa context: it holds the request and response it wraps.
  return typeof v.req === 'object' && v.req !== null && typeof v.res === 'object' && v.res !== null && isRequestLike(v.req);
}

/**
 * The error for a request that reached the factory instead of the middleware,
 * after a one-time warning with the same text (the request's own error may
 * be swallowed by an error handler, the warning is not).
 *
 * @param usage - the right call, e.g. `"app.use(rateLimit({ … }))"`
 * @param kind - what the misused export is: a middleware factory, or a Fastify plugin
 */
export function factoryMisused(owner: string, usage: string, kind: 'factory' | 'plugin' = 'factory'): FloodgateError {
  const fix = kind === 'factory' ? 'it is called with options' : 'it is registered';
  const message = `${owner} is a ${kind}: write ${usage}. It was given a request, so it was mounted itself and every request fails until ${fix}.`;
  warnOnce(WarningCode.FACTORY_USED_AS_MIDDLEWARE, message, owner);
  return new FloodgateError(ErrorCode.INVALID_OPTIONS, message);
}

/**
 * The watch for the proxy trap: requests carry `X-Forwarded-For` (or
 * `Forwarded`) while the key is the client IP and `trustProxy` is unset, so
 * the key is the proxy's address and every client behind it shares one
 * quota. Returns a function to call with each request's headers; it returns
 * true once it has warned (then it need not be called again).
 *
 * @param subject - who the warning is about (the middleware and its policies): one warning per limiter
 * @param frameworkIp - whether `trustProxy: "framework"` is available to suggest
 */
export function forwardedHeaderWatch(subject: string, frameworkIp: boolean): (headers: IncomingHttpHeaders) => boolean {
  return (headers) => {
    const header = headers['x-forwarded-for'] !== undefined ? 'X-Forwarded-For' : headers.forwarded !== undefined ? 'Forwarded' : undefined;
    if (header === undefined) return false;
    const framework = frameworkIp ? `, or "framework" to follow the framework's own proxy setting` : '';
    warnOnce(
      WarningCode.FORWARDED_HEADER_IGNORED,
      `${subject}: requests carry ${header} but trustProxy is unset, so they are counted by the proxy's address and every client behind that proxy shares one quota. Set trustProxy to the number of proxies in front of the app (e.g. trustProxy: 1), their addresses or CIDRs${framework}. If the header does not come from a proxy of yours, set trustProxy: false (or validate: { forwardedHeader: false }) to silence this warning.`,
      subject,
    );
    return true;
  };
}
