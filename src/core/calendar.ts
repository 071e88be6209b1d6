/** Calendar periods in a time zone (a day, a week, a month). */
/**
 * The instants they start and end, DST and month lengths included, for windows that follow the calendar.
 */
import { describeValue } from './describe-value.js';
import { ErrorCode, FloodgateError } from './errors.js';

/** The calendar units a period can be. */
export const CALENDAR_UNITS = ['day', 'week', 'month'] as const;

/** One of {@link CALENDAR_UNITS}. */
export type CalendarUnit = (typeof CALENDAR_UNITS)[number];

/** A calendar period: a day, a week or a month, as the clocks of one time zone count it. */
export interface CalendarPeriod {
  /** The period. */
  readonly unit: CalendarUnit;
  /** An IANA time zone, e.g. `"Europe/Berlin"` or `"UTC"`. */
  readonly timeZone: string;
  /** For weeks: the day they start, 0 = Sunday … 6 = Saturday. Default 1 (Monday, ISO 8601). */
  readonly weekStart?: number;
}

/** The instants (ms since the epoch) a period starts, inclusive, and ends, exclusive. */
export interface PeriodBounds {
  readonly start: number;
  readonly end: number;
}

/** A wall-clock date in a time zone, with the month 1–12. */
interface WallDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

const MS_PER_DAY = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();

/**
 * Checks a period and resolves its defaults.
 * @throws FloodgateError INVALID_OPTIONS for an unknown unit, an unknown time zone, or a weekStart that is not 0–6
 */
export function checkPeriod(period: CalendarPeriod, name = 'calendar'): Required<CalendarPeriod> {
  if (!CALENDAR_UNITS.includes(period.unit)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${name}.unit must be one of ${CALENDAR_UNITS.map((u) => JSON.stringify(u)).join(', ')}; got ${describeValue(period.unit)}.`,
    );
  }
  formatter(period.timeZone, name);
  const weekStart = period.weekStart ?? 1;
  if (!Number.isInteger(weekStart) || weekStart < 0 || weekStart > 6) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${name}.weekStart must be a day of the week from 0 (Sunday) to 6 (Saturday); got ${describeValue(period.weekStart)}.`,
    );
  }
  return { unit: period.unit, timeZone: period.timeZone, weekStart };
}

/**
 * The period that contains the instant `at`: from the first instant of its
 * first day in the time zone to the first instant of the next period's. A day
 * is 23 or 25 hours long across a DST change, a month 28 to 31 days; where a
 * day starts in a gap (a zone that moves its clocks at midnight), it starts
 * at the first instant that exists.
 * @throws FloodgateError INVALID_OPTIONS for an invalid period (see {@link checkPeriod})
 */
export function periodBounds(period: CalendarPeriod, at: number): PeriodBounds {
  const { unit, timeZone, weekStart } = checkPeriod(period);
  const today = wallDate(timeZone, at);
  let first: WallDate;
  let next: WallDate;
  if (unit === 'day') {
    first = today;
    next = addDays(today, 1);
  } else if (unit === 'week') {
    const weekday = new Date(Date.UTC(today.year, today.month - 1, today.day)).getUTCDay();
    first = addDays(today, -((weekday - weekStart + 7) % 7));
    next = addDays(first, 7);
  } else {
    first = { year: today.year, month: today.month, day: 1 };
    next = today.month === 12 ? { year: today.year + 1, month: 1, day: 1 } : { year: today.year, month: today.month + 1, day: 1 };
  }
  return { start: startOfDay(timeZone, first), end: startOfDay(timeZone, next) };
}

/** The cached formatter of `timeZone`; an unknown zone is a FloodgateError naming the option. */
function formatter(timeZone: string, name = 'calendar'): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (f !== undefined) return f;
  try {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${name}.timeZone must be an IANA time zone such as "UTC" or "Europe/Berlin"; got ${describeValue(timeZone)}.`,
    );
  }
  formatters.set(timeZone, f);
  return f;
}

/** The wall-clock fields of instant `at` in `timeZone`. */
function wallFields(
  timeZone: string,
  at: number,
): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  const fields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatter(timeZone).formatToParts(at)) {
    if (part.type in fields) fields[part.type as keyof typeof fields] = Number(part.value);
  }
  return fields;
}

function wallDate(timeZone: string, at: number): WallDate {
  const { year, month, day } = wallFields(timeZone, at);
  return { year, month, day };
}

/** The zone's offset from UTC at instant `at`, in ms (what the wall clock reads minus UTC), to the second. */
function offsetAt(timeZone: string, at: number): number {
  const f = wallFields(timeZone, at);
  const wallAsUtc = Date.UTC(f.year, f.month - 1, f.day, f.hour, f.minute, f.second);
  return wallAsUtc - Math.floor(at / 1000) * 1000;
}

/**
 * The first instant of the day `date` in `timeZone`: its local midnight, or,
 * when midnight falls in a DST gap, the first instant after the gap.
 */
function startOfDay(timeZone: string, date: WallDate): number {
  const midnight = Date.UTC(date.year, date.month - 1, date.day);
  // Two passes fix the offset (it can differ between the first guess and the answer across a change).
  let t = midnight - offsetAt(timeZone, midnight);
  t = midnight - offsetAt(timeZone, t);
  // A gap at midnight puts the guess on another date; midnight twice (clocks set back over it) may give the
  // second one. Either way the day starts where its date first shows.
  if (!sameDate(wallDate(timeZone, t), date) || sameDate(wallDate(timeZone, t - 1), date)) return firstInstantOf(timeZone, date, t);
  return t;
}

/** The first instant whose wall date in `timeZone` is `date`, searched by halving (to the ms) around `near`. */
function firstInstantOf(timeZone: string, date: WallDate, near: number): number {
  let lo = near - MS_PER_DAY;
  let hi = near + MS_PER_DAY;
  // lo is before the date, hi on or after its start.
  while (compareDates(wallDate(timeZone, lo), date) >= 0) lo -= MS_PER_DAY;
  while (compareDates(wallDate(timeZone, hi), date) < 0) hi += MS_PER_DAY;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (compareDates(wallDate(timeZone, mid), date) < 0) lo = mid;
    else hi = mid;
  }
  return hi;
}

function addDays(date: WallDate, days: number): WallDate {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

function sameDate(a: WallDate, b: WallDate): boolean {
  return a.year === b.year && a.month === b.month && a.day === b.day;
}

function compareDates(a: WallDate, b: WallDate): number {
  return a.year - b.year || a.month - b.month || a.day - b.day;
}
