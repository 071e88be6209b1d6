/** The middleware's overload check: an OverloadLimiter slot per request, held until the app is done with its response. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { assertKnownOptions, optionalFunction } from '../core/validate.js';
import { OverloadLimiter, type OverloadRequest, type OverloadSlot } from '../limiter/overload-limiter.js';
import { abandoned } from './client-gone.js';
import { whenHandlerDone } from './handler-done.js';
import type { HeaderPair } from './headers.js';

/** Options of every adapter's `overloadProtection`; the callbacks receive the framework's request (or Koa context). */
export interface OverloadProtectionOptions<Raw> {
  /** The limiter every request of the route passes: one per upstream or per app, shared by its routes. */
  limiter: OverloadLimiter;
  /** The request's priority class, one of the limiter's `priorities`; undefined for its default. Read from something the client cannot choose (a route, a verified plan). */
  priority?: (req: Raw) => string | undefined;
  /** Who the request is for, so waiting requests are served round-robin by tenant; undefined for one shared line. */
  tenant?: (req: Raw) => string | undefined;
  /** Response statuses that mean the app is overloaded (the adaptive limit backs off). Default `[503, 504]`. */
  errorStatuses?: readonly number[];
}

/** What the check decided: go on, answer with this refusal, or nothing (the client left while it waited). */
export type OverloadOutcome =
  | { readonly action: 'continue' }
  | {
      readonly action: 'respond';
      readonly status: 503;
      readonly headers: readonly HeaderPair[];
      readonly contentType: string;
      readonly body: string;
    }
  | { readonly action: 'gone' };

const CONTINUE: OverloadOutcome = Object.freeze({ action: 'continue' });
const GONE: OverloadOutcome = Object.freeze({ action: 'gone' });
const OPTIONS = ['limiter', 'priority', 'tenant', 'errorStatuses'] as const;

/**
 * Builds the check the adapters run per request: a slot at once, after a wait in the request's class and tenant line, or a
 * 503 refusal (`Retry-After: 1`, `Floodgate-Overload: <reason>`). An admitted request's latency is taken when the app writes
 * the response head (a client reading slowly does not read as a slow app), and its slot is freed when the app is done with
 * the response, or, when the client left first, when the handler ends it (bounded).
 *
 * @throws FloodgateError INVALID_OPTIONS or UNKNOWN_OPTION for a bad option
 */
export function overloadCheck<Raw>(
  options: OverloadProtectionOptions<Raw>,
  owner: string,
): (raw: Raw, req: IncomingMessage, res: ServerResponse) => OverloadOutcome | Promise<OverloadOutcome> {
  assertKnownOptions(options, OPTIONS, owner);
  if (!(options.limiter instanceof OverloadLimiter))
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${owner} limiter takes an OverloadLimiter, e.g. limiter: new OverloadLimiter({ adaptive: { maxLimit: 100 } }); got ${describeValue(options.limiter)}.`,
    );
  const limiter = options.limiter;
  const priorityOf = optionalFunction(options.priority, `${owner} priority`);
  const tenantOf = optionalFunction(options.tenant, `${owner} tenant`);
  const errors = statusSet(options.errorStatuses, owner);
  const admitted = (res: ServerResponse, slot: OverloadSlot): OverloadOutcome => {
    if (!slot.allowed) return refusal(slot);
    // The client left while it waited: its slot goes back at once and no app work runs for nobody.
    if (res.destroyed && !res.writableFinished) {
      slot.cancel();
      return GONE;
    }
    watch(res, slot, errors);
    return CONTINUE;
  };
  return (raw, _req, res) => {
    const request: OverloadRequest = {};
    const priority = priorityOf?.(raw);
    if (priority !== undefined) request.priority = priority;
    const tenant = tenantOf?.(raw);
    if (tenant !== undefined) request.tenant = tenant;
    const now = limiter.tryAcquire(request);
    if (now !== undefined) return admitted(res, now);
    const gone = new AbortController();
    const leave = (): void => {
      if (!res.writableFinished) gone.abort();
    };
    res.once('close', leave);
    return limiter.acquire({ ...request, signal: gone.signal }).then(
      (slot) => {
        res.off('close', leave);
        return admitted(res, slot);
      },
      (error: unknown) => {
        if (abandoned(error)) return GONE;
        throw error;
      },
    );
  };
}

/** Takes the latency sample when the app writes the head, and ends the slot when the app is done with the response. */
function watch(res: ServerResponse, slot: OverloadSlot, errors: ReadonlySet<number>): void {
  const since = performance.now();
  let outcome: { latencyMs: number; error: boolean } | undefined;
  // Patched on this response only; node writes an implicit head through writeHead too.
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]): ServerResponse {
    outcome ??= { latencyMs: performance.now() - since, error: errors.has(Number(args[0])) };
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
  whenHandlerDone(res, () => {
    // No head: the app never answered (its client left and the handler gave up): neither a sample nor an overload.
    if (outcome === undefined) slot.cancel();
    else slot.release(outcome);
  });
}

const BODY = JSON.stringify({
  type: 'about:blank',
  title: 'Service Unavailable',
  status: 503,
  detail: 'The service is at its limit; try again shortly.',
});

function refusal(slot: OverloadSlot): OverloadOutcome {
  return {
    action: 'respond',
    status: 503,
    headers: [
      ['Retry-After', '1'],
      ['Floodgate-Overload', slot.reason ?? 'limit'],
    ],
    contentType: 'application/problem+json',
    body: BODY,
  };
}

function statusSet(value: unknown, owner: string): ReadonlySet<number> {
  if (value === undefined) return new Set([503, 504]);
  if (!Array.isArray(value) || !value.every((s) => Number.isInteger(s) && (s as number) >= 400 && (s as number) <= 599))
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${owner} errorStatuses must be a list of HTTP error statuses (400–599), e.g. [503, 504]; got ${describeValue(value)}.`,
    );
  return new Set(value as number[]);
}
