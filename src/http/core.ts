/** The one HTTP path every adapter runs: request view → client identity → key → every policy's decision → a response to send, or "continue". */
import { STATUS_CODES, type IncomingHttpHeaders } from 'node:http';
import type { Decision } from '../decision.js';
import { describe, parseDuration, type Duration } from '../duration.js';
import { ErrorCode, FloodgateError, isStoreFailure } from '../errors.js';
import { RateLimiter } from '../limiter.js';
import { throttled } from '../throttle.js';
import { assertKnownOptions } from '../validate.js';
import { parseHeaderModes, rateLimitHeaders, retryAfterSeconds, type HeaderMode, type HeaderPair, type PolicyReport } from './headers.js';
import {
  AddressMatcher,
  NAMED_RANGES,
  assertIpv6Subnet,
  boundKey,
  createIpResolver,
  formatIp,
  headerValue,
  ipKey,
  parseCidr,
  parseIp,
  type IpAddress,
  type ProxyHeader,
  type TrustProxy,
} from './keys.js';

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
}

/** A limiter with the name it is reported under. */
export interface NamedLimiter {
  /** The limiter. */
  readonly limiter: RateLimiter;
  /**
   * The policy name in the `RateLimit` / `RateLimit-Policy` fields and in
   * `violated-policies`; printable ASCII. Default: `"<limit>-per-<window>"`,
   * e.g. `"100-per-1m"`.
   */
  readonly name?: string;
}

/** One policy of a route: a limiter, or a limiter with a name. */
export type LimiterEntry = RateLimiter | NamedLimiter;

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
  /** Every policy that answered, refunds applied. */
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
  /** The key the request was counted against. */
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
}

/** Response body: problem details (RFC 9457 JSON, default), plain text, or built by a function (a string is sent as text, anything else as JSON). */
export type BodyOption = 'problem' | 'text' | ((info: RefusalInfo) => string | object);

/** Options shared by every adapter. */
export interface HttpRateLimitOptions<Raw> {
  /**
   * The policies of this route: one limiter, or several evaluated together
   * (e.g. 10 per second and 1000 per day). A request passes only if every
   * one admits it; when one refuses, the units the others took are given
   * back, so a refused request spends nothing. Required.
   */
  limiter: LimiterEntry | readonly LimiterEntry[];
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
  /** Body of the middleware's own responses. Default `"problem"`. */
  body?: BodyOption;
  /** Return true to let a request through without counting it. */
  skip?: (req: Raw, client: ClientInfo) => boolean | Promise<boolean>;
  /** IPs, CIDRs (or `"loopback"`, `"private"`, `"linklocal"`) and keys that are never limited. */
  allowList?: readonly string[];
  /** IPs, CIDRs and keys that are always refused with `denyStatus`, before any counting. */
  denyList?: readonly string[];
  /** Status for the deny list. Default 403. */
  denyStatus?: number;
  /** Called for each limited response (after refunds); errors it throws go to `onError`. */
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
  /** Receives store failures, refund failures and errors thrown by hooks. Default: a console warning at most every 10 s. */
  onError?: (error: unknown, req: Raw | undefined) => void;
  /**
   * Longest wait for the limiters before treating the call as a store
   * failure, so a store that never answers cannot hang requests. Default
   * `"5s"`; `false` to wait for the store's own timeout.
   */
  timeout?: Duration | false;
}

/** The option names of {@link HttpRateLimitOptions}, for strict validation. */
export const HTTP_OPTION_NAMES = [
  'limiter',
  'key',
  'trustProxy',
  'proxyHeader',
  'ipv6Subnet',
  'maxKeyLength',
  'cost',
  'headers',
  'statusCode',
  'body',
  'skip',
  'allowList',
  'denyList',
  'denyStatus',
  'onLimited',
  'onDecision',
  'onStoreError',
  'storeErrorStatus',
  'onError',
  'timeout',
] as const;

/** What an adapter must do with a request. */
export type HttpOutcome =
  /** Call the next handler, after setting `headers` on the response. */
  | { readonly action: 'continue'; readonly headers: readonly HeaderPair[] }
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

/** The problem type of draft-ietf-httpapi-ratelimit-headers for an exceeded quota. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
/** The problem type of draft-ietf-httpapi-ratelimit-headers for reduced capacity (used for fail-closed refusals). */
export const REDUCED_CAPACITY_TYPE = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

/** Key used when the client address cannot be known (socket already gone, unparseable framework IP). */
export const UNKNOWN_CLIENT_KEY = 'unknown';

const NO_ERRORS: readonly unknown[] = Object.freeze([]);

const CONTINUE: HttpOutcome = Object.freeze({ action: 'continue', headers: Object.freeze([]) as readonly HeaderPair[] });

interface Policy {
  readonly limiter: RateLimiter;
  readonly name: string;
}

