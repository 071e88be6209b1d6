/** The HTTP layer's public types. */
/**
 * The request view adapters build, the options every adapter shares, and the outcome they act on.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { ConcurrencyLimiter } from '../limiter/concurrency-limiter.js';
import type { Duration } from '../core/duration.js';
import type { RateLimiter } from '../limiter/rate-limiter.js';
import type { Store } from '../stores/store.js';
import type { HeaderMode, HeaderPair, PolicyReport } from './headers.js';
import type { ProxyHeader, TrustProxy } from './client-keys.js';
import type { ValidateOptions } from './slips.js';
import type { RetryAfterJitter } from './retry-after.js';
/** What user callbacks learn about the request, whatever the framework. */
export interface ClientInfo {
  /** The client address after proxy trust and IPv4-mapped normalisation (not grouped); undefined if unknown. */
  readonly ip: string | undefined;
  /** HTTP method. */
  readonly method: string;
  /** URL path, without the query string. */
  readonly path: string;
  /** Request headers (lower-case names). */
  readonly headers: IncomingHttpHeaders;
}

/** A framework-neutral view of a request, built by each adapter. */
export interface RequestView<Raw> {
  /** The framework's own object (Express req, Koa ctx, Fastify request, IncomingMessage); handed to user callbacks. */
  readonly raw: Raw;
  /** The socket peer address. */
  readonly socketAddress: string | undefined;
  /** The address the framework computed, used with `trustProxy: "framework"`. */
  readonly frameworkIp?: string | undefined;
  /** Request headers. */
  readonly headers: IncomingHttpHeaders;
  /** HTTP method. */
  readonly method: string;
  /** URL path without the query string. */
  readonly path: string;
  /**
   * The signal that aborts when the client goes away, asked only when a
   * limiter of the route waits (`wait`): a waiting consume or acquire is then
   * abandoned at once, spending nothing. Absent: a wait runs to its end.
   */
  readonly signal?: () => AbortSignal | undefined;
}

/** A limiter with the name it is reported under, and the key it counts under when not the route's. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a policy written without a request type fits any adapter's
export interface NamedLimiter<Raw = any> {
  /** The limiter. */
  readonly limiter: RateLimiter;
  /**
   * Who this policy counts a request against, when not the route's `key`:
   * `"ip"`, an API-key header, or a function of the request (sync or async),
   * e.g. `(req) => orgOf(req)` for a per-organisation limit beside per-user
   * ones, or `() => 'all'` for one counter shared by every client. The
   * route's policies are still decided all or nothing.
   */
  readonly key?: KeySource<Raw>;
  /**
   * The policy name in the `RateLimit` / `RateLimit-Policy` fields and in
   * `violated-policies`; printable ASCII. Default: `"<limit>-per-<window>"`,
   * e.g. `"100-per-1m"`.
   */
  readonly name?: string;
}

/** One policy of a route: a limiter, or a limiter with a name and maybe its own key. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see NamedLimiter
export type LimiterEntry<Raw = any> = RateLimiter | NamedLimiter<Raw>;

/**
 * Picks a request's policies: e.g. the limiter of the caller's plan, out of
 * limiters built once up front (`(req) => plans[req.user.plan]`). May answer
 * through a promise (a plan looked up in a database). Each distinct answer
 * is checked once; limiters made per request would each start with empty
 * counters, so build them up front.
 */
export type LimiterSelector<Raw> = (
  req: Raw,
  client: ClientInfo,
) => LimiterEntry<Raw> | readonly LimiterEntry<Raw>[] | Promise<LimiterEntry<Raw> | readonly LimiterEntry<Raw>[]>;

/** Identify clients by an API-key header. */
export interface ApiKeySource {
  /** Header name, e.g. `"x-api-key"` (case-insensitive). */
  readonly header: string;
  /** Status for a request without the header: 401 (default, with a WWW-Authenticate field) or 400. */
  readonly missingStatus?: 400 | 401;
}

/** Computes the key of a request; must return a non-empty string. */
export type KeyFunction<Raw> = (req: Raw, client: ClientInfo) => string | Promise<string>;

/** Who a request counts against: `"ip"` (default), an API-key header, or a function. */
export type KeySource<Raw> = 'ip' | ApiKeySource | KeyFunction<Raw>;

