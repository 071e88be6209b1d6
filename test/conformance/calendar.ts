// Calendar-window cases of the conformance suite: month ends, a leap day and DST days in two zones, with the in-memory block, composites and reservations, on every store.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { consumeAll, type ManualClock, type RateLimiter, type RateLimiterOptions } from '../../src/index.js';

/** What the suite hands the calendar cases. */
export interface CalendarContext {
  readonly clock: ManualClock;
  /** A limiter on the store under test, with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store'>): RateLimiter;
}

const H = 3_600_000;
const D = 24 * H;
let tags = 0;
/** A hash tag per test, so a composite's keys share one Redis Cluster slot. */
const tag = () => `{cal${++tags}:${process.pid}}`;

/**
 * Registers the calendar cases inside a conformance `describe`. Each sets the
 * suite's clock to its own date and puts it back after, so the cases around
 * it keep their day-aligned start.
 */
export function calendarCases(ctx: CalendarContext): void {
  const { clock } = ctx;
  const at = async (iso: string, body: () => Promise<void>): Promise<void> => {
    const saved = clock.now();
    clock.set(Date.parse(iso));
    try {
      await body();
    } finally {
      clock.set(saved);
    }
  };
  const decision = async (p: Promise<{ allowed: boolean; remaining: number; resetMs: number; retryAfterMs: number }>) => {
    const d = await p;
    return [d.allowed, d.remaining, d.resetMs, d.retryAfterMs];
  };

  test('calendar month (Europe/Berlin): a window opened on Jan 31 ends at Feb 1 00:00 there; the next lasts 28 days', () =>
    at('2026-01-31T22:30:00Z', async () => {
      const l = ctx.limiter({ limit: 3, window: { calendar: 'month', timeZone: 'Europe/Berlin' } });
      // 23:30 in Berlin: half an hour of January left.
      assert.deepEqual(await decision(l.consume('k', 3)), [true, 0, H / 2, 0]);
      assert.deepEqual(await decision(l.consume('k')), [false, 0, H / 2, H / 2]);
      clock.advance(H / 2 - 1);
      assert.deepEqual(await decision(l.consume('k')), [false, 0, 1, 1]);
      clock.advance(1);
      assert.deepEqual(await decision(l.consume('k')), [true, 2, 28 * D, 0]);
      clock.advance(28 * D - 1);
      assert.deepEqual(await decision(l.peek('k')), [true, 2, 1, 0]);
    }));

  test('calendar month (UTC): a leap day ends February 2028, and March lasts 31 days', () =>
    at('2028-02-29T23:59:00Z', async () => {
      const l = ctx.limiter({ limit: 2, window: { calendar: 'month', timeZone: 'UTC' } });
      assert.deepEqual(await decision(l.consume('k', 2)), [true, 0, 60_000, 0]);
      clock.advance(60_000);
      assert.deepEqual(await decision(l.consume('k')), [true, 1, 31 * D, 0]);
    }));

  for (const [zone, spring, fall] of [
    ['Europe/Berlin', '2026-03-28T23:00:00Z', '2026-10-24T22:00:00Z'],
    ['America/New_York', '2026-03-08T05:00:00Z', '2026-11-01T04:00:00Z'],
  ] as const) {
    test(`calendar day (${zone}): the spring-forward day lasts 23 hours`, () =>
      at(spring, async () => {
        const l = ctx.limiter({ limit: 1, window: { calendar: 'day', timeZone: zone } });
        assert.deepEqual(await decision(l.consume('k')), [true, 0, 23 * H, 0]);
        clock.advance(23 * H);
        assert.deepEqual(await decision(l.consume('k')), [true, 0, 24 * H, 0]);
      }));

    test(`calendar day (${zone}): the fall-back day lasts 25 hours`, () =>
      at(fall, async () => {
        const l = ctx.limiter({ limit: 1, window: { calendar: 'day', timeZone: zone } });
        assert.deepEqual(await decision(l.consume('k')), [true, 0, 25 * H, 0]);
        clock.advance(25 * H - 1);
        assert.deepEqual(await decision(l.consume('k')), [false, 0, 1, 1]);
        clock.advance(1);
        assert.deepEqual(await decision(l.consume('k')), [true, 0, 24 * H, 0]);
      }));
  }

  test('calendar week from Sunday (America/New_York): Saturday night ends it; the next one loses the DST hour', () =>
    at('2026-03-08T04:00:00Z', async () => {
      const l = ctx.limiter({ limit: 1, window: { calendar: 'week', timeZone: 'America/New_York', weekStart: 0 } });
      assert.deepEqual(await decision(l.consume('k')), [true, 0, H, 0]);
      clock.advance(H);
      assert.deepEqual(await decision(l.consume('k')), [true, 0, 167 * H, 0]);
    }));

  test('calendar, in-memory block: refused from memory until the month ends, then the store admits again', () =>
    at('2026-04-30T21:00:00Z', async () => {
      const l = ctx.limiter({ limit: 2, window: { calendar: 'month', timeZone: 'Europe/Berlin' }, inMemoryBlock: true });
      // 23:00 in Berlin (summer time) on April 30.
      await l.consume('k', 2);
      const refused = await l.consume('k');
      assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, H]);
      const fromMemory = await l.consume('k');
      assert.deepEqual([fromMemory.allowed, fromMemory.source, fromMemory.retryAfterMs], [false, 'memory-block', H]);
      clock.advance(H);
      const fresh = await l.consume('k');
      assert.deepEqual([fresh.allowed, fresh.source, fresh.remaining, fresh.resetMs], [true, 'store', 1, 31 * D]);
    }));

  test('calendar, composite: a monthly part and a per-minute part spend together, and the monthly one resets with the month', () =>
    at('2026-06-30T23:59:00Z', async () => {
      const g = tag();
      const monthly = ctx.limiter({ limit: 2, window: { calendar: 'month', timeZone: 'UTC' } });
      const perMinute = ctx.limiter({ limit: 10, window: '1m', algorithm: 'sliding-window' });
      const parts = () => [
        { limiter: monthly, key: `${g}m` },
        { limiter: perMinute, key: `${g}s` },
      ];
      const first = await consumeAll(parts());
      assert.deepEqual(
        first.parts.map((p) => p && [p.allowed, p.remaining, p.resetMs]),
        [
          [true, 1, 60_000],
          [true, 9, first.parts[1]!.resetMs],
        ],
      );
      await consumeAll(parts());
      const refused = await consumeAll(parts());
      assert.equal(refused.allowed, false);
      assert.equal(refused.retryAfterMs, 60_000);
      clock.advance(60_000);
      const july = await consumeAll(parts());
      assert.deepEqual([july.allowed, july.parts[0]!.remaining, july.parts[0]!.resetMs], [true, 1, 31 * D]);
    }));

  test('calendar, reservation: a cancel gives units back within the day, and none into the next one', () =>
    at('2026-10-25T21:00:00Z', async () => {
      const l = ctx.limiter({ limit: 5, window: { calendar: 'day', timeZone: 'Europe/Berlin' } });
      // 22:00 in Berlin, on the 25-hour day: two hours left.
      const r = await l.reserve('k', 3);
      assert.equal(r.decision.resetMs, 2 * H);
      assert.deepEqual(await r.cancel(), { status: 'settled', charged: 0 });
      assert.equal((await l.peek('k')).remaining, 5);
      const late = await l.reserve('k', 4);
      clock.advance(2 * H);
      await late.cancel();
      // The next day's window never saw those units: nothing comes back into it.
      assert.deepEqual(await decision(l.consume('k')), [true, 4, 24 * H, 0]);
    }));
}
