/** Calendar windows of the fixed-window algorithm. */
/**
 * The `window` option that names a period, its nominal length and label, and the period ends a store opens windows at.
 */
import { checkPeriod, periodBounds, type CalendarPeriod, type CalendarUnit } from './calendar.js';
import { describeValue } from './describe-value.js';
import { ErrorCode, FloodgateError } from './errors.js';
import { assertKnownOptions } from './validate.js';

/**
 * A `window` that follows the calendar of a time zone instead of running for
 * a duration: the quota resets at the start of each day, week or month there
 * (e.g. `{ calendar: 'month', timeZone: 'Europe/Berlin' }` resets at
 * midnight on the 1st, Berlin time). Fixed window only.
 */
export interface CalendarWindow {
  /** The period: `"day"`, `"week"` or `"month"`. */
  readonly calendar: CalendarUnit;
  /** An IANA time zone, e.g. `"UTC"`, `"Europe/Berlin"`, `"America/New_York"`. */
  readonly timeZone: string;
  /** For weeks: the day they start, 0 = Sunday … 6 = Saturday. Default 1 (Monday). */
  readonly weekStart?: number;
}

/** A checked calendar period, frozen, as a {@link Policy} carries it. */
export type CalendarSpec = Readonly<Required<CalendarPeriod>>;

const HOUR_MS = 3_600_000;

/**
 * The longest a period of `unit` can last, in ms: a day of 25 hours (the day
 * clocks go back), a week and a 31-day month with that hour. A calendar
 * policy's `windowMs`: the numbers that need a window length (the limit ×
 * window bound, the pace of `execEvenly`, reservation ttls) take the longest
 * one, and a store whose clock is a whole period ahead of its caller's falls
 * back to it (see {@link windowArgument}).
 */
export function longestPeriodMs(unit: CalendarUnit): number {
  return unit === 'day' ? 25 * HOUR_MS : unit === 'week' ? (7 * 24 + 1) * HOUR_MS : (31 * 24 + 1) * HOUR_MS;
}

/** Whether `window` is a calendar window (an object), as opposed to a duration. */
export function isCalendarWindow(window: unknown): window is CalendarWindow {
  return typeof window === 'object' && window !== null && !Array.isArray(window);
}

/**
 * Checks a calendar `window` option and resolves its defaults.
 * @throws FloodgateError INVALID_WINDOW for an unknown option name, a missing or unknown unit, an unknown time zone, or a bad weekStart
 */
export function parseCalendarWindow(window: CalendarWindow, name = 'window'): CalendarSpec {
  // Every fault of the option is the window's, as for a duration window.
  try {
    assertKnownOptions(window, ['calendar', 'timeZone', 'weekStart'], name);
    return checkWindow(window, name);
  } catch (error) {
    if (error instanceof FloodgateError && error.code !== ErrorCode.INVALID_WINDOW) {
      throw new FloodgateError(ErrorCode.INVALID_WINDOW, error.message);
    }
    throw error;
  }
}

function checkWindow(window: CalendarWindow, name: string): CalendarSpec {
  if (window.calendar === undefined || window.timeZone === undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_WINDOW,
      `${name} is a calendar window only with both calendar and timeZone, e.g. { calendar: 'month', timeZone: 'Europe/Berlin' }; got ${describeValue(window)}.`,
    );
  }
  if (window.weekStart !== undefined && window.calendar !== 'week') {
    throw new FloodgateError(
      ErrorCode.INVALID_WINDOW,
      `${name}.weekStart applies to weeks only, not to ${describeValue(window.calendar)}.`,
    );
  }
  const spec = checkPeriod({ unit: window.calendar, timeZone: window.timeZone, weekStart: window.weekStart }, name);
  return Object.freeze(spec);
}

/** A period's short name, as default prefixes and messages show it: `month@Europe/Berlin`, `week/0@UTC` (weeks from Sunday). */
export function calendarLabel(spec: CalendarSpec): string {
  const week = spec.unit === 'week' && spec.weekStart !== 1 ? `/${spec.weekStart}` : '';
  return `${spec.unit}${week}@${spec.timeZone}`;
}

/** Whether two specs name the same periods. */
export function sameCalendar(a: CalendarSpec | undefined, b: CalendarSpec | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.unit === b.unit && a.timeZone === b.timeZone && a.weekStart === b.weekStart);
}

interface CachedPeriod {
  start: number;
  end: number;
  /** The end of the period after, computed on first need. */
  next: number | undefined;
}

/**
 * The last period each spec was asked about: nearly every call falls in it,
 * and a time-zone lookup costs microseconds. Keyed by the frozen spec a policy
 * holds, so it lives as long as the policy.
 */
const lastPeriod = new WeakMap<CalendarSpec, CachedPeriod>();

function periodAt(spec: CalendarSpec, at: number): CachedPeriod {
  let p = lastPeriod.get(spec);
  if (p === undefined || at < p.start || at >= p.end) {
    const b = periodBounds(spec, at);
    p = { start: b.start, end: b.end, next: undefined };
    lastPeriod.set(spec, p);
  }
  return p;
}

/** The end (exclusive, ms since the epoch) of the period that holds instant `at`: where a window opened at `at` ends. */
export function periodEnd(spec: CalendarSpec, at: number): number {
  return periodAt(spec, at).end;
}

/** The ends of the period that holds `at` and of the one after it. */
function periodEnds(spec: CalendarSpec, at: number): [number, number] {
  const p = periodAt(spec, at);
  p.next ??= periodBounds(spec, p.end).end;
  return [p.end, p.next];
}

/**
 * The window argument of a store that keeps its own clock (the Redis
 * scripts): `windowMs` for a duration window; for a calendar window
 * `windowMs:end:nextEnd`, the ends of the caller's current and next period
 * (at `at`, the caller's time). The script opens a window at the first end
 * after its own now, so Redis stays the clock of record and a caller whose
 * clock is a little behind still opens the right period; a caller a whole
 * period behind gets a window of the longest period length from Redis's now.
 */
export function windowArgument(windowMs: number, spec: CalendarSpec | undefined, at: number): string {
  if (spec === undefined) return String(windowMs);
  const [end, next] = periodEnds(spec, at);
  return `${windowMs}:${end}:${next}`;
}