/** Why the middleware answered instead of passing the request on. */
export type RefusalReason =
  /** A policy refused (429 by default). */
  | 'limited'
  /** The client is on the deny list (403). */
  | 'denied'
  /** The API-key header is missing (401 or 400). */
  | 'missing-key'
  /** A limiter's store failed and `onStoreError` is `"respond"` (503 by default). */
  | 'store-error';

/** Everything a body builder or `onLimited` may want about a refusal. */
export interface RefusalInfo {
  /** Why. */
  readonly reason: RefusalReason;
  /** The status that will be sent. */
  readonly status: number;
  /** The rate-limit key, when known. */
  readonly key: string | undefined;
  /** The client address, when known. */
  readonly ip: string | undefined;
  /** The Retry-After value in seconds, when one is sent. */
  readonly retryAfterSeconds: number | undefined;
  /** Every policy that answered, rewards applied. */
  readonly policies: readonly PolicyReport[];
  /** Names of the policies that refused. */
  readonly violatedPolicies: readonly string[];
  /** For `"missing-key"`: the header that was expected. */
  readonly missingHeader?: string;
  /** For `"store-error"`: the error. */
  readonly error?: unknown;
}

/** What `onDecision` receives for every request that reached the limiters. */
export interface DecisionInfo {
  /** The route's key; a policy with its own key reports it in its entry of {@link policies}. */
  readonly key: string;
  /** The client address, when known. */
  readonly ip: string | undefined;
  /** The cost charged (nothing is kept when the request is refused). */
  readonly cost: number;
  /** True when the request goes on to the handler. */
  readonly allowed: boolean;
  /** The status sent instead, when not allowed. */
  readonly status: number | undefined;
  /** Every policy that answered. */
  readonly policies: readonly PolicyReport[];
  /** Store failures met while deciding (empty normally). */
  readonly errors: readonly unknown[];
  /** True when the request goes on only because of shadow mode: enforcing would have refused it. Absent otherwise. */
  readonly shadowLimited?: true;
}

/**
 * The decision a request carries on to its handler: `req.rateLimit`
 * (Express and node:http), `ctx.state.rateLimit` (Koa), `request.rateLimit`
 * (Fastify). Undefined when the middleware did not count the request
 * (`skip`, the allow list).
 */
export interface RateLimitInfo {
  /** The route's key; a policy with its own key reports it in its entry of {@link policies}. */
  readonly key: string;
  /** Units it cost. */
  readonly cost: number;
  /** Each policy that answered, in order: name, limit, window, remaining, reset. */
  readonly policies: readonly PolicyReport[];
  /** The fewest units left over those policies: how many more requests of this cost would pass now. */
  readonly remaining: number;
  /** ms until the policy with the fewest units left is whole again (may be Infinity). */
  readonly resetMs: number;
  /**
   * True when the request goes on only because of shadow mode (the
   * middleware's `shadow` option, or a policy's limiter in shadow mode):
   * enforcing would have refused it. The policies that would have refused
   * are marked `shadowLimited` in {@link policies}. Absent otherwise.
   */
  readonly shadowLimited?: true;
}

declare module 'http' {
  interface IncomingMessage {
    /** floodgate's decision for this request (Express and node:http middleware), when it counted it; see RateLimitInfo. */
    rateLimit?: RateLimitInfo;
  }
}

/** Response body: problem details (RFC 9457 JSON, default), plain text, or built by a function (a string is sent as text, anything else as JSON). */
export type BodyOption = 'problem' | 'text' | ((info: RefusalInfo) => string | object);

