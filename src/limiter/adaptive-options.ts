/** The adaptive concurrency controller's options: their defaults, bounds and the typed errors for bad ones. */
import { parseDuration, type Duration } from '../core/duration.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { assertKnownOptions, invalid, wholeNumber } from '../core/validate.js';

/** Options of {@link AdaptiveController} (and of `AdaptiveConcurrencyLimiter`, which adds `clock`). Every one has a default. */
export interface AdaptiveControllerOptions {
  /** The limit once the first no-load probe is done, before any latency has moved it. A whole number from `minLimit` to `maxLimit`. Default 20. */
  initialLimit?: number;
  /** The limit never goes below this (probes included). A positive whole number. Default 1. */
  minLimit?: number;
  /** The limit never goes above this: the most in-flight work this process will ever send. A positive whole number. Default 1000. */
  maxLimit?: number;
  /**
   * How far one sample window moves the limit toward what that window's latency asks for: 1 jumps at once, 0.1 moves a tenth of
   * the way. Lower is steadier and slower. A number in (0, 1]. Default 0.5.
   */
  smoothing?: number;
  /**
   * The latency aimed at, as a multiple of the no-load latency: target = noLoad × tolerance. A window whose mean latency is below
   * the target lets the limit grow; above it shrinks it in proportion. A number from 1 to 10. Default 1.1 (10 % of queueing).
   */
  tolerance?: number;
  /**
   * In-flight work allowed on top of what the latency gradient gives, so the limit keeps probing upward and the upstream's
   * queue is never empty: the limit settles near capacity × tolerance + queueSize. A whole number from 0 to 1000. Default 2.
   */
  queueSize?: number;
  /** The shortest span of one sample window; a window also needs `minSamples` completions before it moves the limit. Default `"100ms"`. */
  sampleWindow?: Duration;
  /** Completions (latency samples, errors and drops) one window needs before it moves the limit. A whole number from 1 to 10000. Default 10. */
  minSamples?: number;
  /**
   * How often the no-load latency is measured again: the limit drops to `probeLimit` until `probeSamples` calls admitted at that
   * level have completed (or `probeTimeout` passed), their median becomes the no-load latency, and the limit goes back where it
   * was. An upstream that got slower or faster for good is judged against a stale no-load latency until then. Default `"60s"`.
   */
  probeInterval?: Duration;
  /**
   * How much earlier than `probeInterval` each later probe may come, as a share of it, drawn at random each time: several
   * processes in front of one upstream started together do not all drop to `probeLimit` at once (each probe would read
   * the others' load as the no-load latency). A number in [0, 0.5]. Default 0.1 (a probe every 54–60 s by default).
   */
  probeJitter?: number;
  /** The limit during a no-load probe. A whole number from `minLimit` to `maxLimit`. Default 3, raised to `minLimit` / lowered to `maxLimit`. */
  probeLimit?: number;
  /**
   * The longest a no-load probe runs: past it, the probe ends with the samples it has (one is enough; with none, the last
   * estimate stays). Keeps a slow upstream (a model answering in seconds) from spending much of its time at `probeLimit`, and
   * calls that never end from holding a probe open. Default `"2s"`.
   */
  probeTimeout?: Duration;
  /** Completions a no-load probe measures (more is a steadier median and a longer probe). A whole number from 1 to 1000. Default 50. */
  probeSamples?: number;
  /** What an error or a drop does to the limit: it is multiplied by this once per window that saw one. A number in [0.5, 1). Default 0.9. */
  backoffRatio?: number;
}

/** The controller's options with every default filled in, durations in ms. */
export interface AdaptiveSettings {
  readonly initialLimit: number;
  readonly minLimit: number;
  readonly maxLimit: number;
  readonly smoothing: number;
  readonly tolerance: number;
  readonly queueSize: number;
  readonly sampleWindowMs: number;
  readonly minSamples: number;
  readonly probeIntervalMs: number;
  readonly probeLimit: number;
  readonly probeJitter: number;
  readonly probeTimeoutMs: number;
  readonly probeSamples: number;
  readonly backoffRatio: number;
}

/** Every option name the controller knows. */
const ADAPTIVE_OPTIONS = [
  'initialLimit',
  'minLimit',
  'maxLimit',
  'smoothing',
  'tolerance',
  'queueSize',
  'sampleWindow',
  'minSamples',
  'probeInterval',
  'probeLimit',
  'probeJitter',
  'probeTimeout',
  'probeSamples',
  'backoffRatio',
] as const;

