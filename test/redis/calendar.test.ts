// Calendar windows on Redis time: the window end Redis stores is the period end exactly, the reported reset matches it, and the script picks the first of the caller's two ends after its own now.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { ErrorCode, isFloodgateError, periodBounds, RateLimiter, type CalendarPeriod } from '../../src/index.js';
import { LocalFirstStore, RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { LUA_SCRIPTS } from '../../src/stores/redis/lua/scripts.generated.js';
import { redisFixture } from '../support/redis-clients.js';
import { untilLive } from '../support/local-first.js';

let client: Redis;
let admin: Redis;
redisFixture((open) => {
  client = open();
  admin = open();
});

const H = 3_600_000;
let n = 0;

/** The period end around a call, or undefined when a period ended during it (then the case cannot tell which end is right). */
async function aroundCall(
  period: CalendarPeriod,
  call: () => Promise<number>,
): Promise<{ end: number; resetMs: number; before: number; after: number } | undefined> {
  const before = Date.now();
  const resetMs = await call();
  const after = Date.now();
  const end = periodBounds(period, before).end;
  return end === periodBounds(period, after).end ? { end, resetMs, before, after } : undefined;
}

describe('calendar windows on Redis time', () => {
  for (const [unit, timeZone] of [
    ['month', 'Europe/Berlin'],
    ['day', 'America/New_York'],
    ['week', 'Asia/Tokyo'],
  ] as const) {
    test(`RedisStore (${unit}, ${timeZone}): the stored window end is the period's end, and resetMs counts down to it`, async (t) => {
      const store = new RedisStore({ client });
      const prefix = `cal${++n}:${process.pid}`;
      const l = new RateLimiter({ store, prefix, limit: 5, window: { calendar: unit, timeZone } });
      const got = await aroundCall({ unit, timeZone }, async () => (await l.consume('k')).resetMs);
      if (got === undefined) return t.skip('a period ended during the call');
      assert.equal(Number(await admin.hget(redisKeys(`${prefix}:k`).state, 'r')), got.end);
      // Redis's now, read inside the call, lies between the two host readings (one host, one clock).
      const redisNow = got.end - got.resetMs;
      assert.ok(redisNow >= got.before - 1 && redisNow <= got.after + 1, `Redis now ${redisNow} outside [${got.before}, ${got.after}]`);
      const ttl = await admin.pttl(redisKeys(`${prefix}:k`).state);
      assert.ok(ttl > 0 && ttl <= got.resetMs, `ttl ${ttl} vs resetMs ${got.resetMs}`);
      await store.close();
    });
  }

  test('LocalFirstStore: a lease is granted in the period and ends with it', async (t) => {
    const store = new LocalFirstStore({ client, channel: `cal-lf-${process.pid}` });
    await untilLive(store);
    const prefix = `cal${++n}:${process.pid}`;
    const period = { unit: 'month', timeZone: 'Pacific/Auckland' } as const;
    const l = new RateLimiter({ store, prefix, limit: 100, window: { calendar: 'month', timeZone: period.timeZone } });
    const got = await aroundCall(period, async () => (await l.consume('k')).resetMs);
    if (got === undefined) return t.skip('a period ended during the call');
    assert.equal(Number(await admin.hget(redisKeys(`${prefix}:k`).state, 'r')), got.end);
    assert.ok(got.end - got.resetMs <= got.after + 1);
    await store.close();
  });

  test('one key under two zones is CONFLICTING_OPTIONS naming both periods, not a shared counter', async () => {
    const store = new RedisStore({ client });
    const prefix = `cal${++n}:${process.pid}`;
    const utc = new RateLimiter({ store, prefix, limit: 5, window: { calendar: 'month', timeZone: 'UTC' } });
    const berlin = new RateLimiter({ store, prefix, limit: 5, window: { calendar: 'month', timeZone: 'Europe/Berlin' } });
    await utc.consume('k');
    await assert.rejects(berlin.consume('k'), (e: unknown) => {
      assert.ok(isFloodgateError(e) && e.code === ErrorCode.CONFLICTING_OPTIONS, String(e));
      assert.match(e.message, /per month@UTC.*per month@Europe\/Berlin/);
      return true;
    });
    await store.close();
  });

  describe('the script picks the first end after its own now', () => {
    // The fixed-window script on the caller's time (ARGV[4] = '1'), so "its own now" is chosen here.
    const script = LUA_SCRIPTS['fixed-window'];
    const consumeAt = async (key: string, window: string, now: number): Promise<number> => {
      await client.eval(script.text, 1, redisKeys(key).state, '10', window, '0', '1', '1', '1', String(now));
      return Number(await admin.hget(redisKeys(key).state, 'r'));
    };
    const end = Date.parse('2026-02-01T00:00:00Z');
    const next = Date.parse('2026-03-01T00:00:00Z');
    const W = (31 * 24 + 1) * H;

    test('before the first end: the window ends there', async () => {
      assert.equal(await consumeAt(`pick1:${process.pid}`, `${W}:${end}:${next}`, end - 1), end);
    });

    test('past it (the caller was behind across the boundary): the window ends at the next one', async () => {
      assert.equal(await consumeAt(`pick2:${process.pid}`, `${W}:${end}:${next}`, end), next);
      assert.equal(await consumeAt(`pick3:${process.pid}`, `${W}:${end}:${next}`, end + H), next);
    });

    test('past both (a caller a whole period behind): the window lasts the longest period from now', async () => {
      assert.equal(await consumeAt(`pick4:${process.pid}`, `${W}:${end}:${next}`, next + 5), next + 5 + W);
    });

    test('a duration window still ends a window length after the first consume', async () => {
      assert.equal(await consumeAt(`pick5:${process.pid}`, '1000', end), end + 1000);
    });
  });
});