/** Options shared by every adapter. */
export interface HttpRateLimitOptions<Raw> {
  /**
   * The policies of this route: one limiter, or several evaluated together
   * (e.g. 10 per second and 1000 per day). A request passes only if every
   * one admits it; when one refuses, nothing is spent (one atomic step when
   * the limiters share a store). A policy may count under its own `key`
   * (per user + per organisation + global in one decision). Or a function of the request
   * that picks them (per-plan limits; see {@link LimiterSelector}). Required
   * unless `limit` and `window` are given.
   */
  limiter?: LimiterEntry<Raw> | readonly LimiterEntry<Raw>[] | LimiterSelector<Raw>;
  /**
   * Shorthand for `limiter`: units per `window`, and the middleware builds the
   * RateLimiter (fixed window, on `store`, else its own memory store). A
   * function of the request (sync or async) gives per-plan limits: one
   * limiter per distinct answer (at most 100), each counting apart.
   */
  limit?: number | ((req: Raw, client: ClientInfo) => number | Promise<number>);
  /** The window of `limit`, e.g. `'15m'`. */
  window?: Duration;
  /**
   * With `limit` and `window`: makes the limiter a token bucket that holds
   * this many units, refilled at `limit` per `window`: `{ limit: 10, window:
   * '1s', burst: 50 }` admits 50 at once, then 10 a second. Default: none (a
   * fixed window of `limit` per `window`). For more of a limiter's options,
   * pass `limiter: new RateLimiter({ … })`.
   */
  burst?: number;
  /** The store of the limiters `limit` builds (e.g. a RedisStore shared by every process). Default: a memory store each. */
  store?: Store;
  /** Who a request counts against. Default `"ip"`. */
  key?: KeySource<Raw>;
  /** Which proxies to believe about the client address. Default `false`: proxy headers are ignored. */
  trustProxy?: TrustProxy;
  /** The proxy header to read when `trustProxy` allows it. Default `"x-forwarded-for"`. */
  proxyHeader?: ProxyHeader;
  /** IPv6 clients are grouped by this prefix length. Default 64; `false` for whole addresses. */
  ipv6Subnet?: number | false;
  /** Keys longer than this many UTF-8 bytes are replaced by their SHA-256. Default 128, at least 64. */
  maxKeyLength?: number;
  /** Units each request costs: a positive whole number or a function of the request. Default 1. */
  cost?: number | ((req: Raw, client: ClientInfo) => number | Promise<number>);
  /** Header family, a list of non-overlapping families, or `"none"`. Default `"ietf"`. */
  headers?: HeaderMode | 'none' | readonly HeaderMode[];
  /** Status of a limited response. Default 429. */
  statusCode?: number;
  /**
   * Shadow mode (a dry run) for the whole route: its policies and its
   * `concurrency` limit decide and count as they would enforce, but a
   * request they would refuse goes on. Its RateLimit headers describe the
   * real state (remaining 0); no 429 and no Retry-After are sent. The
   * handler sees `rateLimit.shadowLimited`, `onDecision` gets
   * `shadowLimited: true`, `onLimited` is not called (nothing was refused).
   * Only the rate limit is shadowed: the deny list, a missing API key and
   * store errors answer as usual. The same word as a limiter's `shadow`
   * option and the gateway's shadow rules. Default false.
   */
  shadow?: boolean;
  /**
   * Spreads `Retry-After` so that clients refused together do not all come
   * back in the same second: a random share of this duration (uniform) is
   * added to each refusal's wait before it is rounded up to whole seconds,
   * e.g. `'2s'`. Retry-After stays a whole number never below the true wait;
   * the `RateLimit` field keeps the true reset (`t`), so Retry-After may
   * exceed it by up to the jitter. `{ max: '2s', random }` injects the
   * random source (tests). At most 1 hour. Default: none.
   */
  retryAfterJitter?: RetryAfterJitter;
  /** Body of the middleware's own responses. Default `"problem"`. */
  body?: BodyOption;
  /** Give an admitted request's units back when its response is an error (status ≥ 400, or per `requestWasSuccessful`) or its connection closed first. Default false. */
  skipFailedRequests?: boolean;
  /** Give an admitted request's units back when its response succeeds (status < 400, or per `requestWasSuccessful`): count only failures, e.g. failed logins. Default false. */
  skipSuccessfulRequests?: boolean;
  /** Which finished responses are successes, for the two options above. Default: status below 400. */
  requestWasSuccessful?: (req: Raw, statusCode: number) => boolean;
  /**
   * At most `limit` requests of a key in flight at once, across every
   * process that shares the limiter's store, counted under the route's key:
   * a slot is taken once the policies admit a request and freed when its
   * response ends (finished, or its connection closed, whichever comes
   * first). A request refused for want of a slot gets `statusCode` and
   * costs nothing: its units are rewarded to the policies.
   */
  concurrency?: ConcurrencyLimiter;
  /**
   * The request's real cost, read when its response has ended (a header the
   * handler set, a count it kept): every policy is then charged that instead
   * of `cost`, which served as the estimate. The difference is rewarded,
   * or charged even past the limit, by the rules of a reservation's commit
   * (docs/reservations.md). Return undefined to keep `cost`. Not with
   * `skipFailedRequests` or `skipSuccessfulRequests`: return 0 for a
   * response that should not count.
   */
  actualCost?: (req: Raw, res: ServerResponse) => number | undefined | Promise<number | undefined>;
  /** Return true to let a request through without counting it. */
  skip?: (req: Raw, client: ClientInfo) => boolean | Promise<boolean>;
  /** IPs, CIDRs (or `"loopback"`, `"private"`, `"linklocal"`) and keys that are never limited. */
  allowList?: readonly string[];
  /** IPs, CIDRs and keys that are always refused with `denyStatus`, before any counting. */
  denyList?: readonly string[];
  /** Status for the deny list. Default 403. */
  denyStatus?: number;
  /** Called for each limited response (after rewards); errors it throws go to `onError`. */
  onLimited?: (req: Raw, info: RefusalInfo) => void | Promise<void>;
  /** Called once per counted request (verbose logging, metrics); errors it throws go to `onError`. */
  onDecision?: (req: Raw, info: DecisionInfo) => void | Promise<void>;
  /**
   * When a limiter's promise rejects (its store failed and the limiter's own
   * `onStoreFailure` is `"reject"`, or the call outlived `timeout`):
   * `"respond"` (default) answers `storeErrorStatus`; `"pass"` lets the
   * request through. Limiters configured with `insurance`, `"fail-open"` or
   * `"fail-closed"` never get here: their decision is used as is.
   */
  onStoreError?: 'respond' | 'pass';
  /** Status for `onStoreError: "respond"`. Default 503. */
  storeErrorStatus?: number;
  /** Receives store failures, reward failures and errors thrown by hooks. Default: a console warning at most every 10 s. */
  onError?: (error: unknown, req: Raw | undefined) => void;
  /**
   * Longest wait for the limiters before treating the call as a store
   * failure, so a store that never answers cannot hang requests. Default
   * `"5s"`; `false` to wait for the store's own timeout.
   */
  timeout?: Duration | false;
  /**
   * The middleware's one-time warnings about likely misconfigurations:
   * `true` (default), `false` to turn them all off, or an object turning
   * single ones off, e.g. `{ forwardedHeader: false }`.
   */
  validate?: boolean | ValidateOptions;
}

