/** instrumentLimiter: OpenTelemetry metrics of a RateLimiter's decisions and circuit breaker. */
/**
 * Recorded through the user's meter.
 */
import type { Decision } from '../core/decision.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import type { RateLimiter } from '../limiter/rate-limiter.js';
import { assertKnownOptions } from '../core/validate.js';
import { ATTR, METRIC } from './names.js';
import type { OtelAttributes, OtelMeter, OtelObservableCallback, OtelObservableResult } from './otel-types.js';

/** Options of {@link instrumentLimiter}. */
export interface LimiterInstrumentOptions {
  /** The meter to record with (`metrics.getMeter('floodgate')`). */
  readonly meter: OtelMeter;
  /** The `floodgate.limiter` attribute; default the limiter's prefix. */
  readonly name?: string;
}

const OPTION_NAMES: readonly string[] = ['meter', 'name'];

/** The outcome attribute of a decision: `shadow_limited` for a shadow limiter's would-be refusal, `error` when the call rejected. */
type Outcome = 'allowed' | 'limited' | 'shadow_limited' | 'error';

/**
 * Records `limiter`'s decisions in `floodgate.decisions` (attributes
 * `floodgate.limiter`, `floodgate.outcome`: allowed, limited, shadow_limited
 * (a `shadow` limiter's consume the policy would have refused) or error, and
 * `floodgate.decision.source`) and its circuit breaker in
 * `floodgate.breaker.state` (1 while open, else 0). Counts every
 * `consume` and `consumeNow` that decided; peeks, rewards and penalties are
 * not decisions. For store call spans and durations, wrap the store in an
 * {@link InstrumentedStore} too.
 *
 * The limiter is instrumented in place (its `consume` and `consumeNow`);
 * call the returned function to undo it.
 *
 * @throws FloodgateError INVALID_OPTIONS without a meter; UNKNOWN_OPTION for an unknown option
 */
export function instrumentLimiter(limiter: RateLimiter, options: LimiterInstrumentOptions): () => void {
  assertKnownOptions(options, OPTION_NAMES, 'instrumentLimiter');
  const { meter } = options;
  if (typeof meter?.createCounter !== 'function')
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, 'instrumentLimiter needs a meter, e.g. { meter: metrics.getMeter("floodgate") }.');
  const name = options.name ?? limiter.prefix;
  const decisions = meter.createCounter(METRIC.decisions, {
    description: 'Rate-limit decisions by outcome and source.',
    unit: '{decision}',
  });
  // One attribute object per outcome and source, made on first use: the hot path allocates none.
  const cache = new Map<string, OtelAttributes>();
  const attributesOf = (outcome: Outcome, source: string | undefined): OtelAttributes => {
    const id = `${outcome}\0${source ?? ''}`;
    let attributes = cache.get(id);
    if (attributes === undefined) {
      attributes = { [ATTR.limiter]: name, [ATTR.outcome]: outcome };
      if (source !== undefined) attributes[ATTR.source] = source;
      cache.set(id, attributes);
    }
    return attributes;
  };
  const count = (decision: Decision): Decision => {
    const outcome = decision.shadowLimited === true ? 'shadow_limited' : decision.allowed ? 'allowed' : 'limited';
    decisions.add(1, attributesOf(outcome, decision.source));
    return decision;
  };
  const failed = (error: unknown): never => {
    decisions.add(1, attributesOf('error', undefined));
    throw error;
  };

  const own = limiter as unknown as Record<string, unknown>;
  const hadOwn = { consume: Object.hasOwn(own, 'consume'), consumeNow: Object.hasOwn(own, 'consumeNow') };
  const consume = limiter.consume;
  const consumeNow = limiter.consumeNow;
  // consume tries consumeNow first internally (not through this property), so a decision is counted once.
  limiter.consume = function (this: RateLimiter, ...args: Parameters<RateLimiter['consume']>) {
    return consume.apply(this, args).then(count, failed);
  };
  limiter.consumeNow = function (this: RateLimiter, ...args: Parameters<RateLimiter['consumeNow']>) {
    let decision: Decision | undefined;
    try {
      decision = consumeNow.apply(this, args);
    } catch (error) {
      return failed(error);
    }
    return decision === undefined ? undefined : count(decision);
  };

  const breaker = meter.createObservableGauge(METRIC.breakerState, {
    description: "1 while the limiter's circuit breaker keeps calls away from the store (open, or half-open with its probe out), else 0.",
    unit: '1',
  });
  const breakerAttributes = { [ATTR.limiter]: name };
  const observe: OtelObservableCallback = (result: OtelObservableResult) => {
    result.observe(limiter.circuitOpen() ? 1 : 0, breakerAttributes);
  };
  breaker.addCallback(observe);

  return () => {
    breaker.removeCallback(observe);
    if (hadOwn.consume) limiter.consume = consume;
    else delete own.consume;
    if (hadOwn.consumeNow) limiter.consumeNow = consumeNow;
    else delete own.consumeNow;
  };
}
