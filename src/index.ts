/** Public surface of the floodgate core: no Redis client, no node:cluster, no HTTP code is loaded from here. */
export { RateLimiter } from './limiter/rate-limiter.js';
export type {
  RateLimiterOptions,
  InMemoryBlockOptions,
  BreakerConfig,
  StoreFailureMode,
  WaitOptions,
  WaitCallOptions,
} from './limiter/options.js';
export type { Decision, DecisionSource } from './core/decision.js';
export type { KeyInspection } from './limiter/admin.js';
export type { LimiterHealth, BreakerState } from './limiter/health.js';
export { ConcurrencyLimiter } from './limiter/concurrency-limiter.js';
export type { ConcurrencyLimiterOptions, Slot } from './limiter/concurrency-limiter.js';
export { AdaptiveConcurrencyLimiter } from './limiter/adaptive-concurrency-limiter.js';
export type { AdaptiveConcurrencyLimiterOptions, AdaptiveOutcome, AdaptiveSlot } from './limiter/adaptive-concurrency-limiter.js';
export { AdaptiveController } from './limiter/adaptive-controller.js';
export { OverloadLimiter } from './limiter/overload-limiter.js';
export type {
  OverloadLimiterOptions,
  OverloadQueueOptions,
  OverloadRefusal,
  OverloadRequest,
  OverloadSlot,
  OverloadStats,
} from './limiter/overload-limiter.js';
export type { AdaptiveControllerOptions, AdaptivePhase, AdaptiveStats } from './limiter/adaptive-controller.js';
export type { SlotAcquisition, SlotStore } from './core/slots.js';
export { consumeAll, consumeAllNow, MAX_PARTS } from './limiter/composite.js';
export { Reservation } from './limiter/reservation.js';
export { PolicyOverrides, checkOverride, overridePolicy } from './limiter/overrides.js';
export { parseBucket } from './limiter/options.js';
export type { PolicyOverride, OverrideLookup, OverrideMatch } from './limiter/overrides.js';
export type { ReserveOptions, Settlement, SettlementStatus } from './limiter/reservation.js';
export type { LimitPart, CompositeDecision } from './limiter/composite.js';
export { FloodgateError, ErrorCode, isFloodgateError, isStoreFailure } from './core/errors.js';
export type { ErrorCodeValue } from './core/errors.js';
export { WarningCode } from './core/warnings.js';
export type { WarningCodeValue } from './core/warnings.js';
export { CALENDAR_UNITS, periodBounds } from './core/calendar.js';
export type { CalendarPeriod, CalendarUnit, PeriodBounds } from './core/calendar.js';
export { calendarLabel, longestPeriodMs, parseCalendarWindow } from './core/calendar-window.js';
export type { CalendarWindow, CalendarSpec } from './core/calendar-window.js';
export { parseDuration } from './core/duration.js';
export type { Duration } from './core/duration.js';
export { ManualClock, systemClock } from './core/clock.js';
export type { Clock } from './core/clock.js';
export { MemoryStore } from './stores/memory.js';
export type { MemoryStoreOptions, OnFull } from './stores/memory.js';
export { checkSnapshot, decodeSnapshot, encodeSnapshot } from './stores/memory-snapshot.js';
export type { MemorySnapshot, SnapshotEntry, SnapshotSketch, StateShape } from './stores/memory-snapshot.js';
export type { Store } from './stores/store.js';
export { isStore } from './stores/store.js';
export { ALGORITHMS, BLOCK_FOREVER, OP_CODE } from './core/policy.js';
export type { Algorithm, Policy, Operation, OperationKind, Outcome } from './core/policy.js';
export { applyOperation } from './algorithms/index.js';
export { applyComposite } from './algorithms/composite.js';
export type { CompositePart, CompositeApplied } from './algorithms/composite.js';
export type { KeyState, Applied } from './algorithms/index.js';
export { InstrumentedStore } from './telemetry/instrumented-store.js';
export type { InstrumentOptions } from './telemetry/instrumented-store.js';
export { instrumentLimiter } from './telemetry/instrument-limiter.js';
export type { LimiterInstrumentOptions } from './telemetry/instrument-limiter.js';
export { ATTR, METRIC, SPAN } from './telemetry/names.js';
export type {
  OtelMeter,
  OtelTracer,
  OtelSpan,
  OtelCounter,
  OtelHistogram,
  OtelObservable,
  OtelObservableResult,
  OtelAttributes,
  OtelInstrumentOptions,
} from './telemetry/otel-types.js';