/** The option names of {@link HttpRateLimitOptions}, for strict validation. */
export const HTTP_OPTION_NAMES = [
  'limiter',
  'limit',
  'window',
  'burst',
  'store',
  'key',
  'trustProxy',
  'proxyHeader',
  'ipv6Subnet',
  'maxKeyLength',
  'cost',
  'headers',
  'statusCode',
  'shadow',
  'retryAfterJitter',
  'body',
  'skip',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'requestWasSuccessful',
  'concurrency',
  'actualCost',
  'allowList',
  'denyList',
  'denyStatus',
  'onLimited',
  'onDecision',
  'onStoreError',
  'storeErrorStatus',
  'onError',
  'timeout',
  'validate',
] as const;

/** What an adapter must do with a request. */
export type HttpOutcome =
  /** Call the next handler, after setting `headers` on the response; `info` when the limiters decided (not for a skipped or allow-listed request). */
  | { readonly action: 'continue'; readonly headers: readonly HeaderPair[]; readonly info?: RateLimitInfo }
  /** Send this response and stop. */
  | {
      readonly action: 'respond';
      readonly status: number;
      readonly headers: readonly HeaderPair[];
      readonly contentType: string;
      readonly body: string;
    }
  /** A user callback or a misconfiguration failed: hand `error` to the framework's error handling. */
  | { readonly action: 'error'; readonly error: unknown };

/** Settings only the adapter knows. */
export interface AdapterConfig {
  /** Name used in error messages, e.g. `"floodgate/express rateLimit"`. */
  readonly owner: string;
  /** Whether the adapter fills {@link RequestView.frameworkIp}, so `trustProxy: "framework"` is allowed. */
  readonly frameworkIp: boolean;
}