interface ListMatcher {
  readonly addresses: AddressMatcher | undefined;
  readonly keys: ReadonlySet<string>;
}

/** Settings only the adapter knows. */
export interface AdapterConfig {
  /** Name used in error messages, e.g. `"floodgate/express rateLimit"`. */
  readonly owner: string;
  /** Whether the adapter fills {@link RequestView.frameworkIp}, so `trustProxy: "framework"` is allowed. */
  readonly frameworkIp: boolean;
}

/**
 * The shared request → key → decision → response path. Built once per
 * middleware (all options validated up front), then {@link handle} is
 * called per request and never rejects.
 */
export class HttpLimiter<Raw> {
  private readonly policies: readonly Policy[];
  private readonly keySource: 'ip' | ApiKeySource | KeyFunction<Raw>;
  private readonly resolveIp: (view: RequestView<Raw>) => IpAddress | undefined;
  /**
   * Which string alone determines the client address (the socket peer, or the
   * framework's IP), when proxy headers do not take part; identities are then
   * memoised by it, since parsing and formatting an address costs more than
   * the rest of a decision on the memory store.
   */
  private readonly identityInput: ((view: RequestView<Raw>) => string | undefined) | undefined;
  private readonly identities = new Map<string, Identity>();
  /** Whether single-policy refusals may share one frozen response (no hook or body function sees each request). */
  private readonly sharesRefusals: boolean;
  /** Whether the legacy fields are sent, whose reset is a point in time rather than a duration. */
  private readonly legacyHeaders: boolean;
  /** Shared single-policy refusals by what they depend on; see {@link limitedOne}. */
  private readonly refusals = new Map<number | string, HttpOutcome>();
  /** Built-in response bodies by what they depend on; see {@link renderBody}. */
  private readonly bodies = new Map<string, { contentType: string; body: string }>();
  private readonly ipv6Subnet: number | false;
  private readonly maxKeyLength: number;
  private readonly cost: number | ((req: Raw, client: ClientInfo) => number | Promise<number>);
  private readonly modes: readonly HeaderMode[];
  private readonly statusCode: number;
  private readonly body: BodyOption;
  private readonly skip: HttpRateLimitOptions<Raw>['skip'];
  private readonly allow: ListMatcher | undefined;
  private readonly deny: ListMatcher | undefined;
  private readonly denyStatus: number;
  private readonly onLimited: HttpRateLimitOptions<Raw>['onLimited'];
  private readonly onDecision: HttpRateLimitOptions<Raw>['onDecision'];
  private readonly passOnStoreError: boolean;
  private readonly storeErrorStatus: number;
  private readonly onError: (error: unknown, req: Raw | undefined) => void;
  private readonly timeoutMs: number | undefined;
  /** Errors made by {@link guard} when the middleware's own timeout fires (so the late answer can be refunded). */
  private readonly timeouts = new WeakSet<object>();
  /** True when requests are identified by the framework's address; adapters read it only then (Express computes `req.ip` on each read). */
  readonly usesFrameworkIp: boolean;

