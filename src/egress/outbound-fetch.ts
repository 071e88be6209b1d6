/** A `fetch` that schedules each request through an OutboundLimiter, learns from the answers, and retries refusals. */
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { assertKnownOptions, optionalFunction, wholeNumber } from '../core/validate.js';
import { OutboundLimiter } from './outbound-limiter.js';
import { readUpstreamLimits, type HeaderBag } from './upstream-limits.js';

/** Options of {@link outboundFetch}. */
export interface OutboundFetchOptions {
  /** The limiter whose budgets every request spends. */
  limiter: OutboundLimiter;
  /** The budget a request spends: default its URL's host (`api.github.com`); a route pattern or an account works too. */
  key?: (url: URL, init: RequestInit | undefined) => string;
  /** Retries of a 429 or 503 (after the hold the answer asked for, plus jitter). Default 2. */
  retries?: number;
  /** Retry methods that are not idempotent too (POST, PATCH). Default false: only GET, HEAD, OPTIONS, PUT, DELETE. */
  retryAnyMethod?: boolean;
  /** The first retry's extra wait before jitter (doubled per retry, a random share of it used). Default `"200ms"`. */
  backoff?: Duration;
  /** Reads a response's actual cost in tokens (e.g. `usage.total_tokens` of its JSON) from a clone; its reservation is settled with it. */
  usage?: (response: Response) => Promise<number | undefined> | number | undefined;
  /** The fetch to call. Default the global `fetch`. */
  fetch?: typeof fetch;
}

/** Per-request scheduling: its token estimate, its priority, how long it may wait to start. */
export interface OutboundCallOptions {
  /** Token estimate reserved before it is sent (needs the limiter's `tokens`). */
  cost?: number;
  /** One of the limiter's priorities. */
  priority?: string;
  /** Longest wait to start (each retry waits again within what is left of it). */
  timeout?: Duration;
}

/** A `fetch` with a third argument: the request's scheduling. */
export type OutboundFetch = (input: string | URL | Request, init?: RequestInit, call?: OutboundCallOptions) => Promise<Response>;

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
const OPTIONS = ['limiter', 'key', 'retries', 'retryAnyMethod', 'backoff', 'usage', 'fetch'] as const;

/**
 * Wraps `fetch` so every request goes through `limiter`: it waits for its key's budgets (shared by every process on the
 * limiter's store), reports what the answer says of the upstream's limits (the IETF RateLimit fields, `x-ratelimit-*`
 * for requests and tokens, Retry-After) so the key is held until the upstream's reset when it is out, and retries a 429 or
 * 503 of an idempotent request up to `retries` times. The response comes back as fetch gives it; its token usage, when
 * `usage` is given, is read from a clone and settles the request's reservation.
 *
 * @throws FloodgateError INVALID_OPTIONS or UNKNOWN_OPTION for a bad option
 */
export function outboundFetch(options: OutboundFetchOptions): OutboundFetch {
  assertKnownOptions(options, OPTIONS, 'outboundFetch');
  if (!(options.limiter instanceof OutboundLimiter))
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      'outboundFetch limiter takes an OutboundLimiter, e.g. limiter: new OutboundLimiter({ rate: { limit: 100, window: "10s" } }).',
    );
  const limiter = options.limiter;
  const keyOf = optionalFunction(options.key, 'outboundFetch key') ?? ((url: URL) => url.host);
  const retries = wholeNumber(options.retries ?? 2, 'outboundFetch retries', { max: 20 });
  const backoffMs = parseDuration(options.backoff ?? 200, 'outboundFetch backoff');
  const usage = optionalFunction(options.usage, 'outboundFetch usage');
  const send = optionalFunction(options.fetch, 'outboundFetch fetch') ?? fetch;
  return async (input, init, call = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const retryable = options.retryAnyMethod === true || IDEMPOTENT.has(method);
    const key = keyOf(url, init);
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined) ?? undefined;
    for (let attempt = 0; ; attempt++) {
      const response = await limiter.schedule(
        key,
        async ({ learn, settle }) => {
          const res = await send(input, init);
          const headers = headerBag(res.headers);
          const now = Date.now();
          await learn({
            status: res.status,
            requests: readUpstreamLimits(headers, now),
            tokens: readUpstreamLimits(headers, now, 'tokens'),
          });
          if (usage !== undefined && res.ok) {
            // Read beside the caller, from a clone: the caller gets the response at once, its reservation settles when the usage is known.
            void Promise.resolve()
              .then(() => usage(res.clone()))
              .then((actual) => (actual === undefined ? undefined : settle(actual)))
              .catch(() => undefined);
          }
          return res;
        },
        {
          ...(call.cost === undefined ? {} : { cost: call.cost }),
          ...(call.priority === undefined ? {} : { priority: call.priority }),
          ...(call.timeout === undefined ? {} : { timeout: call.timeout }),
          ...(signal ? { signal } : {}),
        },
      );
      const refused = response.status === 429 || response.status === 503;
      if (!refused || !retryable || attempt >= retries || (init?.body !== undefined && init.body !== null && typeof init.body !== 'string'))
        return response;
      // The refusal is not the caller's answer: its body is dropped, and the request goes back in line after a jittered pause.
      await response.body?.cancel().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * backoffMs * 2 ** attempt));
    }
  };
}

function headerBag(headers: Headers): HeaderBag {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => (out[name] = value));
  return out;
}
