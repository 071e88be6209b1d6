/** `floodgate/http`: the framework-neutral HTTP pieces shared by the adapters (core path, client identity, header builders), for custom adapters and tests. */
export { HttpLimiter, HTTP_OPTION_NAMES, QUOTA_EXCEEDED_TYPE, REDUCED_CAPACITY_TYPE, UNKNOWN_CLIENT_KEY, formatWindow } from './core.js';
export { isStoreFailure } from '../errors.js';
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
  RefusalReason,
  RequestView,
} from './core.js';
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
export {
  AddressMatcher,
  HASHED_KEY_PREFIX,
  NAMED_RANGES,
  boundKey,
  cidrContains,
  createIpResolver,
  formatIp,
  headerValue,
  ipKey,
  normalizeIp,
  parseCidr,
  parseForwardedFor,
  parseIp,
} from './keys.js';
export type { Cidr, IpAddress, IpResolverOptions, ProxyHeader, TrustProxy } from './keys.js';
export { setHeaders, viewOf, writeResponse } from './respond.js';