  /**
   * @param options - see {@link HttpRateLimitOptions}
   * @param adapter - what the calling adapter supports
   * @throws FloodgateError for any invalid option (UNKNOWN_OPTION, INVALID_OPTIONS, CONFLICTING_OPTIONS, …)
   */
  constructor(options: HttpRateLimitOptions<Raw>, adapter: AdapterConfig) {
    const owner = adapter.owner;
    assertKnownOptions(options, HTTP_OPTION_NAMES, owner);
    const o = options as HttpRateLimitOptions<Raw>;

    this.policies = parsePolicies(o.limiter, owner);

    const key = o.key ?? 'ip';
    if (key !== 'ip' && typeof key !== 'function') {
      assertKnownOptions(key, ['header', 'missingStatus'], `${owner} key`);
      const k = key as ApiKeySource;
      if (typeof k.header !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k.header)) {
        throw new FloodgateError(
          ErrorCode.INVALID_OPTIONS,
          `key.header must be a header name such as "x-api-key"; got ${describe(k.header)}.`,
        );
      }
      if (k.missingStatus !== undefined && k.missingStatus !== 400 && k.missingStatus !== 401) {
        throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `key.missingStatus must be 400 or 401; got ${describe(k.missingStatus)}.`);
      }
      this.keySource = { header: k.header.toLowerCase(), missingStatus: k.missingStatus ?? 401 };
    } else {
      this.keySource = key;
    }

    this.usesFrameworkIp = o.trustProxy === 'framework';
    if (o.trustProxy === 'framework') {
      if (!adapter.frameworkIp) {
        throw new FloodgateError(
          ErrorCode.INVALID_OPTIONS,
          `${owner} has no framework to ask for the client address; set trustProxy to false, a hop count or a list of proxy CIDRs.`,
        );
      }
      if (o.proxyHeader !== undefined) {
        throw new FloodgateError(
          ErrorCode.CONFLICTING_OPTIONS,
          'proxyHeader has no effect with trustProxy: "framework" (the framework reads the headers itself); remove one of them.',
        );
      }
      this.resolveIp = (view) => (view.frameworkIp === undefined ? undefined : parseIp(view.frameworkIp));
      this.identityInput = (view) => view.frameworkIp;
    } else {
      if (o.proxyHeader !== undefined && (o.trustProxy ?? false) === false) {
        throw new FloodgateError(
          ErrorCode.CONFLICTING_OPTIONS,
          "proxyHeader is read only from trusted proxies, and trustProxy is off; set trustProxy (a hop count or the proxies' CIDRs) or remove proxyHeader.",
        );
      }
      const resolver = createIpResolver({ trustProxy: o.trustProxy ?? false, proxyHeader: o.proxyHeader ?? 'x-forwarded-for' });
      this.resolveIp = (view) => resolver(view.socketAddress, view.headers);
      this.identityInput = (o.trustProxy ?? false) === false ? (view) => view.socketAddress : undefined;
    }

    const subnet = o.ipv6Subnet ?? 64;
    assertIpv6Subnet(subnet);
    this.ipv6Subnet = subnet;

    const maxKeyLength = o.maxKeyLength ?? 128;
    if (!Number.isSafeInteger(maxKeyLength) || maxKeyLength < 64) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `maxKeyLength must be a whole number of bytes of at least 64 (a hashed key takes 50); got ${describe(maxKeyLength)}.`,
      );
    }
    this.maxKeyLength = maxKeyLength;

    const cost = o.cost ?? 1;
    if (typeof cost !== 'function' && (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1)) {
      throw new FloodgateError(
        ErrorCode.INVALID_COST,
        `cost must be a positive whole number or a function returning one; got ${describe(cost)}.`,
      );
    }
    for (const p of this.policies) {
      if (typeof cost === 'number' && cost > p.limiter.policy.limit) {
        throw new FloodgateError(
          ErrorCode.COST_EXCEEDS_LIMIT,
          `cost ${cost} is larger than the limit ${p.limiter.policy.limit} of policy ${JSON.stringify(p.name)}, so no request could ever pass.`,
        );
      }
    }
    this.cost = cost;

    this.modes = parseHeaderModes(o.headers);
    this.statusCode = parseStatus(o.statusCode, 429, 'statusCode');
    this.denyStatus = parseStatus(o.denyStatus, 403, 'denyStatus');
    this.storeErrorStatus = parseStatus(o.storeErrorStatus, 503, 'storeErrorStatus');

    const body = o.body ?? 'problem';
    if (body !== 'problem' && body !== 'text' && typeof body !== 'function') {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `body must be "problem", "text" or a function; got ${describe(body)}.`);
    }
    this.body = body;

    this.skip = optionalFunction(o.skip, 'skip');
    this.onLimited = optionalFunction(o.onLimited, 'onLimited');
    this.onDecision = optionalFunction(o.onDecision, 'onDecision');
    this.onError = optionalFunction(o.onError, 'onError') ?? throttledWarning(owner);
    this.allow = parseList(o.allowList, 'allowList');
    this.deny = parseList(o.denyList, 'denyList');

    const mode = o.onStoreError ?? 'respond';
    if (mode !== 'respond' && mode !== 'pass') {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `onStoreError must be "respond" or "pass"; got ${describe(mode)}.`);
    }
    this.passOnStoreError = mode === 'pass';
    if (this.passOnStoreError && o.storeErrorStatus !== undefined) {
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        'storeErrorStatus is the status of onStoreError: "respond", and onStoreError is "pass" (requests go through); remove one of them.',
      );
    }
    this.timeoutMs = o.timeout === false ? undefined : parseDuration(o.timeout ?? 5000, 'timeout');
    this.sharesRefusals = this.onLimited === undefined && this.onDecision === undefined && typeof this.body !== 'function';
    this.legacyHeaders = this.modes.includes('legacy');
  }

  /** Hands an error that the adapter met (or got back as `{ action: "error" }`) to `onError`; never throws. */
  reportError(error: unknown, raw: Raw | undefined): void {
    this.report(error, raw);
  }

  /** The names of this route's policies, in order. */
  get policyNames(): readonly string[] {
    return this.policies.map((p) => p.name);
  }

  /**
   * Decides about one request: synchronously when nothing has to be waited
   * for (a refusal the in-memory block already knows, a deny list entry, a
   * missing API key, a skipped request), else through a promise. Adapters
   * act at once on a plain outcome: under a flood of refusals that spares
   * every promise turn of the store path. Never throws, and the promise
   * never rejects: errors from user callbacks come back as
   * `{ action: "error" }` for the framework's error handling, store
   * failures as a response or a pass (per `onStoreError`).
   */
  decide(view: RequestView<Raw>): HttpOutcome | Promise<HttpOutcome> {
    try {
      const outcome = this.evaluate(view);
      return isThenable(outcome) ? Promise.resolve(outcome).then(undefined, errorOutcome) : outcome;
    } catch (error) {
      return errorOutcome(error);
    }
  }

  /** {@link decide}, always as a promise. */
  async handle(view: RequestView<Raw>): Promise<HttpOutcome> {
    return this.decide(view);
  }

  /** The client's address, its text and its IP key; memoised per input string when proxy headers play no part. */
  private identify(view: RequestView<Raw>): Identity {
    const input = this.identityInput?.(view);
    if (input !== undefined) {
      const known = this.identities.get(input);
      if (known !== undefined) return known;
    }
    const address = this.resolveIp(view);
    const identity: Identity = {
      address,
      ip: address === undefined ? undefined : formatIp(address),
      key: address === undefined ? UNKNOWN_CLIENT_KEY : ipKey(address, this.ipv6Subnet),
    };
    if (input !== undefined) {
      // Bounded: a flood of distinct addresses only costs the memo its hits.
      if (this.identities.size >= MAX_MEMOISED_IDENTITIES) this.identities.clear();
      this.identities.set(input, identity);
    }
    return identity;
  }

  // The stages below return a plain outcome when they can, and a promise
  // only when a user callback or a store call makes them wait: most key
  // functions are synchronous, and every await is a microtask turn per request.

  /** Identity, then `skip`. */
  private evaluate(view: RequestView<Raw>): HttpOutcome | Promise<HttpOutcome> {
    const identity = this.identify(view);
    if (this.skip === undefined) return this.keyed(view, identity, undefined);
    const client = clientInfo(view, identity);
    const skipped = this.skip(view.raw, client);
    if (isThenable(skipped)) return Promise.resolve(skipped).then((s) => (s === true ? CONTINUE : this.keyed(view, identity, client)));
    return skipped === true ? CONTINUE : this.keyed(view, identity, client);
  }

  /** The raw key: the IP key, the API-key header, or the key function's answer. */
  private keyed(view: RequestView<Raw>, identity: Identity, known: ClientInfo | undefined): HttpOutcome | Promise<HttpOutcome> {
    const source = this.keySource;
    if (source === 'ip') return this.listed(view, identity, known, identity.key);
    if (typeof source !== 'function') return this.listed(view, identity, known, headerValue(view.headers, source.header));
    const client = known ?? clientInfo(view, identity);
    const returned = source(view.raw, client);
    if (isThenable(returned)) return Promise.resolve(returned).then((value) => this.listed(view, identity, client, checkedKey(value)));
    return this.listed(view, identity, client, checkedKey(returned));
  }

  /** Deny list, allow list and a missing API key, then the cost. */
  private listed(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    rawKey: string | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const { address, ip } = identity;
    // Deny before allow: an entry on both lists is refused.
    if (this.deny !== undefined && listMatches(this.deny, address, rawKey)) {
      return this.refuse(view.raw, { reason: 'denied', status: this.denyStatus, key: rawKey, ip }, []);
    }
    if (this.allow !== undefined && listMatches(this.allow, address, rawKey)) return CONTINUE;
    if (rawKey === undefined) {
      const missing = this.keySource as Required<ApiKeySource>;
      const extra: HeaderPair[] = missing.missingStatus === 401 ? [['WWW-Authenticate', `ApiKey header="${missing.header}"`]] : [];
      const info = { reason: 'missing-key', status: missing.missingStatus, key: undefined, ip, missingHeader: missing.header } as const;
      return this.refuse(view.raw, info, extra);
    }
    const key = boundKey(rawKey, this.maxKeyLength);
    if (typeof this.cost === 'number') return this.counted(view.raw, ip, key, this.cost);
    const returned = this.cost(view.raw, known ?? clientInfo(view, identity));
    if (isThenable(returned)) return Promise.resolve(returned).then((cost) => this.counted(view.raw, ip, key, cost));
    return this.counted(view.raw, ip, key, returned);
  }

  /**
   * The only policy's decision when it needs no waiting (the in-memory block
   * refuses, or the store is in process), else the store path. Several
   * policies always take the store path: a refusal by one gives back what
   * the others took.
   */
  private counted(raw: Raw, ip: string | undefined, key: string, cost: number): HttpOutcome | Promise<HttpOutcome> {
    if (this.policies.length === 1) {
      const now = this.policies[0]!.limiter.consumeNow(key, cost);
      if (now !== undefined) return now.allowed ? this.admittedOne(raw, key, ip, cost, now) : this.limitedOne(raw, key, ip, cost, now);
    }
    return this.consumed(raw, ip, key, cost);
  }

  /** Every policy's consume, with refunds when one refuses and the failure policy when a store fails. */
  private async consumed(raw: Raw, ip: string | undefined, key: string, cost: number): Promise<HttpOutcome> {
    const calls = this.policies.map((p) => p.limiter.consume(key, cost));
    const settled =
      calls.length === 1 ? [await settle(this.guard(calls[0]!))] : await Promise.allSettled(calls.map((call) => this.guard(call)));
    const decisions: Array<Decision | undefined> = [];
    const storeErrors: unknown[] = [];
    let badCall: unknown;
    let refused = false;
    for (const result of settled) {
      if (result.status === 'fulfilled') {
        decisions.push(result.value);
        if (!result.value.allowed) refused = true;
      } else {
        decisions.push(undefined);
        if (isStoreFailure(result.reason)) storeErrors.push(result.reason);
        else badCall ??= result.reason;
      }
    }
    for (const error of storeErrors) this.report(error, raw);
    // One policy that answered: nothing to give back either way.
    if (decisions.length === 1 && decisions[0] !== undefined) {
      const only = decisions[0];
      return only.allowed ? this.admittedOne(raw, key, ip, cost, only) : this.limitedOne(raw, key, ip, cost, only);
    }

    const giveBack = badCall !== undefined || refused || (storeErrors.length > 0 && !this.passOnStoreError);
    if (giveBack) {
      this.refundLate(calls, settled, key, cost, raw);
      if (decisions.some((d) => d !== undefined && d.allowed && d.source !== 'fail-open')) await this.refund(decisions, key, cost, raw);
    }
    if (badCall !== undefined) return { action: 'error', error: badCall };

    const reports: PolicyReport[] = [];
    decisions.forEach((d, i) => {
      if (d !== undefined) reports.push(toReport(this.policies[i]!, d));
    });
    const rateHeaders = rateLimitHeaders(this.modes, reports, Date.now());

    if (refused) return this.limited(raw, key, ip, cost, decisions, reports, rateHeaders, storeErrors);
    if (storeErrors.length > 0 && !this.passOnStoreError) {
      const info = { reason: 'store-error', status: this.storeErrorStatus, key, ip, policies: reports, error: storeErrors[0] } as const;
      const outcome = this.refuse(raw, info, rateHeaders);
      this.decided(raw, { key, ip, cost, allowed: false, status: this.storeErrorStatus, policies: reports, errors: storeErrors });
      return outcome;
    }
    this.decided(raw, { key, ip, cost, allowed: true, status: undefined, policies: reports, errors: storeErrors });
    return { action: 'continue', headers: rateHeaders };
  }

  /** The admission by a route's only policy. */
  private admittedOne(raw: Raw, key: string, ip: string | undefined, cost: number, decision: Decision): HttpOutcome {
    const reports = [toReport(this.policies[0]!, decision)];
    this.decided(raw, { key, ip, cost, allowed: true, status: undefined, policies: reports, errors: NO_ERRORS });
    return { action: 'continue', headers: rateLimitHeaders(this.modes, reports, Date.now()) };
  }

  /**
   * The refusal by a route's only policy. Under a flood the same response is
   * built again and again; with no hook or body function to see each
   * request, its fields, Retry-After and body depend only on the whole
   * seconds left (and, for the legacy reset, the second the wait ends), so
   * each distinct one is built once and shared, frozen.
   */
  private limitedOne(raw: Raw, key: string, ip: string | undefined, cost: number, decision: Decision): HttpOutcome {
    const memoKey = this.refusalMemoKey(decision);
    if (memoKey !== undefined) {
      const known = this.refusals.get(memoKey);
      if (known !== undefined) return known;
    }
    const reports = [toReport(this.policies[0]!, decision)];
    const outcome = this.limited(raw, key, ip, cost, [decision], reports, rateLimitHeaders(this.modes, reports, Date.now()), []);
    if (memoKey !== undefined) {
      if (this.refusals.size >= MAX_MEMOISED_REFUSALS) this.refusals.clear();
      this.refusals.set(memoKey, freezeOutcome(outcome));
    }
    return outcome;
  }

  /** What a single-policy refusal's response depends on, or undefined when it may not be shared (see {@link limitedOne}). */
  private refusalMemoKey(decision: Decision): number | string | undefined {
    if (!this.sharesRefusals || decision.remaining !== 0 || decision.source === 'fail-closed') return undefined;
    const ms = decision.retryAfterMs;
    if (!Number.isFinite(ms)) return undefined;
    const seconds = Math.ceil(ms / 1000);
    return this.legacyHeaders ? `${seconds}:${Math.ceil((Date.now() + ms) / 1000)}` : seconds;
  }

  /** The refusal of a request some policy limited: headers, Retry-After, body, hooks. */
  private limited(
    raw: Raw,
    key: string,
    ip: string | undefined,
    cost: number,
    decisions: ReadonlyArray<Decision | undefined>,
    reports: PolicyReport[],
    rateHeaders: readonly HeaderPair[],
    storeErrors: unknown[],
  ): HttpOutcome {
    const violated = reports.filter((r) => !r.allowed);
    const retryAfter = retryAfterSeconds(reports);
    const headers: HeaderPair[] = [...rateHeaders];
    if (retryAfter !== undefined) headers.push(['Retry-After', String(retryAfter)]);
    const failClosed = decisions.every((d) => d === undefined || d.allowed || d.source === 'fail-closed');
    const info = {
      reason: 'limited',
      status: this.statusCode,
      key,
      ip,
      policies: reports,
      violatedPolicies: violated.map((r) => r.name),
      retryAfterSeconds: retryAfter,
    } as const;
    const outcome = this.refuse(raw, info, headers, failClosed ? REDUCED_CAPACITY_TYPE : QUOTA_EXCEEDED_TYPE);
    this.decided(raw, { key, ip, cost, allowed: false, status: this.statusCode, policies: reports, errors: storeErrors });
    return outcome;
  }

  /** Gives back what admitting policies took, replacing their decisions with the post-refund state for the headers. */
  private async refund(decisions: Array<Decision | undefined>, key: string, cost: number, raw: Raw): Promise<void> {
    await Promise.all(
      decisions.map(async (d, i) => {
        // A fail-open decision spent nothing; a refused one spent nothing either.
        if (d === undefined || !d.allowed || d.source === 'fail-open') return;
        try {
          const after = await this.guard(this.policies[i]!.limiter.reward(key, cost));
          // Still reported as admitting: it was not this policy that refused.
          decisions[i] = { ...after, allowed: true, retryAfterMs: 0 };
        } catch (error) {
          this.report(error, raw);
        }
      }),
    );
  }

  /**
   * A consume that outlived the middleware's timeout may still be admitted
   * later; the request was not served under it, so give those units back
   * when (if) it answers. Not awaited: the response does not wait for it.
   */
  private refundLate(
    calls: ReadonlyArray<Promise<Decision>>,
    settled: ReadonlyArray<PromiseSettledResult<Decision>>,
    key: string,
    cost: number,
    raw: Raw,
  ): void {
    settled.forEach((result, i) => {
      if (result.status !== 'rejected' || !this.timeouts.has(result.reason as object)) return;
      calls[i]!.then(
        (late) => {
          if (!late.allowed || late.source === 'fail-open') return undefined;
          return this.policies[i]!.limiter.reward(key, cost).then(undefined, (error: unknown) => this.report(error, raw));
        },
        () => undefined, // already reported as a timeout
      );
    });
  }

  /** Builds the middleware's own response and fires `onLimited` for limited ones. */
  private refuse(
    raw: Raw,
    partial: Partial<RefusalInfo> & Pick<RefusalInfo, 'reason' | 'status' | 'key' | 'ip'>,
    headers: readonly HeaderPair[],
    problemType = QUOTA_EXCEEDED_TYPE,
  ): HttpOutcome {
    const info: RefusalInfo = { retryAfterSeconds: undefined, policies: [], violatedPolicies: [], ...partial };
    const { contentType, body } = this.renderBody(info, problemType);
    if (info.reason === 'limited' && this.onLimited !== undefined) this.safely(() => this.onLimited!(raw, info), raw);
    return { action: 'respond', status: info.status, headers, contentType, body };
  }

  /**
   * The built-in bodies depend on a handful of values that repeat from one
   * refusal to the next (status, reason, Retry-After, the violated policies),
   * so each distinct one is rendered once: under a flood of refusals the JSON
   * would otherwise be rebuilt and re-serialised for every request.
   */
  private renderBody(info: RefusalInfo, problemType: string): { contentType: string; body: string } {
    if (typeof this.body === 'function') return this.renderBodyUncached(info, problemType);
    const memoKey = `${info.reason}|${info.status}|${problemType}|${info.retryAfterSeconds}|${info.missingHeader}|${info.violatedPolicies.join('\u0000')}`;
    let rendered = this.bodies.get(memoKey);
    if (rendered === undefined) {
      rendered = this.renderBodyUncached(info, problemType);
      if (this.bodies.size >= MAX_MEMOISED_BODIES) this.bodies.clear();
      this.bodies.set(memoKey, rendered);
    }
    return rendered;
  }

  private renderBodyUncached(info: RefusalInfo, problemType: string): { contentType: string; body: string } {
    if (typeof this.body === 'function') {
      const value = this.body(info);
      if (typeof value === 'string') return { contentType: 'text/plain; charset=utf-8', body: value };
      return { contentType: 'application/json; charset=utf-8', body: jsonBody(value) };
    }
    const title = STATUS_CODES[info.status] ?? 'Error';
    let detail: string;
    let type = 'about:blank';
    const extra: Record<string, unknown> = {};
    switch (info.reason) {
      case 'limited':
        type = problemType;
        detail =
          info.retryAfterSeconds === undefined
            ? 'Request quota exceeded.'
            : `Request quota exceeded; retry in ${info.retryAfterSeconds} second${info.retryAfterSeconds === 1 ? '' : 's'}.`;
        extra['violated-policies'] = info.violatedPolicies;
        break;
      case 'denied':
        detail = 'This client is not allowed to make requests.';
        break;
      case 'missing-key':
        detail = `Send your API key in the ${info.missingHeader ?? 'API key'} header.`;
        break;
      case 'store-error':
        detail = 'The rate limiter is unavailable; try again shortly.';
        break;
    }
    if (this.body === 'text') return { contentType: 'text/plain; charset=utf-8', body: `${detail}\n` };
    // RFC 9457: with type "about:blank" the title is the status phrase.
    const problem = { type, title: type === 'about:blank' ? title : titleFor(type, title), status: info.status, detail, ...extra };
    return { contentType: 'application/problem+json', body: JSON.stringify(problem) };
  }

  private decided(raw: Raw, info: DecisionInfo): void {
    if (this.onDecision !== undefined) this.safely(() => this.onDecision!(raw, info), raw);
  }

  /** Runs a user hook; a throw or a rejection goes to onError instead of the request. */
  private safely(hook: () => void | Promise<void>, raw: Raw): void {
    try {
      const result = hook();
      if (result !== undefined && typeof (result as Promise<void>).then === 'function') {
        (result as Promise<void>).then(undefined, (error: unknown) => this.report(error, raw));
      }
    } catch (error) {
      this.report(error, raw);
    }
  }

  private report(error: unknown, raw: Raw | undefined): void {
    try {
      this.onError(error, raw);
    } catch {
      // An onError that throws must not turn a handled failure into an unhandled one.
    }
  }

  /** Bounds a limiter call by `timeout`, so a store that never answers cannot hang the request. */
  private guard<T>(promise: Promise<T>): Promise<T> {
    const ms = this.timeoutMs;
    if (ms === undefined) return promise;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        const error = new FloodgateError(ErrorCode.STORE_TIMEOUT, `the limiter did not answer within ${ms} ms (HTTP middleware timeout).`);
        this.timeouts.add(error);
        reject(error);
      }, ms);
      timer.unref?.();
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }
}

