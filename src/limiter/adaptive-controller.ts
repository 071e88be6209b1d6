/** AdaptiveController: a limit on in-flight work that follows measured latency and errors; pure, time passed in. */
/**
 * The design, and why this one. Three published controllers were weighed:
 *
 * - Netflix concurrency-limits' Gradient2 compares a short-term latency average with a long-term one. It reacts to latency
 *   *changing*, not to its level: under steady overload both averages hold the same queueing delay, the gradient reads 1 and
 *   the limit keeps climbing by its queue size until something moves. An upstream that queues politely beyond its workers
 *   (latency = base × in-flight / workers) is exactly that case.
 * - Vegas and AIMD: AIMD needs a loss signal (errors, timeouts) and learns nothing from latency, so it lets the upstream's queue
 *   fill up to the timeout; Vegas needs the no-load latency as a minimum, and a minimum seen only while loaded drifts upward.
 * - Envoy's adaptive concurrency filter measures the no-load latency (minRTT) on purpose: now and then it drops the limit to a
 *   few calls until it has a batch of samples, takes their median, then goes back. Between those probes,
 *   limit ← limit × (minRTT + buffer) / sampleRTT + headroom, the gradient clamped to [0.5, 2].
 *
 * This is Envoy's gradient with its periodic no-load probe, smoothed as Gradient2 smooths (so one noisy window moves the
 * limit a fraction of the way; 0.5 by default, between Envoy's none and Gradient2's 0.2), plus an AIMD fallback: a window that saw an error or a drop multiplies the limit by
 * `backoffRatio` and ignores its latency, since an upstream that fails fast under overload shows no queueing delay.
 * At a steady overload the limit settles where limit = limit × target / latency + queueSize; with latency growing as
 * in-flight / capacity past capacity that is capacity × tolerance + queueSize: just enough queue to keep every worker busy.
 *
 * The no-load latency comes from probes only. Lowering it whenever a window's mean came in under it looked free, but with
 * noisy latency the lowest of many window means sits well under the true mean, the target sinks below what an idle upstream
 * answers in, and the limit shrinks to queueSize / (1 − target / latency): a tenth of capacity in the simulation.
 *
 * Nothing here reads a clock or sets a timer: every call takes `now`, windows close on the first call after their end, so a
 * run is a function of its calls and a ManualClock drives it in tests.
 */
import { ErrorCode } from '../core/errors.js';
import { invalid } from '../core/validate.js';
import { parseAdaptiveOptions, type AdaptiveControllerOptions, type AdaptiveSettings } from './adaptive-options.js';

export type { AdaptiveControllerOptions } from './adaptive-options.js';

/** The smallest latency the gradient divides by (ms): a 0 ms sample from a millisecond clock must not read as infinite headroom. */
const MIN_LATENCY_MS = 1e-3;

/** What the controller is doing: measuring the no-load latency at `probeLimit`, or following latency. */
export type AdaptivePhase = 'probe' | 'steady';

/** A snapshot of the controller's numbers, for metrics and health pages. docs/overload.md says how to read them. */
export interface AdaptiveStats {
  /** In-flight work allowed now (`probeLimit` during a probe). */
  readonly limit: number;
  /** Calls admitted and not yet completed. */
  readonly inFlight: number;
  /** Measuring the no-load latency (`probe`) or following latency (`steady`). */
  readonly phase: AdaptivePhase;
  /** The no-load latency estimate in ms: the median of the last probe that measured any; undefined before the first. */
  readonly noLoadLatencyMs: number | undefined;
  /** The latency aimed at in ms: noLoad × tolerance; undefined before the first probe ends. */
  readonly targetLatencyMs: number | undefined;
  /** The mean latency of the last window that moved the limit, in ms; undefined before the first. */
  readonly sampleLatencyMs: number | undefined;
  /** Calls admitted since the start. */
  readonly admitted: number;
  /** Calls refused because `limit` were in flight. */
  readonly refused: number;
  /** Windows that raised the (whole-number) limit. */
  readonly raised: number;
  /** Windows that lowered it, for latency or for errors and drops. */
  readonly lowered: number;
  /** Completions reported as errors or drops (overload signals). */
  readonly overloads: number;
  /** No-load probes started, the first one included. */
  readonly probes: number;
}

