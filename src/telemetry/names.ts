/** The OpenTelemetry names floodgate records under (metrics, spans, attributes). */
/**
 * In one place so code and docs/telemetry.md agree.
 */

/** Metric names (OTel semantic-convention style: dotted, unit in the metadata, not in the name). */
export const METRIC = {
  /** Counter of rate-limit decisions; unit `{decision}`. */
  decisions: 'floodgate.decisions',
  /** Histogram of store call durations; unit `s`. */
  storeDuration: 'floodgate.store.duration',
  /** Counter of store operations answered synchronously in the process; unit `{operation}`. */
  storeSyncAnswers: 'floodgate.store.sync_answers',
  /** Gauge: 1 while a limiter's circuit breaker keeps calls from the store, else 0. */
  breakerState: 'floodgate.breaker.state',
} as const;

/** Span names: one span per asynchronous store call. */
export const SPAN = {
  /** `Store.apply`. */
  apply: 'floodgate.store.apply',
  /** `Store.consumeAll` (a composite). */
  consumeAll: 'floodgate.store.consume_all',
  /** `Store.acquireSlot`. */
  acquireSlot: 'floodgate.store.acquire_slot',
  /** `Store.releaseSlot`. */
  releaseSlot: 'floodgate.store.release_slot',
  /** `Store.renewSlot`. */
  renewSlot: 'floodgate.store.renew_slot',
} as const;

/** Attribute names. Keys are never recorded as they are: they may be personal data. */
export const ATTR = {
  /** The store's name ("memory", "redis", "redis-local-first", "cluster"). */
  store: 'floodgate.store.name',
  /** The operation: consume, peek, reward, penalty, block, reset, consume_all, acquire_slot, release_slot, renew_slot. */
  operation: 'floodgate.operation',
  /** The policy's algorithm (apply), or the parts' when they all share one. */
  algorithm: 'floodgate.algorithm',
  /** Parts of a composite (consume_all). */
  parts: 'floodgate.parts',
  /** Whether the call admitted: the outcome's `allowed`, a composite's all-allowed, a slot's `admitted`. */
  allowed: 'floodgate.allowed',
  /** `ok` or `error`, on store durations. */
  result: 'floodgate.result',
  /** The FloodgateError code of a failed call (OTel's general `error.type`). */
  errorType: 'error.type',
  /** A salted SHA-256 of the key, 16 hex digits; only with `recordKey: 'sha256'`. */
  keyHash: 'floodgate.key.hash',
  /** The limiter's name, on limiter metrics. */
  limiter: 'floodgate.limiter',
  /** A decision's outcome: allowed, limited, shadow_limited (a shadow limiter's would-be refusal, admitted), or error (the call rejected). */
  outcome: 'floodgate.outcome',
  /** Where a decision came from (Decision.source): store, memory-block, insurance, fail-open, fail-closed. */
  source: 'floodgate.decision.source',
} as const;

/** Buckets of `floodgate.store.duration`, in seconds (store calls are sub-millisecond to a few ms). */
export const STORE_DURATION_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];
