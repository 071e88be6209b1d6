/** The HTTP middleware's checked settings and the types its parts share (types only). */
/**
 * Below options.ts, which fills them in.
 */
import type { ServerResponse } from 'node:http';
import type { ConcurrencyLimiter } from '../limiter/concurrency-limiter.js';
import type { RateLimiter } from '../limiter/rate-limiter.js';
import type { HeaderMode } from './headers.js';
import type { AddressMatcher, IpAddress } from './ip-address.js';
import type { RetryAfterSpread } from './retry-after.js';
import type { ApiKeySource, BodyOption, ClientInfo, HttpRateLimitOptions, KeyFunction, RequestView } from './types.js';

/** A limiter with the name it is reported under. */
export interface NamedPolicy {
  /** The limiter that decides. */
  readonly limiter: RateLimiter;
  /** The name in headers, bodies and reports. */
  readonly name: string;
  /** Who this policy counts against when not the route's key; undefined for the route's key. */
  readonly key: PolicyKeySource | undefined;
}

/** A policy's own key source, checked: the client address, an API-key header, or a function of the request. */
export type PolicyKeySource = 'ip' | Required<ApiKeySource> | KeyFunction<unknown>;

/** One key per policy, in the route's order. */
export type PolicyKeys = readonly string[];

/** The policies of one request, at once or through a promise. */
export type SelectPolicies<Raw> = (raw: Raw, client: ClientInfo) => readonly NamedPolicy[] | Promise<readonly NamedPolicy[]>;

/** Whether a finished request's units are rewarded: `status` is undefined when the connection closed before the response ended. */
export type RewardRule<Raw> = (raw: Raw, status: number | undefined) => boolean;

/** An allow or deny list: addresses and ranges match the client IP, anything else the key. */
export interface ListMatcher {
  /** The IPs, CIDRs and named ranges of the list. */
  readonly addresses: AddressMatcher | undefined;
  /** The keys of the list. */
  readonly keys: ReadonlySet<string>;
}

/** The checked `concurrency` and `actualCost` options. */
export interface ResponseSettings<Raw> {
  /** The in-flight limiter, and the name its refusals report in `violatedPolicies`. */
  readonly concurrency: { readonly limiter: ConcurrencyLimiter; readonly name: string } | undefined;
  readonly actualCost: ((req: Raw, res: ServerResponse) => number | undefined | Promise<number | undefined>) | undefined;
}

/** An HttpLimiter's options, checked and with defaults filled in. */
export interface HttpSettings<Raw> extends ResponseSettings<Raw> {
  /** The route's policies; empty when {@link selectPolicies} picks them per request. */
  readonly policies: readonly NamedPolicy[];
  /** Picks each request's policies, when the `limiter` option is a function. */
  readonly selectPolicies: SelectPolicies<Raw> | undefined;
  readonly keySource: 'ip' | ApiKeySource | KeyFunction<Raw>;
  readonly resolveIp: (view: RequestView<Raw>) => IpAddress | undefined;
  /**
   * Which string alone determines the client address (the socket peer, or the
   * framework's IP), when proxy headers do not take part; identities are then
   * memoised by it, since parsing and formatting an address costs more than
   * the rest of a decision on the memory store.
   */
  readonly identityInput: ((view: RequestView<Raw>) => string | undefined) | undefined;
  /** Whether single-policy refusals may share one frozen response (no hook or body function sees each request). */
  readonly sharesRefusals: boolean;
  /** Whether the legacy fields are sent, whose reset is a point in time rather than a duration. */
  readonly legacyHeaders: boolean;
  readonly ipv6Subnet: number | false;
  readonly maxKeyLength: number;
  readonly cost: number | ((req: Raw, client: ClientInfo) => number | Promise<number>);
  readonly modes: readonly HeaderMode[];
  readonly statusCode: number;
  /** The `shadow` option: refusals by the policies or the concurrency limit let the request go on, marked. */
  readonly shadow: boolean;
  /** The `retryAfterJitter` option, checked; undefined when off. */
  readonly retryAfterJitter: RetryAfterSpread | undefined;
  readonly body: BodyOption;
  readonly skip: HttpRateLimitOptions<Raw>['skip'];
  /** When an admitted request's units are rewarded after its response (skipFailedRequests / skipSuccessfulRequests). */
  readonly rewardRule: RewardRule<Raw> | undefined;
  readonly allow: ListMatcher | undefined;
  readonly deny: ListMatcher | undefined;
  readonly denyStatus: number;
  readonly onLimited: HttpRateLimitOptions<Raw>['onLimited'];
  readonly onDecision: HttpRateLimitOptions<Raw>['onDecision'];
  readonly passOnStoreError: boolean;
  readonly storeErrorStatus: number;
  readonly onError: (error: unknown, req: Raw | undefined) => void;
  readonly timeoutMs: number | undefined;
  /** True when requests are identified by the framework's address; adapters read it only then (Express computes `req.ip` on each read). */
  readonly usesFrameworkIp: boolean;
  /** Called with each request's headers until it returns true, when the forwarded-header warning is on (`forwardedHeaderWatch` in slips.ts). */
  readonly watchForwarded: ((headers: RequestView<Raw>['headers']) => boolean) | undefined;
}