/** A client's address as parsed, as text (for callbacks) and as its limiter key (grouped by IPv6 subnet). */
interface Identity {
  readonly address: IpAddress | undefined;
  readonly ip: string | undefined;
  readonly key: string;
}

/** Distinct shared refusals an HttpLimiter keeps before it starts over. */
const MAX_MEMOISED_REFUSALS = 256;

/** Distinct built-in bodies an HttpLimiter keeps before it starts over. */
const MAX_MEMOISED_BODIES = 256;

/** Entries in an HttpLimiter's identity memo before it starts over. */
const MAX_MEMOISED_IDENTITIES = 4096;

function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | null)?.then === 'function';
}

/** What a user callback or a misconfiguration that threw becomes. */
function errorOutcome(error: unknown): HttpOutcome {
  return { action: 'error', error };
}

/** What user callbacks see of the request. */
function clientInfo<Raw>(view: RequestView<Raw>, identity: Identity): ClientInfo {
  return { ip: identity.ip, method: view.method, path: view.path, headers: view.headers };
}

/**
 * A body function's non-string answer as JSON. Undefined, a function or a
 * symbol has no JSON text, and a BigInt or a cycle makes stringify throw:
 * each is the caller's mistake, reported as such rather than sent as an
 * empty or broken body.
 */
