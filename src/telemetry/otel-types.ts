/** The few shapes of `@opentelemetry/api` floodgate speaks, declared structurally. */
/**
 * So the library never imports the package.
 */

/** An attribute value (the scalar subset of OTel's AttributeValue). */
type OtelAttributeValue = string | number | boolean;

/** Attributes of a measurement or a span. */
export type OtelAttributes = Record<string, OtelAttributeValue | undefined>;

/** Options of an instrument: what `Meter.createCounter` and friends take. */
export interface OtelInstrumentOptions {
  /** Human-readable description. */
  description?: string;
  /** UCUM unit, e.g. `s` or `{decision}`. */
  unit?: string;
  /** Hints for the SDK's default aggregation, e.g. histogram buckets. */
  advice?: { explicitBucketBoundaries?: number[] };
}

/** A synchronous counter. */
export interface OtelCounter {
  /** Adds a non-negative `value`. */
  add(value: number, attributes?: OtelAttributes): void;
}

/** A synchronous histogram. */
export interface OtelHistogram {
  /** Records one value. */
  record(value: number, attributes?: OtelAttributes): void;
}

/** What an observable instrument's callback reports into. */
export interface OtelObservableResult {
  /** Reports the current value of one series. */
  observe(value: number, attributes?: OtelAttributes): void;
}

/** The callback of an observable instrument, called at each collection. */
export type OtelObservableCallback = (result: OtelObservableResult) => void | Promise<void>;

/** An observable (asynchronous) instrument. */
export interface OtelObservable {
  /** Registers a callback the SDK calls at each collection. */
  addCallback(callback: OtelObservableCallback): void;
  /** Unregisters a callback. */
  removeCallback(callback: OtelObservableCallback): void;
}

/** An OTel `Meter` (from `metrics.getMeter(...)` or a MeterProvider). */
export interface OtelMeter {
  /** Creates a monotonic counter. */
  createCounter(name: string, options?: OtelInstrumentOptions): OtelCounter;
  /** Creates a histogram. */
  createHistogram(name: string, options?: OtelInstrumentOptions): OtelHistogram;
  /** Creates an observable gauge. */
  createObservableGauge(name: string, options?: OtelInstrumentOptions): OtelObservable;
  /** Creates an observable monotonic counter. */
  createObservableCounter(name: string, options?: OtelInstrumentOptions): OtelObservable;
  /** Creates an observable up-down counter. */
  createObservableUpDownCounter(name: string, options?: OtelInstrumentOptions): OtelObservable;
}

/** A span's status: `code` is OTel's SpanStatusCode (0 unset, 1 ok, 2 error). */
interface OtelSpanStatus {
  /** The SpanStatusCode. */
  code: number;
  /** Why, for an error. */
  message?: string;
}

/** An OTel `Span`. */
export interface OtelSpan {
  /** Sets one attribute. */
  setAttribute(key: string, value: OtelAttributeValue): unknown;
  /** Sets the status. */
  setStatus(status: OtelSpanStatus): unknown;
  /** Records an exception event. */
  recordException(exception: Error | string): void;
  /** Ends the span. */
  end(): void;
}

/** An OTel `Tracer` (from `trace.getTracer(...)` or a TracerProvider). */
export interface OtelTracer {
  /** Starts a span, a child of the active context's span when there is one. */
  startSpan(name: string, options?: { attributes?: OtelAttributes }): OtelSpan;
}

/** SpanStatusCode.ERROR of `@opentelemetry/api`. */
export const SPAN_STATUS_ERROR = 2;