/** A number within [min, max] (or (min, max] with `openMin`), or INVALID_OPTIONS naming the option. */
function ratio(value: unknown, name: string, min: number, max: number, openMin: boolean, maxOpen = false): number {
  const ok =
    typeof value === 'number' && Number.isFinite(value) && (openMin ? value > min : value >= min) && (maxOpen ? value < max : value <= max);
  if (!ok) invalid(ErrorCode.INVALID_OPTIONS, name, `a number in ${openMin ? '(' : '['}${min}, ${max}${maxOpen ? ')' : ']'}`, value);
  return value;
}

/** A limit option: a positive whole number, or INVALID_LIMIT. */
function limitOption(value: unknown, name: string): number {
  return wholeNumber(value, name, { min: 1, code: ErrorCode.INVALID_LIMIT, expected: 'a positive whole number' });
}

/**
 * Checks `options` and fills in the defaults.
 *
 * @param owner - the class named in error messages
 * @param extra - option names the caller handles itself (the limiter's `clock`)
 * @throws FloodgateError UNKNOWN_OPTION, INVALID_OPTIONS, INVALID_LIMIT, INVALID_DURATION, or CONFLICTING_OPTIONS when the
 *   limits do not nest (minLimit ≤ probeLimit, initialLimit ≤ maxLimit)
 */
export function parseAdaptiveOptions(options: unknown, owner: string, extra: readonly string[] = []): AdaptiveSettings {
  assertKnownOptions(options, [...ADAPTIVE_OPTIONS, ...extra], owner);
  const o = options as AdaptiveControllerOptions;
  const minLimit = o.minLimit === undefined ? 1 : limitOption(o.minLimit, `${owner} minLimit`);
  const maxLimit = o.maxLimit === undefined ? Math.max(1000, minLimit) : limitOption(o.maxLimit, `${owner} maxLimit`);
  if (minLimit > maxLimit) {
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${owner} minLimit ${minLimit} is above maxLimit ${maxLimit}; the limit must have room between them.`,
    );
  }
  const clamp = (n: number): number => Math.min(maxLimit, Math.max(minLimit, n));
  const initialLimit = o.initialLimit === undefined ? clamp(20) : limitOption(o.initialLimit, `${owner} initialLimit`);
  const probeLimit = o.probeLimit === undefined ? clamp(3) : limitOption(o.probeLimit, `${owner} probeLimit`);
  for (const [name, value] of [
    ['initialLimit', initialLimit],
    ['probeLimit', probeLimit],
  ] as const) {
    if (value < minLimit || value > maxLimit) {
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        `${owner} ${name} ${value} is outside minLimit ${minLimit} to maxLimit ${maxLimit}; the limit never leaves that range.`,
      );
    }
  }
  return {
    initialLimit,
    minLimit,
    maxLimit,
    smoothing: o.smoothing === undefined ? 0.5 : ratio(o.smoothing, `${owner} smoothing`, 0, 1, true),
    tolerance: o.tolerance === undefined ? 1.1 : ratio(o.tolerance, `${owner} tolerance`, 1, 10, false),
    queueSize: o.queueSize === undefined ? 2 : wholeNumber(o.queueSize, `${owner} queueSize`, { max: 1000 }),
    sampleWindowMs: o.sampleWindow === undefined ? 100 : parseDuration(o.sampleWindow, `${owner} sampleWindow`),
    minSamples: o.minSamples === undefined ? 10 : wholeNumber(o.minSamples, `${owner} minSamples`, { min: 1, max: 10_000 }),
    probeIntervalMs: o.probeInterval === undefined ? 60_000 : parseDuration(o.probeInterval, `${owner} probeInterval`),
    probeLimit,
    probeJitter: o.probeJitter === undefined ? 0.1 : ratio(o.probeJitter, `${owner} probeJitter`, 0, 0.5, false),
    probeTimeoutMs: o.probeTimeout === undefined ? 2000 : parseDuration(o.probeTimeout, `${owner} probeTimeout`),
    probeSamples: o.probeSamples === undefined ? 50 : wholeNumber(o.probeSamples, `${owner} probeSamples`, { min: 1, max: 1000 }),
    backoffRatio: o.backoffRatio === undefined ? 0.9 : ratio(o.backoffRatio, `${owner} backoffRatio`, 0.5, 1, false, true),
  };
}
