/** InstrumentedStore: a Store wrapper that records OpenTelemetry spans and metrics around store calls. */
/**
 * It uses the user's tracer and meter.
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ErrorCode, FloodgateError, isFloodgateError } from '../core/errors.js';
import type { Operation, Outcome } from '../core/policy.js';
import type { SlotAcquisition } from '../core/slots.js';
import type { Store } from '../stores/store.js';
import { assertKnownOptions } from '../core/validate.js';
import { ATTR, METRIC, SPAN, STORE_DURATION_BUCKETS } from './names.js';
import {
  SPAN_STATUS_ERROR,
  type OtelAttributes,
  type OtelCounter,
  type OtelHistogram,
  type OtelMeter,
  type OtelSpan,
  type OtelTracer,
} from './otel-types.js';

/** Options of {@link InstrumentedStore}. Give a tracer, a meter, or both; with neither the wrapper only forwards. */
export interface InstrumentOptions {
  /** Spans around each asynchronous store call (`trace.getTracer('floodgate')`). */
  readonly tracer?: OtelTracer;
  /** `floodgate.store.duration` and `floodgate.store.sync_answers` (`metrics.getMeter('floodgate')`). */
  readonly meter?: OtelMeter;
  /**
   * Whether spans carry the key: `false` (the default) records none, since
   * keys are often user ids, IP addresses or API keys; `'sha256'` records
   * `floodgate.key.hash`, a salted SHA-256 of the store key (16 hex digits),
   * enough to tell one key's calls from another's.
   */
  readonly recordKey?: false | 'sha256';
  /** Salt of the key hash, so the hashes of guessable keys (IP addresses) cannot be looked up; default none. */
  readonly keySalt?: string;
}

const OPTION_NAMES: readonly string[] = ['tracer', 'meter', 'recordKey', 'keySalt'];

/**
 * Wraps a {@link Store} so each call to it is traced and timed through
 * `@opentelemetry/api` objects the caller passes in (floodgate itself does
 * not depend on the package). Asynchronous calls get a span
 * (`floodgate.store.apply`, `…consume_all`, `…acquire_slot`,
 * `…release_slot`, `…renew_slot`) and a `floodgate.store.duration`
 * measurement; a failed call sets the span's status to error with the
 * FloodgateError code in `error.type`. Synchronous answers (`applyNow`,
 * `consumeAllNow`, `settleNow`) are only counted in
 * `floodgate.store.sync_answers`: a span would cost more than the answer.
 *
 * The wrapper has exactly the optional capabilities of the store it wraps.
 * Names and attributes: docs/telemetry.md.
 */
export class InstrumentedStore implements Store {
  /** The wrapped store's name. */
  readonly name: string;
  // Declared, not fields: a limiter tests for the methods' presence, so an absent one must stay absent.
  declare applyNow?: (operation: Operation) => Outcome | undefined;
  declare failureScope?: (key: string) => string | undefined;
  declare settleNow?: (operation: Operation) => Outcome | undefined;
  declare consumeAll?: (operations: readonly Operation[]) => Promise<Outcome[]>;
  declare consumeAllNow?: (operations: readonly Operation[]) => Outcome[] | undefined;
  declare acquireSlot?: (key: string, limit: number, owner: string, ttlMs: number) => Promise<SlotAcquisition>;
  declare releaseSlot?: (key: string, owner: string) => Promise<boolean>;
  declare renewSlot?: (key: string, owner: string, ttlMs: number) => Promise<boolean>;
  private readonly tracer: OtelTracer | undefined;
  private readonly duration: OtelHistogram | undefined;
  private readonly syncAnswers: OtelCounter | undefined;
  private readonly hashKey: ((key: string) => string) | undefined;
  /** Metric attributes per operation and result, made once: the hot path allocates none. */
  private readonly metricAttrs = new Map<string, OtelAttributes>();

  /**
   * @param inner - the store to wrap
   * @param options - the tracer and meter to record with, see {@link InstrumentOptions}
   * @throws FloodgateError UNKNOWN_OPTION for an unknown option; INVALID_OPTIONS for a `recordKey` other than false or 'sha256', or a non-string `keySalt`
   */
  constructor(
    private readonly inner: Store,
    options: InstrumentOptions = {},
  ) {
    assertKnownOptions(options, OPTION_NAMES, 'InstrumentedStore');
    this.name = inner.name;
    this.tracer = options.tracer;
    const meter = options.meter;
    this.duration = meter?.createHistogram(METRIC.storeDuration, {
      description: 'Time the store took to answer one call.',
      unit: 's',
      advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
    });
    this.syncAnswers = meter?.createCounter(METRIC.storeSyncAnswers, {
      description:
        'Store calls answered synchronously in this process (memory store, local-first leases); not in floodgate.store.duration.',
      unit: '{operation}',
    });
    this.hashKey = keyHasher(options.recordKey, options.keySalt);
    const storeAttr = { [ATTR.store]: inner.name };
    const counted = <A extends unknown[], R>(call: (...args: A) => R | undefined): ((...args: A) => R | undefined) => {
      const counter = this.syncAnswers;
      if (counter === undefined) return call;
      return (...args) => {
        const result = call(...args);
        if (result !== undefined) counter.add(1, storeAttr);
        return result;
      };
    };
    if (inner.applyNow !== undefined) this.applyNow = counted((op: Operation) => inner.applyNow!(op));
    if (inner.settleNow !== undefined) this.settleNow = counted((op: Operation) => inner.settleNow!(op));
    if (inner.failureScope !== undefined) this.failureScope = (key) => inner.failureScope!(key);
    if (inner.consumeAllNow !== undefined) this.consumeAllNow = counted((ops: readonly Operation[]) => inner.consumeAllNow!(ops));
    if (inner.consumeAll !== undefined) {
      this.consumeAll = (ops) =>
        this.traced(
          SPAN.consumeAll,
          'consume_all',
          () => compositeAttributes(ops, this.hashKey),
          () => inner.consumeAll!(ops),
          allAllowed,
        );
    }
    if (inner.acquireSlot !== undefined && inner.releaseSlot !== undefined && inner.renewSlot !== undefined) {
      this.acquireSlot = (key, limit, owner, ttlMs) =>
        this.traced(
          SPAN.acquireSlot,
          'acquire_slot',
          () => this.keyAttributes(key),
          () => inner.acquireSlot!(key, limit, owner, ttlMs),
          (a) => a.admitted,
        );
      this.releaseSlot = (key, owner) =>
        this.traced(
          SPAN.releaseSlot,
          'release_slot',
          () => this.keyAttributes(key),
          () => inner.releaseSlot!(key, owner),
          undefined,
        );
      this.renewSlot = (key, owner, ttlMs) =>
        this.traced(
          SPAN.renewSlot,
          'renew_slot',
          () => this.keyAttributes(key),
          () => inner.renewSlot!(key, owner, ttlMs),
          undefined,
        );
    }
  }

