/** HttpLimiter options, checked up front and resolved into the settings the request path reads. */
/**
 * Checked up front: every error coded, nothing coerced.
 */
import { capacityOf } from '../core/policy.js';
import { parseDuration } from '../core/duration.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import type { ConcurrencyLimiter } from '../limiter/concurrency-limiter.js';
import { LIMITER_INTERNALS } from '../limiter/internals.js';
import { throttled } from '../util/throttle.js';
import { assertKnownOptions, oneOf, optionalBoolean, optionalFunction, wholeNumber } from '../core/validate.js';
import { parseRetryAfterJitter } from './retry-after.js';
import { WarningCode, warnOnce } from '../core/warnings.js';
import { parseHeaderModes } from './headers.js';
import { assertNotLimiter, forwardedHeaderWatch, parseValidate } from './slips.js';
import { parseResponseOptions } from './response-options.js';
import { assertIpv6Subnet, createIpResolver } from './client-keys.js';
import { AddressMatcher, NAMED_RANGES, parseCidr, parseIp, type IpAddress } from './ip-address.js';
import type { HttpSettings, ListMatcher, NamedPolicy, PolicyKeySource } from './settings.js';
import {
  type HttpRateLimitOptions,
  type AdapterConfig,
  type ApiKeySource,
  HTTP_OPTION_NAMES,
  type NamedLimiter,
  type LimiterSelector,
} from './types.js';
import { policySelector } from './policy-selector.js';
import { parseRewardRule } from './count-by-outcome.js';
import { limiterOption } from './shorthand.js';

/**
 * Checks every option of an HttpLimiter up front and resolves defaults.
 * @throws FloodgateError for any invalid option (UNKNOWN_OPTION, INVALID_OPTIONS, CONFLICTING_OPTIONS, INVALID_COST, …)
 */