/**
 * The adaptive concurrency controller: admits calls while fewer than `limit` are in flight, and moves `limit` after each sample
 * window by the ratio of the target latency to the window's mean latency. See the design note at the top of this file.
 *
 * Most code wants `AdaptiveConcurrencyLimiter`, which wraps this with a clock and per-call slots; use the controller directly
 * to drive it from a simulation or from a proxy's own bookkeeping. Each admitted call must be completed exactly once, by
 * {@link succeeded}, {@link overloaded} or {@link cancelled}.
 */
export class AdaptiveController {
  private readonly settings: AdaptiveSettings;
  private estimate: number;
  private phase: AdaptivePhase = 'probe';
  private probeStartedAt: number;
  private probeLatencies: number[] = [];
  /** The limit to return to when a probe ends; undefined during the first probe (then `initialLimit`). */
  private resumeAt: number | undefined;
  private nextProbeAt = Infinity;
  private noLoadMs: number | undefined;
  private lastSampleMs: number | undefined;
  private held = 0;
  private windowStart: number;
  private windowCount = 0;
  private windowSum = 0;
  private windowOverloads = 0;
  private windowPeak = 0;
  private counts = { admitted: 0, refused: 0, raised: 0, lowered: 0, overloads: 0, probes: 1 };

  /**
   * @param options - see {@link AdaptiveControllerOptions}; every one has a default
   * @param now - the time of construction in ms, on the clock every later call's `now` is read from (the first probe starts
   *   then; no default, since a 0 against wall-clock calls would time that probe out at its first sample)
   * @param random - a number in [0, 1) per call, for the probes' jitter (`probeJitter`); default Math.random, a seeded
   *   generator makes a simulation repeatable
   * @throws FloodgateError on a bad option (see parseAdaptiveOptions)
   */
  constructor(
    options: AdaptiveControllerOptions,
    now: number,
    private readonly random: () => number = Math.random,
  ) {
    this.settings = parseAdaptiveOptions(options, 'AdaptiveController');
    this.estimate = this.settings.initialLimit;
    this.probeStartedAt = now;
    this.windowStart = now;
  }

  /** In-flight work allowed now. */
  get limit(): number {
    return this.phase === 'probe' ? this.settings.probeLimit : Math.floor(this.estimate);
  }

  /** Calls admitted and not yet completed. */
  get inFlight(): number {
    return this.held;
  }

  /** A snapshot of the controller's numbers; see {@link AdaptiveStats}. */
  stats(): AdaptiveStats {
    const noLoad = this.noLoadMs;
    return {
      limit: this.limit,
      inFlight: this.held,
      phase: this.phase,
      noLoadLatencyMs: noLoad,
      targetLatencyMs: noLoad === undefined ? undefined : noLoad * this.settings.tolerance,
      sampleLatencyMs: this.lastSampleMs,
      ...this.counts,
    };
  }

  /**
   * Admits one call when fewer than `limit` are in flight (then it counts as in flight until completed).
   *
   * @param now - the current time in ms
   * @param countRefusal - false for a caller that only looks for room for a waiter it already counted (not a new refusal)
   * @returns true when admitted, false when refused
   */
  tryAdmit(now: number, countRefusal = true): boolean {
    this.advance(now);
    if (this.held >= this.limit) {
      if (countRefusal) this.counts.refused++;
      return false;
    }
    this.held++;
    this.counts.admitted++;
    if (this.held > this.windowPeak) this.windowPeak = this.held;
    return true;
  }