  /** Applies `operation` on the wrapped store, in a `floodgate.store.apply` span. */
  apply(operation: Operation): Promise<Outcome> {
    return this.traced(
      SPAN.apply,
      operation.kind,
      () => ({ ...this.keyAttributes(operation.key), [ATTR.algorithm]: operation.policy.algorithm }),
      () => this.inner.apply(operation),
      (o) => o.allowed,
    );
  }

  /** Closes the wrapped store. */
  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }

  private keyAttributes(key: string): OtelAttributes {
    return this.hashKey === undefined ? {} : { [ATTR.keyHash]: this.hashKey(key) };
  }

  /**
   * Runs `call` in a span named `name` and times it; `allowed` reads the
   * admission from a result, when it has one. `attributes` is called only
   * with a tracer: without one, no key is hashed and nothing allocated.
   */
  private traced<T>(
    name: string,
    operation: string,
    attributes: () => OtelAttributes,
    call: () => Promise<T>,
    allowed: ((result: T) => boolean) | undefined,
  ): Promise<T> {
    let span: OtelSpan | undefined;
    if (this.tracer !== undefined) {
      const all = attributes();
      all[ATTR.store] = this.name;
      all[ATTR.operation] = operation;
      span = this.tracer.startSpan(name, { attributes: all });
    }
    const started = this.duration === undefined ? 0 : performance.now();
    let pending: Promise<T>;
    try {
      pending = call();
    } catch (error) {
      // A store should reject, not throw; either way the span ends and the caller sees the same error.
      pending = Promise.reject(error);
    }
    return pending.then(
      (result) => {
        this.duration?.record((performance.now() - started) / 1000, this.metricAttributes(operation, 'ok'));
        if (span !== undefined) {
          if (allowed !== undefined) span.setAttribute(ATTR.allowed, allowed(result));
          span.end();
        }
        return result;
      },
      (error: unknown) => {
        const code = isFloodgateError(error) ? error.code : 'unknown';
        this.duration?.record((performance.now() - started) / 1000, this.metricAttributes(operation, 'error', code));
        if (span !== undefined) {
          span.setAttribute(ATTR.errorType, code);
          span.recordException(error instanceof Error ? error : String(error));
          span.setStatus({ code: SPAN_STATUS_ERROR, message: error instanceof Error ? error.message : String(error) });
          span.end();
        }
        throw error;
      },
    );
  }

  private metricAttributes(operation: string, result: 'ok' | 'error', code?: string): OtelAttributes {
    const id = `${operation}\0${result}\0${code ?? ''}`;
    let attributes = this.metricAttrs.get(id);
    if (attributes === undefined) {
      attributes = { [ATTR.store]: this.name, [ATTR.operation]: operation, [ATTR.result]: result };
      if (code !== undefined) attributes[ATTR.errorType] = code;
      this.metricAttrs.set(id, attributes);
    }
    return attributes;
  }
}

function allAllowed(outcomes: readonly Outcome[]): boolean {
  return outcomes.every((o) => o.allowed);
}

function compositeAttributes(ops: readonly Operation[], hashKey: ((key: string) => string) | undefined): OtelAttributes {
  const attributes: OtelAttributes = { [ATTR.parts]: ops.length };
  const algorithm = ops[0]?.policy.algorithm;
  if (algorithm !== undefined && ops.every((o) => o.policy.algorithm === algorithm)) attributes[ATTR.algorithm] = algorithm;
  // One hash for the set of keys: a composite's parts are one request's keys.
  if (hashKey !== undefined) attributes[ATTR.keyHash] = hashKey(ops.map((o) => o.key).join('\0'));
  return attributes;
}

function keyHasher(mode: unknown, salt: unknown): ((key: string) => string) | undefined {
  if (mode === undefined || mode === false) return undefined;
  if (mode !== 'sha256') throw invalid(`recordKey must be false or 'sha256', got ${JSON.stringify(mode)}`);
  if (salt !== undefined && typeof salt !== 'string') throw invalid('keySalt must be a string');
  const prefix = salt ?? '';
  return (key) =>
    createHash('sha256')
      .update(prefix + key)
      .digest('hex')
      .slice(0, 16);
}

function invalid(message: string): Error {
  return new FloodgateError(ErrorCode.INVALID_OPTIONS, `InstrumentedStore: ${message}.`);
}
