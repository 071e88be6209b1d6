/** Public surface of the floodgate core: no Redis client, no node:cluster, no HTTP code is loaded from here. */
export { RateLimiter } from './limiter.js';
export type {
  RateLimiterOptions,
  InMemoryBlockOptions,
  BreakerConfig,
  StoreFailureMode,
  WaitOptions,
  WaitCallOptions,
} from './limiter-options.js';
export type { Decision, DecisionSource } from './decision.js';
export type { KeyInspection } from './limiter-admin.js';
export { ConcurrencyLimiter } from './concurrency-limiter.js';
export type { ConcurrencyLimiterOptions, Slot } from './concurrency-limiter.js';
export type { SlotAcquisition, SlotStore } from './slots.js';
export { consumeAll, consumeAllNow, MAX_PARTS } from './composite.js';
export { Reservation } from './reservation.js';
export { PolicyOverrides } from './overrides.js';
export type { PolicyOverride, OverrideLookup, OverrideMatch } from './overrides.js';
export type { ReserveOptions, Settlement, SettlementStatus } from './reservation.js';
export type { LimitPart, CompositeDecision } from './composite.js';
export { FloodgateError, ErrorCode, isFloodgateError, isStoreFailure } from './errors.js';
export type { ErrorCodeValue } from './errors.js';
export { WarningCode } from './warnings.js';
export type { WarningCodeValue } from './warnings.js';
export { CALENDAR_UNITS, periodBounds } from './calendar.js';
export type { CalendarPeriod, CalendarUnit, PeriodBounds } from './calendar.js';
export type { CalendarWindow, CalendarSpec } from './calendar-window.js';
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
export { applyComposite } from './algorithms/composite.js';
export type { CompositePart, CompositeApplied } from './algorithms/composite.js';
export type { KeyState, Applied } from './algorithms/index.js';
export { InstrumentedStore } from './telemetry/instrumented-store.js';
export type { InstrumentOptions } from './telemetry/instrumented-store.js';
export { instrumentLimiter } from './telemetry/instrument-limiter.js';
export type { LimiterInstrumentOptions } from './telemetry/instrument-limiter.js';
export type {
  OtelMeter,
  OtelTracer,
  OtelSpan,
  OtelCounter,
  OtelHistogram,
  OtelObservable,
  OtelAttributes,
  OtelInstrumentOptions,
} from './telemetry/otel-types.js';
