// The calendar `window` option: its checks and typed errors, the policy and default prefix it gives, insurance and the overflow sketch with it, and the policy on the cluster store's wire.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode, FloodgateError, ManualClock, MemoryStore, RateLimiter, type RateLimiterOptions, type Store } from '../../src/index.js';
import { samePolicy } from '../../src/core/policy.js';
import { decodePolicy, describePolicy, encodePolicy } from '../../src/stores/cluster/protocol.js';

const make = (options: Omit<RateLimiterOptions, 'store'>) =>
  new RateLimiter({ store: new MemoryStore({ sweepIntervalMs: 0 }), ...options });
const rejects = (options: Record<string, unknown>, code: string, message: RegExp) =>
  assert.throws(
    () => make(options as unknown as RateLimiterOptions),
    (e: unknown) => e instanceof FloodgateError && e.code === code && message.test(e.message),
  );

describe('the calendar window option', () => {
  it('gives a fixed-window policy with the period, the longest period as windowMs, and a default prefix that names it', () => {
    const monthly = make({ limit: 10_000, window: { calendar: 'month', timeZone: 'Europe/Berlin' } });
    assert.deepEqual(monthly.policy, {
      algorithm: 'fixed-window',
      limit: 10_000,
      windowMs: (31 * 24 + 1) * 3_600_000,
      blockMs: 0,
      calendar: { unit: 'month', timeZone: 'Europe/Berlin', weekStart: 1 },
    });
    assert.ok(Object.isFrozen(monthly.policy) && Object.isFrozen(monthly.policy.calendar));
    assert.equal(monthly.prefix, 'fg:fixed-window:10000:month@Europe/Berlin:0');
    const sundays = make({ limit: 5, window: { calendar: 'week', timeZone: 'UTC', weekStart: 0 }, blockDuration: '1h' });
    assert.equal(sundays.prefix, 'fg:fixed-window:5:week/0@UTC:3600000');
    assert.equal(make({ limit: 5, window: { calendar: 'day', timeZone: 'UTC' } }).policy.windowMs, 25 * 3_600_000);
  });

  it('a monthly limiter and one of the same length in hours never share keys or count as the same policy', () => {
    const monthly = make({ limit: 3, window: { calendar: 'month', timeZone: 'UTC' } });
    const hours = make({ limit: 3, window: '745h' });
    assert.equal(hours.policy.windowMs, monthly.policy.windowMs);
    assert.notEqual(hours.prefix, monthly.prefix);
    assert.equal(samePolicy(monthly.policy, hours.policy), false);
    const berlin = make({ limit: 3, window: { calendar: 'month', timeZone: 'Europe/Berlin' } });
    assert.equal(samePolicy(monthly.policy, berlin.policy), false);
    assert.equal(samePolicy(monthly.policy, make({ limit: 3, window: { calendar: 'month', timeZone: 'UTC' } }).policy), true);
    const mondays = make({ limit: 3, window: { calendar: 'week', timeZone: 'UTC' } }).policy;
    const sundays = make({ limit: 3, window: { calendar: 'week', timeZone: 'UTC', weekStart: 0 } }).policy;
    assert.equal(samePolicy(mondays, sundays), false);
  });

  it('is a fixed window: any other algorithm is INVALID_OPTIONS saying so', () => {
    for (const algorithm of ['token-bucket', 'sliding-window', 'sliding-log']) {
      rejects(
        { limit: 5, algorithm, window: { calendar: 'month', timeZone: 'UTC' } },
        ErrorCode.INVALID_OPTIONS,
        /calendar windows, which are fixed windows/,
      );
    }
  });

  it('rejects an unknown zone, a bad unit, a missing zone, a bad weekStart and a duration beside the period with INVALID_WINDOW', () => {
    rejects(
      { limit: 5, window: { calendar: 'month', timeZone: 'Mars/Olympus' } },
      ErrorCode.INVALID_WINDOW,
      /window\.timeZone must be an IANA time zone.*"Mars\/Olympus"/,
    );
    rejects(
      { limit: 5, window: { calendar: 'year', timeZone: 'UTC' } },
      ErrorCode.INVALID_WINDOW,
      /window\.unit must be one of "day", "week", "month"; got "year"/,
    );
    rejects(
      { limit: 5, window: { calendar: 'month' } },
      ErrorCode.INVALID_WINDOW,
      /needs? .*timeZone|only with both calendar and timeZone/,
    );
    rejects({ limit: 5, window: { timeZone: 'UTC' } }, ErrorCode.INVALID_WINDOW, /only with both calendar and timeZone/);
    rejects(
      { limit: 5, window: { calendar: 'week', timeZone: 'UTC', weekStart: 7 } },
      ErrorCode.INVALID_WINDOW,
      /weekStart must be a day of the week/,
    );
    rejects(
      { limit: 5, window: { calendar: 'month', timeZone: 'UTC', weekStart: 0 } },
      ErrorCode.INVALID_WINDOW,
      /weekStart applies to weeks only/,
    );
    // Both a duration and a period: the period decides where windows end, so a length beside it is refused, not ignored.
    rejects({ limit: 5, window: { calendar: 'month', timeZone: 'UTC', duration: '30d' } }, ErrorCode.INVALID_WINDOW, /duration/);
    rejects({ limit: 5, window: [] }, ErrorCode.INVALID_WINDOW, /window/);
  });

  it('keeps limit × window exact: the longest month counts', () => {
    rejects({ limit: 1_000_000, window: { calendar: 'month', timeZone: 'UTC' } }, ErrorCode.LIMIT_TOO_LARGE, /longest month@UTC/);
  });
});

