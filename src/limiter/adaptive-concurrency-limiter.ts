/** AdaptiveConcurrencyLimiter: in-flight calls to one upstream, bounded by a limit that follows their latency and errors. */
import { systemClock, type Clock } from '../core/clock.js';
import { ErrorCode } from '../core/errors.js';
import { assertKnownOptions, invalid, optionalBoolean, optionalFunction } from '../core/validate.js';
import { AdaptiveController, type AdaptiveControllerOptions, type AdaptiveStats } from './adaptive-controller.js';
import { parseAdaptiveOptions } from './adaptive-options.js';

/** Options of {@link AdaptiveConcurrencyLimiter}: the controller's (see {@link AdaptiveControllerOptions}) and a clock. */
export interface AdaptiveConcurrencyLimiterOptions extends AdaptiveControllerOptions {
  /** Where time comes from (ms). Default: wall time. Pass a `ManualClock`'s `now` to drive it in tests or simulations. */
  clock?: Clock;
  /** Numbers in [0, 1) for the probes' jitter. Default Math.random; a seeded generator makes a simulation repeatable. */
  random?: () => number;
}

/** How an admitted call ended, given to {@link AdaptiveSlot.release}. */
export interface AdaptiveOutcome {
  /**
   * How long the upstream took, in ms. Default: the clock's time since `acquire`, read as at least 1 ms (a millisecond clock
   * cannot tell a 0.2 ms call from a 0.9 ms one: pass a `performance.now()` difference for upstreams that fast).
   */
  latencyMs?: number;
  /** True when the call failed from overload (a 503, a timeout, a reset): the limit goes down and its latency is not used. */
  error?: boolean;
}

/** What {@link AdaptiveConcurrencyLimiter.acquire} returns: the decision, and the handle that ends the call when admitted. */
export interface AdaptiveSlot {
  /** Whether the caller may go ahead. When false, do not call the upstream (answer 503 or shed the work). */
  readonly allowed: boolean;
  /** The limit at the time of the call. */
  readonly limit: number;
  /** Calls in flight after the call, this one included when admitted. */
  readonly inFlight: number;
  /**
   * Ends the call with its outcome: a latency sample, or with `error: true` an overload signal. Returns true when this call
   * freed the slot; false when there was nothing to free (refused, or already ended). Safe to call more than once.
   */
  release(outcome?: AdaptiveOutcome): boolean;
  /** Ends the call as dropped (abandoned, timed out by the caller): an overload signal, as `release({ error: true })`. */
  drop(): boolean;
  /** Ends a call that never reached the upstream (for example a shared ConcurrencyLimiter refused it): neither a sample nor an overload. */
  cancel(): boolean;
}

const OWNER = 'AdaptiveConcurrencyLimiter';

/**
 * At most `limit` calls in flight to one upstream from this process, where `limit` moves by itself: up while latency stays near
 * the upstream's no-load latency, down in proportion when latency grows (the upstream is queueing), down by `backoffRatio` when
 * calls fail or are dropped. Synchronous, no store: `acquire` never waits and never fails.
 *
 * ```ts
 * const adaptive = new AdaptiveConcurrencyLimiter({ maxLimit: 200 });
 * const slot = adaptive.acquire();
 * if (!slot.allowed) return reply(503);
 * try { const res = await upstream(); slot.release({ error: res.status >= 500 }); return res; }
 * catch (e) { slot.drop(); throw e; }
 * ```
 *
 * Several processes in front of one upstream: each runs its own adaptive limit (each sees the latency its calls get, so
 * together they back off when the upstream queues). To also cap the total across processes, acquire a slot of a
 * `ConcurrencyLimiter` on a shared store (Redis) after the adaptive one, and `cancel()` the adaptive slot when the
 * shared ceiling refuses: the local limit refuses first without a store round trip, the shared one bounds the sum.
 */
export class AdaptiveConcurrencyLimiter {
  private readonly clock: Clock;
  private readonly controller: AdaptiveController;

  /**
   * @param options - see {@link AdaptiveConcurrencyLimiterOptions}; every option has a default
   * @throws FloodgateError UNKNOWN_OPTION, INVALID_OPTIONS, INVALID_LIMIT, INVALID_DURATION or CONFLICTING_OPTIONS on a bad option
   */
  constructor(options: AdaptiveConcurrencyLimiterOptions = {}) {
    parseAdaptiveOptions(options, OWNER, ['clock', 'random']);
    const { clock, random, ...controllerOptions } = options;
    this.clock = optionalFunction(clock, `${OWNER} clock`) ?? systemClock;
    this.controller = new AdaptiveController(controllerOptions, this.clock(), optionalFunction(random, `${OWNER} random`));
  }

  /** In-flight calls allowed now. */
  get limit(): number {
    return this.controller.limit;
  }

  /** The controller's numbers (limit, latencies, in flight, decision counts), for metrics; see {@link AdaptiveStats}. */
  stats(): AdaptiveStats {
    return this.controller.stats();
  }

  /** Takes a slot when fewer than `limit` calls are in flight; otherwise a refused slot (`allowed: false`). Never waits. */
  acquire(): AdaptiveSlot {
    const admittedAt = this.clock();
    const allowed = this.controller.tryAdmit(admittedAt);
    return openSlot(this.controller, this.clock, allowed, admittedAt);
  }
}

/**
 * The slot of one call the controller decided about at `admittedAt`: ending it (once) completes the call on the controller,
 * then runs `ended` (the overload limiter admits its next waiter there). Shared by every limiter built on the controller.
 */
export function openSlot(
  controller: AdaptiveController,
  clock: Clock,
  allowed: boolean,
  admittedAt: number,
  ended?: () => void,
): AdaptiveSlot {
  const limit = controller.limit;
  const inFlight = controller.inFlight;
  let open = allowed;
  const end = (finish: (now: number) => void): boolean => {
    if (!open) return false;
    open = false;
    finish(clock());
    ended?.();
    return true;
  };
  return {
    allowed,
    limit,
    inFlight,
    release(outcome?: AdaptiveOutcome): boolean {
      const { latencyMs, error } = checkOutcome(outcome);
      return end((now) => {
        if (error === true) controller.overloaded(now);
        else controller.succeeded(now, admittedAt, latencyMs ?? Math.max(1, now - admittedAt));
      });
    },
    drop: () => end((now) => controller.overloaded(now)),
    cancel: () => end((now) => controller.cancelled(now)),
  };
}

/** The outcome's fields checked: INVALID_OPTIONS for a latency that is not a finite number ≥ 0 or an error that is not a boolean. */
function checkOutcome(outcome: AdaptiveOutcome | undefined): AdaptiveOutcome {
  if (outcome === undefined) return {};
  assertKnownOptions(outcome, ['latencyMs', 'error'], `${OWNER} release`);
  const { latencyMs } = outcome;
  if (latencyMs !== undefined && (typeof latencyMs !== 'number' || !Number.isFinite(latencyMs) || latencyMs < 0)) {
    invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} release latencyMs`, 'a finite number of ms, 0 or more', latencyMs);
  }
  return { latencyMs, error: optionalBoolean(outcome.error, `${OWNER} release error`) };
}
