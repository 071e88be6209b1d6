// Reservation cases of the conformance suite: reserve, then commit, cancel or let the ttl pass, read back with peek, on every store and algorithm.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, type Algorithm, type ManualClock, type RateLimiter, type RateLimiterOptions } from '../../src/index.js';

/** What the suite hands the reservation cases. */
export interface ReservationContext {
  readonly clock: ManualClock;
  /** A limiter on the store under test, with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store'>): RateLimiter;
}

const ALL: Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'];

/** Registers the reservation cases inside a conformance `describe`. */
export function reservationCases(ctx: ReservationContext): void {
  const { clock } = ctx;
  /** Moves the clock to the start of an aligned window of `ms`, so a sliding window's current window is known. */
  const alignTo = (ms: number): void => clock.advance(ms - (clock.now() % ms));

  for (const algorithm of ALL) {
    test(`reservation (${algorithm}): commit below the estimate gives the difference back`, async () => {
      alignTo(10_000);
      const l = ctx.limiter({ limit: 10, window: '10s', algorithm });
      const r = await l.reserve('k', 6);
      assert.equal(r.allowed, true);
      assert.equal(r.decision.remaining, 4);
      assert.equal(r.estimate, 6);
      assert.equal(r.key, 'k');
      assert.equal(r.expiresAt, clock.now() + 10_000, 'the ttl defaults to the window');
      assert.equal((await l.peek('k')).remaining, 4, 'the estimate is spent up front');
      clock.advance(100);
      assert.deepEqual(await r.commit(2), { status: 'settled', charged: 2 });
      // 100 ms refill a tenth of a token bucket's unit: not enough to show.
      assert.equal((await l.peek('k')).remaining, 8, `${algorithm}: 2 of 10 charged`);
    });

    test(`reservation (${algorithm}): commit above the estimate charges the excess, past the limit, and later consumes wait for it to drain`, async () => {
      alignTo(1000);
      const l = ctx.limiter({ limit: 10, window: 1000, algorithm });
      const r = await l.reserve('k', 4);
      assert.deepEqual(await r.commit(13), { status: 'settled', charged: 13 });
      const over = await l.peek('k');
      assert.equal(over.allowed, false);
      assert.equal(over.remaining, 0);
      const refused = await l.consume('k');
      assert.equal(refused.allowed, false, 'the key went over its limit');
      assert.ok(refused.retryAfterMs > 0);
      clock.advance(refused.retryAfterMs);
      assert.equal((await l.consume('k')).allowed, true, 'admitted again once drained');
    });

    test(`reservation (${algorithm}): cancel gives the whole estimate back`, async () => {
      const l = ctx.limiter({ limit: 10, window: '10s', algorithm });
      await l.consume('k', 3);
      const r = await l.reserve('k', 7);
      assert.equal((await l.consume('k')).allowed, false, 'the estimate holds the rest of the quota');
      assert.deepEqual(await r.cancel(), { status: 'settled', charged: 0 });
      assert.equal((await l.peek('k')).remaining, 7);
    });

    test(`reservation (${algorithm}): after the ttl, commit changes nothing and the estimate stays charged`, async () => {
      const l = ctx.limiter({ limit: 10, window: '1m', algorithm });
      const r = await l.reserve('k', 5, { ttl: '2s' });
      assert.equal(r.expiresAt, clock.now() + 2000);
      clock.advance(2000);
      const before = (await l.peek('k')).remaining;
      assert.deepEqual(await r.commit(1), { status: 'expired', charged: 5 });
      assert.equal((await l.peek('k')).remaining, before, 'nothing given back');
      assert.ok(before <= 5, `${algorithm}: remaining ${before}`);
    });
  }

  test('reservation: a refused reserve holds nothing, and settling it charges nothing', async () => {
    const l = ctx.limiter({ limit: 3, window: '10s' });
    await l.consume('k', 2);
    const r = await l.reserve('k', 2);
    assert.equal(r.allowed, false);
    assert.equal(r.decision.allowed, false);
    assert.equal(r.decision.remaining, 1);
    assert.deepEqual(await r.commit(5), { status: 'refused', charged: 0 });
    assert.equal((await l.peek('k')).remaining, 1);
    await assert.rejects(r.cancel(), { code: ErrorCode.RESERVATION_SETTLED });
  });

  test('reservation: a second commit or cancel throws FLOODGATE_RESERVATION_SETTLED and changes nothing', async () => {
    const l = ctx.limiter({ limit: 10, window: '10s' });
    const r = await l.reserve('k', 4);
    await r.commit(3);
    await assert.rejects(r.commit(1), { code: ErrorCode.RESERVATION_SETTLED, message: /already committed or cancelled/ });
    await assert.rejects(r.cancel(), { code: ErrorCode.RESERVATION_SETTLED });
    assert.equal((await l.peek('k')).remaining, 7);
    const expired = await l.reserve('k', 1, { ttl: 10 });
    clock.advance(10);
    assert.equal((await expired.cancel()).status, 'expired');
    await assert.rejects(expired.commit(0), { code: ErrorCode.RESERVATION_SETTLED });
  });

  test('reservation: bad estimates, actuals and ttls are typed errors', async () => {
    const l = ctx.limiter({ limit: 10, window: '10s' });
    await assert.rejects(l.reserve('k', 0), { code: ErrorCode.INVALID_COST, message: 'estimate must be a positive whole number; got 0.' });
    await assert.rejects(l.reserve('k', 1.5), { code: ErrorCode.INVALID_COST });
    await assert.rejects(l.reserve('k', 11), { code: ErrorCode.COST_EXCEEDS_LIMIT });
    await assert.rejects(l.reserve('', 1), { code: ErrorCode.INVALID_KEY });
    await assert.rejects(l.reserve('k', 1, { ttl: 0 }), { code: ErrorCode.INVALID_DURATION });
    await assert.rejects(l.reserve('k', 1, { ttl: 'soon' }), { code: ErrorCode.INVALID_DURATION });
    await assert.rejects(l.reserve('k', 1, { tll: '1s' } as never), { code: ErrorCode.UNKNOWN_OPTION });
    await assert.rejects(l.reserve('k', 1, 5 as never), { code: ErrorCode.INVALID_OPTIONS });
    const r = await l.reserve('k', 2);
    await assert.rejects(r.commit(-1), { code: ErrorCode.INVALID_COST });
    await assert.rejects(r.commit(0.5), { code: ErrorCode.INVALID_COST });
    await assert.rejects(r.commit('3' as never), { code: ErrorCode.INVALID_COST });
    // A bad actual does not settle: the reservation can still be committed.
    assert.deepEqual(await r.commit(0), { status: 'settled', charged: 0 });
    assert.equal((await l.peek('k')).remaining, 10, 'nothing left charged by the failed calls');
  });

  test('reservation (fixed-window): a give-back after the window ended is dropped, not taken from the next window', async () => {
    const l = ctx.limiter({ limit: 10, window: 1000 });
    const r = await l.reserve('k', 6, { ttl: '5s' });
    assert.equal(r.decision.resetMs, 1000);
    clock.advance(1000);
    assert.equal((await l.consume('k', 3)).remaining, 7, 'a new window');
    assert.deepEqual(await r.commit(1), { status: 'settled', charged: 6 });
    assert.equal((await l.peek('k')).remaining, 7, 'the new window keeps its 3 units');
  });

  test('reservation (sliding-window): a give-back after the aligned window ended is dropped', async () => {
    alignTo(1000);
    clock.advance(900);
    const l = ctx.limiter({ limit: 10, window: 1000, algorithm: 'sliding-window' });
    const r = await l.reserve('k', 6, { ttl: '5s' });
    // In the same window, units come back.
    const early = await l.reserve('k', 2, { ttl: '5s' });
    clock.advance(99);
    assert.deepEqual(await early.commit(1), { status: 'settled', charged: 1 });
    assert.equal((await l.peek('k')).remaining, 3);
    clock.advance(1); // the next aligned window: 7 units now weigh as the previous window's
    assert.equal((await l.consume('k', 2)).allowed, true);
    const before = (await l.peek('k')).remaining;
    assert.deepEqual(await r.commit(1), { status: 'settled', charged: 6 });
    assert.equal((await l.peek('k')).remaining, before, 'the 2 units of this window stay counted');
  });

  test('reservation (sliding-log): a give-back one window after the reserve is dropped', async () => {
    const l = ctx.limiter({ limit: 10, window: 1000, algorithm: 'sliding-log' });
    const r = await l.reserve('k', 6, { ttl: '5s' });
    clock.advance(999);
    const inTime = await l.reserve('k', 3, { ttl: '5s' });
    assert.deepEqual(await inTime.commit(2), { status: 'settled', charged: 2 });
    clock.advance(1);
    assert.equal((await l.peek('k')).remaining, 8, 'the 6 left the log');
    assert.deepEqual(await r.commit(0), { status: 'settled', charged: 6 });
    assert.equal((await l.peek('k')).remaining, 8, 'the later units stay counted');
  });

  test('reservation (token-bucket): the give-back lands whenever the bucket still owes it, and only what it owes', async () => {
    const l = ctx.limiter({ limit: 10, window: 1000, algorithm: 'token-bucket' });
    await l.consume('k', 4);
    const r = await l.reserve('k', 6, { ttl: '5s' });
    clock.advance(300); // 3 tokens back
    assert.equal((await l.consume('k', 3)).remaining, 0);
    // Had 1 been reserved, the bucket would owe 4 + 1 − 3 + 3 = 5 tokens now: 5 come back.
    assert.deepEqual(await r.commit(1), { status: 'settled', charged: 1 });
    assert.equal((await l.peek('k')).remaining, 5);

    const m = ctx.limiter({ limit: 10, window: 1000, algorithm: 'token-bucket' });
    const s = await m.reserve('k', 6, { ttl: '5s' });
    clock.advance(400); // had 1 been reserved, the bucket would have been full from 100 ms on
    assert.equal((await m.consume('k', 4)).remaining, 4);
    // Had 1 been reserved, the bucket would owe 4 tokens (the consume): 2 of the 5 may come back, not the 3
    // of refill a full bucket would have lost. The rule errs early by under a millisecond, so 1 or 2.
    const settled = await s.commit(1);
    assert.equal(settled.status, 'settled');
    assert.ok(settled.charged === 4 || settled.charged === 5, `charged ${settled.charged}`);
    assert.equal((await m.peek('k')).remaining, 10 - settled.charged, 'never more generous than reserving 1 would have been');
  });
}