function jsonBody(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `the body function must return a string or a JSON-serialisable value; serialising it failed: ${(error as Error).message}`,
    );
  }
  if (text === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `the body function must return a string or a JSON-serialisable value; got ${describe(value)}.`,
    );
  }
  return text;
}

/** A key function's answer, which must be a non-empty string. */
function checkedKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new FloodgateError(ErrorCode.INVALID_KEY, `the key function must return a non-empty string; got ${describe(value)}.`);
  }
  return value;
}

/** Freezes a shared outcome and its header list, so no adapter can change what other requests will be sent. */
function freezeOutcome(outcome: HttpOutcome): HttpOutcome {
  if (outcome.action === 'respond') Object.freeze(outcome.headers);
  return Object.freeze(outcome);
}

/** Promise.allSettled for one promise, without the array and combinator. */
function settle<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: 'fulfilled', value }),
    (reason: unknown) => ({ status: 'rejected', reason }),
  );
}

/** Formats a window for default policy names: `"1s"`, `"5m"`, `"1d"`, or `"1500ms"`. */
export function formatWindow(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

function titleFor(type: string, fallback: string): string {
  if (type === QUOTA_EXCEEDED_TYPE) return 'Request cannot be satisfied as assigned quota has been exceeded';
  if (type === REDUCED_CAPACITY_TYPE) return 'Request cannot be satisfied due to temporary server capacity constraints';
  return fallback;
}

function toReport(policy: Policy, d: Decision): PolicyReport {
  return {
    name: policy.name,
    limit: d.limit,
    windowMs: policy.limiter.policy.windowMs,
    allowed: d.allowed,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
  };
}

function parsePolicies(value: unknown, owner: string): Policy[] {
  if (value === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${owner} needs a limiter, e.g. { limiter: new RateLimiter({ limit: 100, window: "1m" }) }.`,
    );
  }
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length === 0) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} limiter must name at least one RateLimiter.`);
  }
  const policies: Policy[] = [];
  for (const entry of list) {
    let limiter: unknown;
    let name: unknown;
    if (entry instanceof RateLimiter) {
      limiter = entry;
    } else {
      assertKnownOptions(entry, ['limiter', 'name'], `${owner} limiter entry`);
      limiter = (entry as NamedLimiter).limiter;
      name = (entry as NamedLimiter).name;
    }
    if (!(limiter instanceof RateLimiter)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `limiter must be a RateLimiter or { limiter: RateLimiter, name?: string }; got ${describe(limiter)}.`,
      );
    }
    if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `a policy name must be a non-empty string; got ${describe(name)}.`);
    }
    const policyName = (name as string | undefined) ?? `${limiter.policy.limit}-per-${formatWindow(limiter.policy.windowMs)}`;
    if (!/^[\x20-\x7e]+$/.test(policyName)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `policy name ${JSON.stringify(policyName)} must be printable ASCII (it is sent in a header).`,
      );
    }
    for (const earlier of policies) {
      if (earlier.limiter === limiter) {
        throw new FloodgateError(
          ErrorCode.CONFLICTING_OPTIONS,
          `the same RateLimiter is listed twice for one route; each request would be counted twice against it.`,
        );
      }
      if (earlier.name === policyName) {
        throw new FloodgateError(
          ErrorCode.CONFLICTING_OPTIONS,
          `two policies of one route are both named ${JSON.stringify(policyName)}; give them distinct names with { limiter, name }.`,
        );
      }
    }
    policies.push({ limiter, name: policyName });
  }
  return policies;
}

