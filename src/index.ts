/** Public surface of the floodgate core: no Redis client, no node:cluster, no HTTP code is loaded from here. */
export { RateLimiter } from './limiter.js';
export type { RateLimiterOptions, InMemoryBlockOptions, BreakerConfig, StoreFailureMode } from './limiter-options.js';
export type { Decision, DecisionSource } from './decision.js';
export { FloodgateError, ErrorCode, isFloodgateError, isStoreFailure } from './errors.js';
export type { ErrorCodeValue } from './errors.js';
export { parseDuration } from './duration.js';
export type { Duration } from './duration.js';
export { ManualClock, systemClock } from './clock.js';
export type { Clock } from './clock.js';
export { MemoryStore } from './stores/memory.js';
export type { MemoryStoreOptions, OnFull } from './stores/memory.js';
export type { Store } from './stores/store.js';
export { isStore } from './stores/store.js';
export { ALGORITHMS, BLOCK_FOREVER, OP_CODE } from './policy.js';
export type { Algorithm, Policy, Operation, OperationKind, Outcome } from './policy.js';
export { applyOperation } from './algorithms/index.js';
export type { KeyState, Applied } from './algorithms/index.js';