export function resolveHttpOptions<Raw>(options: HttpRateLimitOptions<Raw>, adapter: AdapterConfig): HttpSettings<Raw> {
  const owner = adapter.owner;
  let resolveIp: HttpSettings<Raw>['resolveIp'];
  let identityInput: HttpSettings<Raw>['identityInput'];
  assertNotLimiter(options, `${owner}()`, 'rateLimit({ limiter })');
  assertKnownOptions(options, HTTP_OPTION_NAMES, owner);
  const o = options as HttpRateLimitOptions<Raw>;

  const limiterGiven = limiterOption(o, owner);
  const selectPolicies =
    typeof limiterGiven === 'function'
      ? policySelector(limiterGiven as LimiterSelector<Raw>, (value) => parsePolicies(value, `${owner} limiter function's answer`))
      : undefined;
  const policies = selectPolicies === undefined ? parsePolicies(limiterGiven, owner) : [];
  const validate = parseValidate(o.validate, owner);

  const keySource = parseKeySource(o.key ?? 'ip', 'key') as HttpSettings<Raw>['keySource'];

  const usesFrameworkIp = o.trustProxy === 'framework';
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
    resolveIp = (view) => (view.frameworkIp === undefined ? undefined : parseIp(view.frameworkIp));
    identityInput = (view) => view.frameworkIp;
  } else {
    if (o.proxyHeader !== undefined && (o.trustProxy ?? false) === false) {
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        "proxyHeader is read only from trusted proxies, and trustProxy is off; set trustProxy (a hop count or the proxies' CIDRs) or remove proxyHeader.",
      );
    }
    const resolver = createIpResolver({ trustProxy: o.trustProxy ?? false, proxyHeader: o.proxyHeader ?? 'x-forwarded-for' });
    resolveIp = (view) => resolver(view.socketAddress, view.headers);
    identityInput = (o.trustProxy ?? false) === false ? (view) => view.socketAddress : undefined;
  }

  const subnet = o.ipv6Subnet ?? 64;
  assertIpv6Subnet(subnet);
  const ipv6Subnet = subnet;

  const maxKeyLength = wholeNumber(o.maxKeyLength ?? 128, 'maxKeyLength', {
    min: 64,
    expected: 'a whole number of bytes of at least 64 (a hashed key takes 50)',
  });

  const cost = o.cost ?? 1;
  if (typeof cost !== 'function' && (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1)) {
    throw new FloodgateError(
      ErrorCode.INVALID_COST,
      `cost must be a positive whole number or a function returning one; got ${describeValue(cost)}.`,
    );
  }
  for (const p of policies) {
    if (typeof cost === 'number' && cost > capacityOf(p.limiter.policy)) {
      throw new FloodgateError(
        ErrorCode.COST_EXCEEDS_LIMIT,
        `cost ${cost} is larger than the limit ${capacityOf(p.limiter.policy)} of policy ${JSON.stringify(p.name)}, so no request could ever pass.`,
      );
    }
  }

  const modes = parseHeaderModes(o.headers);
  const statusCode = parseStatus(o.statusCode, 429, 'statusCode');
  const shadow = optionalBoolean(o.shadow, 'shadow') ?? false;
  if (shadow && o.onLimited !== undefined && o.validate !== false) {
    // The gateway logs its shadow rules' would-be refusals from onLimited, so a user may expect the hook to hear them.
    warnOnce(
      WarningCode.ON_LIMITED_IN_SHADOW,
      `${owner} has shadow: true and an onLimited hook, which is never called in shadow mode: nothing is refused. To log the requests it would have refused, use onDecision: (req, info) => { if (info.shadowLimited) … }.`,
      owner,
    );
  }
  const retryAfterJitter = parseRetryAfterJitter(o.retryAfterJitter);
  const denyStatus = parseStatus(o.denyStatus, 403, 'denyStatus');
  const storeErrorStatus = parseStatus(o.storeErrorStatus, 503, 'storeErrorStatus');

  const body = o.body ?? 'problem';
  if (body !== 'problem' && body !== 'text' && typeof body !== 'function') {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `body must be "problem", "text" or a function; got ${describeValue(body)}.`);
  }

  const skip = optionalFunction(o.skip, 'skip');
  const rewardRule = parseRewardRule<Raw>(o.skipFailedRequests, o.skipSuccessfulRequests, o.requestWasSuccessful, owner);
  const onLimited = optionalFunction(o.onLimited, 'onLimited');
  const onDecision = optionalFunction(o.onDecision, 'onDecision');
  const onError = optionalFunction(o.onError, 'onError') ?? throttledWarning(owner);
  const allow = parseList(o.allowList, 'allowList');
  const deny = parseList(o.denyList, 'denyList');

  const mode = oneOf(o.onStoreError ?? 'respond', 'onStoreError', ['respond', 'pass'] as const);

  const passOnStoreError = mode === 'pass';
  if (passOnStoreError && o.storeErrorStatus !== undefined) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      'storeErrorStatus is the status of onStoreError: "respond", and onStoreError is "pass" (requests go through); remove one of them.',
    );
  }
  const timeoutMs = o.timeout === false ? undefined : parseDuration(o.timeout ?? 5000, 'timeout');
  // A shared refusal is keyed by what its response depends on, which does not include the policies a selector chose.
  // In shadow mode a would-be refusal goes on with the request's own key and cost: nothing to share.
  const sharesRefusals =
    onLimited === undefined && onDecision === undefined && typeof body !== 'function' && selectPolicies === undefined && !shadow;
  const legacyHeaders = modes.includes('legacy');
  // Only an unset trustProxy: `false` says the headers are known to be no proxy's.
  const watchForwarded =
    validate.forwardedHeader && (keySource === 'ip' || policies.some((p) => p.key === 'ip')) && o.trustProxy === undefined
      ? forwardedHeaderWatch(`${owner} (${policyList(policies)})`, adapter.frameworkIp)
      : undefined;
  const responseOptions = parseResponseOptions(o, rewardRule, owner);
  if (shadow) assertShadowDoesNotWait(policies, responseOptions.concurrency?.limiter, owner);
  return {
    ...responseOptions,
    watchForwarded,
    policies,
    selectPolicies,
    keySource,
    resolveIp,
    identityInput,
    ipv6Subnet,
    maxKeyLength,
    cost,
    modes,
    statusCode,
    shadow,
    retryAfterJitter,
    body,
    skip,
    rewardRule,
    allow,
    deny,
    denyStatus,
    onLimited,
    onDecision,
    passOnStoreError,
    storeErrorStatus,
    onError,
    timeoutMs,
    sharesRefusals,
    legacyHeaders,
    usesFrameworkIp,
  };
}

/**
 * A shadow route lets every request go on at once: a limiter of it that
 * waits (`wait`, `execEvenly`) would delay the requests the route only watches.
 * @throws FloodgateError CONFLICTING_OPTIONS
 */
function assertShadowDoesNotWait(policies: readonly NamedPolicy[], concurrency: ConcurrencyLimiter | undefined, owner: string): void {
  const waiting = policies.find((p) => p.limiter[LIMITER_INTERNALS]().waits);
  if (waiting === undefined && concurrency?.waits !== true) return;
  const which =
    waiting === undefined ? 'its concurrency limiter has wait' : `policy ${JSON.stringify(waiting.name)} has wait or execEvenly`;
  throw new FloodgateError(
    ErrorCode.CONFLICTING_OPTIONS,
    `${owner}: shadow: true lets every request go on at once, but ${which}, which would delay the requests it only watches; remove one of them.`,
  );
}