  /**
   * Completes an admitted call that succeeded and took `latencyMs`: a latency sample.
   *
   * @param now - the current time in ms
   * @param admittedAt - when the call was admitted: a probe only counts calls admitted during it, at the probe's limit
   * @param latencyMs - how long the upstream took, in ms (a finite number ≥ 0)
   * @throws FloodgateError INVALID_OPTIONS when `latencyMs` is not a finite number ≥ 0 (one NaN would poison every window after it)
   */
  succeeded(now: number, admittedAt: number, latencyMs: number): void {
    if (typeof latencyMs !== 'number' || !Number.isFinite(latencyMs) || latencyMs < 0) {
      invalid(ErrorCode.INVALID_OPTIONS, 'AdaptiveController latencyMs', 'a finite number of ms, 0 or more', latencyMs);
    }
    this.release();
    const latency = Math.max(MIN_LATENCY_MS, latencyMs);
    if (this.phase === 'probe') {
      if (admittedAt >= this.probeStartedAt) this.probeLatencies.push(latency);
      if (this.probeLatencies.length >= this.settings.probeSamples) this.endProbe(now);
      else this.advance(now);
      return;
    }
    this.windowCount++;
    this.windowSum += latency;
    this.advance(now);
  }

  /** Completes an admitted call that failed from overload (an error, a timeout, a drop): it lowers the limit, its latency is not used. */
  overloaded(now: number): void {
    this.release();
    this.counts.overloads++;
    if (this.phase === 'steady') this.windowOverloads++;
    this.advance(now);
  }

  /** Completes an admitted call that never reached the upstream (another limit refused it): no sample, no overload. */
  cancelled(now: number): void {
    this.release();
    this.advance(now);
  }

  private release(): void {
    if (this.held > 0) this.held--;
  }

  /** Ends a probe past its timeout, starts a due probe, or closes a window that is long enough and full enough. */
  private advance(now: number): void {
    if (this.phase === 'probe') {
      // Past its timeout a probe ends with the samples it has (one is enough), or with none when there is an estimate to keep:
      // a slow upstream must not spend half its time at probeLimit, nor calls that never end hold the probe for ever.
      const late = now - this.probeStartedAt >= this.settings.probeTimeoutMs;
      if (late && (this.probeLatencies.length > 0 || this.noLoadMs !== undefined)) this.endProbe(now);
      return;
    }
    if (now >= this.nextProbeAt) {
      this.startProbe(now);
      return;
    }
    const s = this.settings;
    if (now - this.windowStart < s.sampleWindowMs || this.windowCount + this.windowOverloads < s.minSamples) return;
    const before = Math.floor(this.estimate);
    if (this.windowOverloads > 0) {
      this.estimate *= s.backoffRatio;
    } else {
      this.follow(this.windowSum / this.windowCount);
    }
    this.estimate = Math.min(s.maxLimit, Math.max(s.minLimit, this.estimate));
    const after = Math.floor(this.estimate);
    if (after > before) this.counts.raised++;
    if (after < before) this.counts.lowered++;
    this.resetWindow(now);
  }

  /** One window's latency step: limit × target / latency + queueSize, smoothed; never raised while the caller uses under half of it. */
  private follow(sampleMs: number): void {
    const s = this.settings;
    this.lastSampleMs = sampleMs;
    const noLoad = this.noLoadMs ?? sampleMs;
    const gradient = Math.min(2, Math.max(0.5, (noLoad * s.tolerance) / sampleMs));
    const proposed = this.estimate * gradient + s.queueSize;
    // Raising a limit the traffic does not reach would only store up a burst for later (Gradient2 holds it the same way).
    if (proposed > this.estimate && this.windowPeak < this.limit / 2) return;
    this.estimate = (1 - s.smoothing) * this.estimate + s.smoothing * proposed;
  }

  private startProbe(now: number): void {
    this.phase = 'probe';
    this.resumeAt = this.estimate;
    this.probeStartedAt = now;
    this.probeLatencies = [];
    this.counts.probes++;
  }

  private endProbe(now: number): void {
    const sorted = this.probeLatencies.sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    if (sorted.length > 0) this.noLoadMs = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
    this.probeLatencies = [];
    this.phase = 'steady';
    this.estimate = this.resumeAt ?? this.settings.initialLimit;
    const s = this.settings;
    this.nextProbeAt = now + s.probeIntervalMs * (1 - s.probeJitter * this.random());
    this.resetWindow(now);
  }

  private resetWindow(now: number): void {
    this.windowStart = now;
    this.windowCount = 0;
    this.windowSum = 0;
    this.windowOverloads = 0;
    this.windowPeak = this.held;
  }
}
