/** `floodgate/http`: the framework-neutral HTTP pieces shared by the adapters. */
/**
 * Core path, client identity, header builders; for custom adapters and tests.
 */

export { HttpLimiter } from './http-limiter.js';
export { UNKNOWN_CLIENT_KEY } from './identity.js';
export { HTTP_OPTION_NAMES } from './types.js';
export { QUOTA_EXCEEDED_TYPE, REDUCED_CAPACITY_TYPE } from './refusal.js';
export { formatWindow } from './options.js';
export { isStoreFailure } from '../core/errors.js';
export type {
  AdapterConfig,
  ApiKeySource,
  BodyOption,
  ClientInfo,
  DecisionInfo,
  HttpOutcome,
  HttpRateLimitOptions,
  KeyFunction,
  KeySource,
  LimiterEntry,
  NamedLimiter,
  RefusalInfo,
  RateLimitInfo,
  RefusalReason,
  RequestView,
} from './types.js';
export {
  HEADER_MODES,
  bindingPolicy,
  combinedValue,
  effectiveWindowSeconds,
  parseHeaderModes,
  rateLimitHeaders,
  retryAfterSeconds,
  sfString,
  windowSeconds,
} from './headers.js';
export type { HeaderMode, HeaderPair, PolicyReport } from './headers.js';
export type { RetryAfterJitter, RetryAfterJitterOptions } from './retry-after.js';
export { HASHED_KEY_PREFIX, boundKey, createIpResolver, headerValue, ipKey, parseForwardedFor } from './client-keys.js';
export type { IpResolverOptions, ProxyHeader, TrustProxy } from './client-keys.js';
export { AddressMatcher, NAMED_RANGES, cidrContains, formatIp, normalizeIp, parseCidr, parseIp } from './ip-address.js';
export type { Cidr, IpAddress } from './ip-address.js';
export { setHeaders, viewOf, writeResponse } from './respond.js';
export { abortOnClose } from './client-gone.js';