function parseStatus(value: unknown, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 400 || value > 599) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${name} must be an HTTP error status from 400 to 599; got ${describe(value)}.`);
  }
  return value;
}

function optionalFunction<F>(value: F | undefined, name: string): F | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${name} must be a function; got ${describe(value)}.`);
  }
  return value;
}

function parseList(value: unknown, name: string): ListMatcher | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${name} must be an array of IPs, CIDRs or keys; got ${describe(value)}.`);
  }
  const ranges: string[] = [];
  const keys = new Set<string>();
  for (const entry of value as unknown[]) {
    if (typeof entry !== 'string' || entry.length === 0) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${name} entries must be non-empty strings; got ${describe(entry)}.`);
    }
    // An address, a range or a range name matches the client IP; anything else is compared with the key.
    if (NAMED_RANGES[entry] !== undefined || parseCidr(entry) !== undefined) {
      ranges.push(entry);
      continue;
    }
    // An address with a bad prefix ("10.0.0.0/40") or a dotted quad out of range would otherwise become a
    // key no client sends, and a typo on a deny list would quietly let everyone through.
    const slash = entry.indexOf('/');
    if ((slash > 0 && parseIp(entry.slice(0, slash)) !== undefined) || /^\d{1,3}(\.\d{1,3}){3}$/.test(entry)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `${name} entry ${describe(entry)} looks like an IP range but is not one; write an address, a CIDR such as "10.0.0.0/8" or "2001:db8::/32" (prefix at most 32 for IPv4, 128 for IPv6), or a range name.`,
      );
    }
    keys.add(entry);
  }
  return { addresses: ranges.length > 0 ? new AddressMatcher(ranges, name) : undefined, keys };
}

function listMatches(list: ListMatcher, address: IpAddress | undefined, key: string | undefined): boolean {
  if (address !== undefined && list.addresses?.matches(address) === true) return true;
  return key !== undefined && list.keys.has(key);
}

/** The default onError: one console warning per 10 s at most, with a count of the ones held back, so an outage does not flood the log. */
function throttledWarning(owner: string): (error: unknown) => void {
  return throttled<unknown>(10_000, (error, held) => {
    const detail = error instanceof Error ? `${(error as FloodgateError).code ?? error.name}: ${error.message}` : String(error);
    console.warn(`${owner}: ${detail}${held > 0 ? ` (${held} similar errors not shown)` : ''}`);
  });
}
