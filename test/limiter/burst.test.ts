// The token bucket's burst and initialTokens options: the typed errors of each bad value, the policy they make, the default prefix, the decision's quota and window, and the IETF fields they give.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock, MemoryStore, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { rateLimitHeaders } from '../../src/http/headers.js';
import { decodePolicy, encodePolicy } from '../../src/stores/cluster/protocol.js';
import { overridePolicy } from '../../src/limiter/overrides.js';

const bucket = (o: Partial<RateLimiterOptions>): RateLimiter =>
  new RateLimiter({ algorithm: 'token-bucket', limit: 10, window: '1s', store: new MemoryStore({ sweepIntervalMs: 0 }), ...o });

describe('token bucket burst and initialTokens', () => {
  it('refuses a burst below 1, not whole or not a number, with FLOODGATE_INVALID_BURST', () => {
    for (const burst of [0, -5, 2.5, NaN, Infinity, '50', true]) {
      assert.throws(() => bucket({ burst: burst as number }), { code: 'FLOODGATE_INVALID_BURST' }, String(burst));
    }
    assert.throws(() => bucket({ burst: 0 }), /burst must be a whole number of at least 1 \(the most tokens the bucket holds\); got 0\./);
  });

  it('refuses burst and initialTokens on the other algorithms, a calendar window included', () => {
    for (const algorithm of ['fixed-window', 'sliding-window', 'sliding-log'] as const) {
      assert.throws(() => bucket({ algorithm, burst: 50 }), {
        code: 'FLOODGATE_INVALID_BURST',
        message: new RegExp(`"${algorithm}" admits`),
      });
      assert.throws(() => bucket({ algorithm, initialTokens: 0 }), { code: 'FLOODGATE_INVALID_INITIAL_TOKENS' });
    }
    assert.throws(() => bucket({ algorithm: undefined, burst: 50 }), { code: 'FLOODGATE_INVALID_BURST' });
    assert.throws(() => new RateLimiter({ limit: 10, window: { calendar: 'day', timeZone: 'UTC' }, burst: 50 }), {
      code: 'FLOODGATE_INVALID_BURST',
    });
  });

  it('refuses initialTokens outside 0..burst, or not whole, with FLOODGATE_INVALID_INITIAL_TOKENS', () => {
    for (const initialTokens of [-1, 51, 1.5, '3']) {
      assert.throws(() => bucket({ burst: 50, initialTokens: initialTokens as number }), { code: 'FLOODGATE_INVALID_INITIAL_TOKENS' });
    }
    // Without a burst the bucket is the limit's size.
    assert.throws(() => bucket({ initialTokens: 11 }), /initialTokens must be a whole number from 0 to the burst \(10\); got 11\./);
  });

  it('refuses burst × window past 2^50 with FLOODGATE_LIMIT_TOO_LARGE', () => {
    assert.throws(() => bucket({ window: '1d', burst: 2 ** 30 }), { code: 'FLOODGATE_LIMIT_TOO_LARGE' });
  });

  it('keeps only what differs from the defaults in the policy, and names it in the default prefix', () => {
    assert.deepEqual(
      { ...bucket({ burst: 10, initialTokens: 10 }).policy },
      { algorithm: 'token-bucket', limit: 10, windowMs: 1000, blockMs: 0 },
    );
    assert.equal(bucket({ burst: 50 }).policy.burst, 50);
    assert.equal(bucket({ burst: 50, initialTokens: 0 }).policy.initialTokens, 0);
    assert.equal(bucket({ burst: 50, initialTokens: 0 }).prefix, 'fg:token-bucket:10:1000:0:b50:i0');
    assert.equal(bucket({}).prefix, 'fg:token-bucket:10:1000:0');
  });

  it('reports the burst as the quota and the time to refill it as the window, in the decision and the IETF fields', async () => {
    const clock = new ManualClock(1_700_006_400_000);
    const l = bucket({ burst: 50, clock: clock.now, store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }) });
    const d = await l.consume('k', 20);
    assert.deepEqual([d.limit, d.windowMs, d.remaining, d.resetMs], [50, 5000, 30, 2000]);
    const report = {
      name: 'api',
      limit: d.limit,
      windowMs: d.windowMs,
      allowed: true,
      remaining: d.remaining,
      resetMs: d.resetMs,
      retryAfterMs: 0,
    };
    assert.deepEqual(rateLimitHeaders(['ietf'], [report], 0), [
      ['RateLimit-Policy', '"api";q=50;w=5', true],
      ['RateLimit', '"api";r=30;t=2', true],
    ]);
    // A burst that takes a fraction of a second to refill rounds up to whole seconds.
    assert.equal((await bucket({ burst: 15 }).peek('k')).windowMs, 1500);
  });

  it('a cost above the burst could never pass: FLOODGATE_COST_EXCEEDS_LIMIT, even when the limit is larger', async () => {
    await assert.rejects(async () => bucket({ burst: 3 }).consume('k', 4), { code: 'FLOODGATE_COST_EXCEEDS_LIMIT' });
    assert.equal((await bucket({ limit: 2, burst: 5 }).consume('k', 5)).allowed, true);
  });

  it('travels to the cluster primary and back, an override of a bucket included', () => {
    const base = bucket({ burst: 50, initialTokens: 5 }).policy;
    assert.deepEqual(decodePolicy(encodePolicy(base)), base);
    const faster = overridePolicy(base, { limit: 20 });
    assert.deepEqual([faster.limit, faster.burst, faster.initialTokens], [20, 50, 5]);
    assert.deepEqual(decodePolicy(encodePolicy(faster)), faster);
    // A malformed bucket from the wire is refused: initial tokens above the burst, or a bucket on a window.
    assert.equal(decodePolicy([3, 10, 1000, 0, 5, 6]), undefined);
    assert.equal(decodePolicy([0, 10, 1000, 0, 5, 5]), undefined);
  });
});