function parsePolicies(value: unknown, owner: string): NamedPolicy[] {
  if (value === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${owner} needs a limit, e.g. { limit: 100, window: '15m' } or { limiter: new RateLimiter({ limit: 100, window: '15m' }) }.`,
    );
  }
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length === 0) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${owner} limiter must name at least one RateLimiter.`);
  }
  const policies: NamedPolicy[] = [];
  for (const entry of list) {
    let limiter: unknown;
    let name: unknown;
    let ownKey: unknown;
    if (entry instanceof RateLimiter) {
      limiter = entry;
    } else {
      assertKnownOptions(entry, ['limiter', 'name', 'key'], `${owner} limiter entry`);
      limiter = (entry as NamedLimiter).limiter;
      name = (entry as NamedLimiter).name;
      ownKey = (entry as NamedLimiter).key;
    }
    if (!(limiter instanceof RateLimiter)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `limiter must be a RateLimiter or { limiter: RateLimiter, name?: string, key?: … }; got ${describeValue(limiter)}.`,
      );
    }
    if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `a policy name must be a non-empty string; got ${describeValue(name)}.`);
    }
    const { limit, windowMs, calendar } = limiter.policy;
    const policyName = (name as string | undefined) ?? `${limit}-per-${calendar ? calendar.unit : formatWindow(windowMs)}`;
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
    const key = ownKey === undefined ? undefined : parseKeySource(ownKey, `the key of policy ${JSON.stringify(policyName)}`);
    policies.push({ limiter, name: policyName, key });
  }
  return policies;
}

/**
 * A route's or a policy's key option: `"ip"`, `{ header, missingStatus? }`
 * (the header name lower-cased, missingStatus 401 by default) or a function.
 * @throws FloodgateError INVALID_OPTIONS for anything else
 */
function parseKeySource(key: unknown, what: string): PolicyKeySource {
  if (key === 'ip' || typeof key === 'function') return key as PolicyKeySource;
  if (typeof key !== 'object' || key === null) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${what} must be "ip", { header: "x-api-key" } or a function (req, client) => string; got ${describeValue(key)}.`,
    );
  }
  assertKnownOptions(key, ['header', 'missingStatus'], what);
  const k = key as ApiKeySource;
  if (typeof k.header !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k.header)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${what}.header must be a header name such as "x-api-key"; got ${describeValue(k.header)}.`,
    );
  }
  if (k.missingStatus !== undefined && k.missingStatus !== 400 && k.missingStatus !== 401) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${what}.missingStatus must be 400 or 401; got ${describeValue(k.missingStatus)}.`);
  }
  return { header: k.header.toLowerCase(), missingStatus: k.missingStatus ?? 401 };
}

/** `policy "100-per-1m"` or `policies "burst", "daily"`: which limiter a warning is about. */
function policyList(policies: readonly NamedPolicy[]): string {
  if (policies.length === 0) return 'policies chosen per request';
  return `${policies.length === 1 ? 'policy' : 'policies'} ${policies.map((p) => JSON.stringify(p.name)).join(', ')}`;
}

function parseStatus(value: unknown, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  return wholeNumber(value, name, { min: 400, max: 599, expected: 'an HTTP error status from 400 to 599' });
}

function parseList(value: unknown, name: string): ListMatcher | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) {
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${name} must be an array of IPs, CIDRs or keys; got ${describeValue(value)}.`);
  }
  const ranges: string[] = [];
  const keys = new Set<string>();
  for (const entry of value as unknown[]) {
    if (typeof entry !== 'string' || entry.length === 0) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `${name} entries must be non-empty strings; got ${describeValue(entry)}.`);
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
        `${name} entry ${describeValue(entry)} looks like an IP range but is not one; write an address, a CIDR such as "10.0.0.0/8" or "2001:db8::/32" (prefix at most 32 for IPv4, 128 for IPv6), or a range name.`,
      );
    }
    keys.add(entry);
  }
  return { addresses: ranges.length > 0 ? new AddressMatcher(ranges, name) : undefined, keys };
}

/** Whether the client address or the key is on the list. */
export function listMatches(list: ListMatcher, address: IpAddress | undefined, key: string | undefined): boolean {
  if (address !== undefined && list.addresses?.matches(address) === true) return true;
  return key !== undefined && list.keys.has(key);
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

/** The default onError: one console warning per 10 s at most, with a count of the ones held back, so an outage does not flood the log. */
function throttledWarning(owner: string): (error: unknown) => void {
  return throttled<unknown>(10_000, (error, held) => {
    const detail = error instanceof Error ? `${(error as FloodgateError).code ?? error.name}: ${error.message}` : String(error);
    console.warn(`${owner}: ${detail}${held > 0 ? ` (${held} similar errors not shown)` : ''}`);
  });
}
