// Calendar periods in a time zone: month lengths and a leap day, both DST changes in two zones (23- and 25-hour days), a zone whose clocks jump at midnight, weeks from any weekday, and bad input.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkPeriod, periodBounds, type CalendarPeriod } from '../../src/core/calendar.js';
import { ErrorCode, FloodgateError } from '../../src/core/errors.js';

const iso = (ms: number): string => new Date(ms).toISOString();
const bounds = (period: CalendarPeriod, at: string): [string, string] => {
  const b = periodBounds(period, Date.parse(at));
  return [iso(b.start), iso(b.end)];
};
const hours = (period: CalendarPeriod, at: string): number => {
  const b = periodBounds(period, Date.parse(at));
  return (b.end - b.start) / 3_600_000;
};

describe('calendar periods', () => {
  it('months of 31, 30 and 28 days, and a leap February of 29, in UTC', () => {
    const month = { unit: 'month', timeZone: 'UTC' } as const;
    assert.deepEqual(bounds(month, '2026-01-31T23:59:59.999Z'), ['2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z']);
    assert.deepEqual(bounds(month, '2026-02-01T00:00:00.000Z'), ['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']);
    assert.equal(hours(month, '2026-02-14T12:00:00Z'), 28 * 24);
    assert.equal(hours(month, '2026-04-10T12:00:00Z'), 30 * 24);
    assert.equal(hours(month, '2028-02-29T12:00:00Z'), 29 * 24);
    assert.deepEqual(bounds(month, '2028-02-29T23:59:59Z'), ['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z']);
    assert.deepEqual(bounds(month, '2026-12-31T23:00:00Z'), ['2026-12-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
  });

  it('a day and a month follow the zone: midnight in Tokyo is 15:00 UTC the day before', () => {
    assert.deepEqual(bounds({ unit: 'day', timeZone: 'Asia/Tokyo' }, '2026-05-01T14:59:59Z'), [
      '2026-04-30T15:00:00.000Z',
      '2026-05-01T15:00:00.000Z',
    ]);
    assert.deepEqual(bounds({ unit: 'month', timeZone: 'Asia/Tokyo' }, '2026-04-30T15:00:00Z'), [
      '2026-04-30T15:00:00.000Z',
      '2026-05-31T15:00:00.000Z',
    ]);
  });

  for (const [zone, spring, autumn] of [
    ['Europe/Berlin', '2026-03-29T12:00:00Z', '2026-10-25T12:00:00Z'],
    ['America/New_York', '2026-03-08T16:00:00Z', '2026-11-01T16:00:00Z'],
  ] as const) {
    it(`${zone}: the spring day has 23 hours, the autumn day 25, and each starts at local midnight`, () => {
      const day = { unit: 'day', timeZone: zone } as const;
      assert.equal(hours(day, spring), 23);
      assert.equal(hours(day, autumn), 25);
      // The days around them are whole.
      assert.equal(hours(day, new Date(Date.parse(spring) - 86_400_000).toISOString()), 24);
      assert.equal(hours(day, new Date(Date.parse(autumn) + 86_400_000).toISOString()), 24);
      // Midnight before a change is on the old offset, the next midnight on the new one.
      const springDay = periodBounds(day, Date.parse(spring));
      const autumnDay = periodBounds(day, Date.parse(autumn));
      assert.equal((autumnDay.start - springDay.start) % 3_600_000, 0);
      // The month holding the change is an hour short (spring) or long (autumn).
      const month = { unit: 'month', timeZone: zone } as const;
      assert.equal(hours(month, spring), 31 * 24 - 1);
      assert.equal(hours(month, autumn), (zone === 'Europe/Berlin' ? 31 : 30) * 24 + 1);
    });
  }

  it('a zone that jumps from 00:00 to 01:00 (Havana, 8 March 2026): the day starts at the first instant that exists', () => {
    // 00:00 EST would be 05:00Z; the clocks read 01:00 CDT at that instant, so the day begins there and has 23 hours.
    assert.deepEqual(bounds({ unit: 'day', timeZone: 'America/Havana' }, '2026-03-08T12:00:00Z'), [
      '2026-03-08T05:00:00.000Z',
      '2026-03-09T04:00:00.000Z',
    ]);
  });

  it('weeks start on Monday by default, or on the day asked', () => {
    // Wednesday 2026-11-25.
    assert.deepEqual(bounds({ unit: 'week', timeZone: 'UTC' }, '2026-11-25T10:00:00Z'), [
      '2026-11-23T00:00:00.000Z',
      '2026-11-30T00:00:00.000Z',
    ]);
    assert.deepEqual(bounds({ unit: 'week', timeZone: 'UTC', weekStart: 0 }, '2026-11-25T10:00:00Z'), [
      '2026-11-22T00:00:00.000Z',
      '2026-11-29T00:00:00.000Z',
    ]);
    // A Monday is the first day of its own week.
    assert.deepEqual(bounds({ unit: 'week', timeZone: 'UTC' }, '2026-11-30T00:00:00Z')[0], '2026-11-30T00:00:00.000Z');
    // A week across the autumn change in Berlin has 7 × 24 + 1 hours.
    assert.equal(hours({ unit: 'week', timeZone: 'Europe/Berlin' }, '2026-10-25T12:00:00Z'), 7 * 24 + 1);
  });

  it('every instant of a year falls in exactly one day, and consecutive days meet (Berlin, hour by hour)', () => {
    const day = { unit: 'day', timeZone: 'Europe/Berlin' } as const;
    let previous = periodBounds(day, Date.parse('2026-01-01T00:00:00Z'));
    for (let t = Date.parse('2026-01-01T00:00:00Z'); t < Date.parse('2027-01-01T00:00:00Z'); t += 3_600_000) {
      const b = periodBounds(day, t);
      assert.ok(b.start <= t && t < b.end, `${iso(t)} in [${iso(b.start)}, ${iso(b.end)})`);
      if (b.start !== previous.start) assert.equal(b.start, previous.end, `days meet at ${iso(b.start)}`);
      previous = b;
    }
  });

  it('bad input: an unknown unit, time zone or week start is a typed error that says what is accepted', () => {
    const rejects = (period: unknown, pattern: RegExp): void =>
      assert.throws(
        () => checkPeriod(period as CalendarPeriod),
        (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS && pattern.test(e.message),
      );
    rejects({ unit: 'year', timeZone: 'UTC' }, /"day", "week", "month"/);
    rejects({ unit: 'day', timeZone: 'Mars/Olympus' }, /IANA time zone/);
    rejects({ unit: 'week', timeZone: 'UTC', weekStart: 7 }, /0 \(Sunday\) to 6/);
    rejects({ unit: 'week', timeZone: 'UTC', weekStart: 1.5 }, /0 \(Sunday\) to 6/);
  });
});