describe('a calendar limiter while its store fails', () => {
  it('its insurance limiter decides with the same period: the reset is the month end', async () => {
    const clock = new ManualClock(Date.parse('2026-01-31T23:30:00Z'));
    const window = { calendar: 'month', timeZone: 'UTC' } as const;
    const failing: Store = {
      name: 'failing',
      apply: () => Promise.reject(new FloodgateError(ErrorCode.STORE_ERROR, 'down')),
    };
    const insurance = new RateLimiter({
      limit: 1,
      window,
      store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
      clock: clock.now,
    });
    const l = new RateLimiter({ limit: 1, window, store: failing, insurance, clock: clock.now, breaker: false });
    const d = await l.consume('k');
    assert.deepEqual([d.allowed, d.source, d.resetMs], [true, 'insurance', 30 * 60_000]);
    assert.deepEqual([(await l.consume('k')).allowed, (await l.consume('k')).retryAfterMs], [false, 30 * 60_000]);
    clock.advance(30 * 60_000);
    const february = await l.consume('k');
    assert.deepEqual([february.allowed, february.resetMs], [true, 28 * 86_400_000]);
  });
});

describe('a calendar policy on the cluster store wire', () => {
  it('travels with its period and comes back equal; a malformed period is refused like any malformed policy', () => {
    const policy = make({ limit: 9, window: { calendar: 'week', timeZone: 'America/New_York', weekStart: 0 } }).policy;
    const tuple = encodePolicy(policy);
    assert.deepEqual(tuple, [0, 9, (7 * 24 + 1) * 3_600_000, 0, 'week', 'America/New_York', 0]);
    const back = decodePolicy(JSON.parse(JSON.stringify(tuple)));
    assert.ok(back !== undefined && samePolicy(back, policy));
    assert.deepEqual(back, policy);
    assert.equal(describePolicy(policy), 'fixed-window limit 9 per week/0@America/New_York');
    assert.equal(decodePolicy([0, 9, tuple[2], 0, 'week', 'Mars/Olympus', 0]), undefined);
    assert.equal(decodePolicy([0, 9, tuple[2], 0, 'fortnight', 'UTC', 1]), undefined);
    assert.equal(decodePolicy([3, 9, tuple[2], 0, 'week', 'UTC', 1]), undefined, 'a calendar token bucket');
    assert.equal(decodePolicy([0, 9, 1000, 0, 'week', 'UTC', 1]), undefined, 'a window length that is not the period’s');
    assert.deepEqual(encodePolicy(make({ limit: 9, window: '1m' }).policy), [0, 9, 60_000, 0]);
  });
});

describe('a calendar policy in a full MemoryStore (overflow sketch)', () => {
  it('a key decided in the sketch gets the period end, and is never admitted over its limit', () => {
    const clock = new ManualClock(Date.parse('2026-04-30T22:00:00Z'));
    const store = new MemoryStore({ maxKeys: 1, onFull: 'overflow', overflowCells: 64, clock: clock.now, sweepIntervalMs: 0 });
    const policy = make({ limit: 2, window: { calendar: 'month', timeZone: 'UTC' } }).policy;
    const consume = (key: string) => store.applySync({ kind: 'consume', key, amount: 1, policy }, clock.now());
    assert.equal(consume('held').allowed, true);
    const first = consume('overflowed');
    assert.equal(store.overflows, 1);
    assert.deepEqual([first.allowed, first.resetMs], [true, 2 * 3_600_000]);
    assert.equal(consume('overflowed').allowed, true);
    const refused = consume('overflowed');
    assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 2 * 3_600_000]);
    clock.advance(2 * 3_600_000);
    // May: the held key's window ended, so the table has room again and the key starts afresh.
    const may = consume('overflowed');
    assert.deepEqual([may.allowed, may.resetMs], [true, 31 * 86_400_000]);
  });
});
