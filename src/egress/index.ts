/** Public surface of `floodgate/egress`: calls to other services' APIs kept within their limits. */
/**
 * The scheduler shared by every process on a store, the `fetch` that goes through it, and the reader of what an answer says
 * of the upstream's limits.
 */

export { OutboundLimiter } from './outbound-limiter.js';
export type { CallContext, OutboundBudget, OutboundLimiterOptions, ScheduleOptions, UpstreamAnswer } from './outbound-limiter.js';
export { outboundFetch } from './outbound-fetch.js';
export type { OutboundCallOptions, OutboundFetch, OutboundFetchOptions } from './outbound-fetch.js';
export { readUpstreamLimits } from './upstream-limits.js';
export type { HeaderBag, LimitUnit, UpstreamLimits } from './upstream-limits.js';
