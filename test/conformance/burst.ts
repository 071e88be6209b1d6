// Token-bucket burst and initial-token cases of the conformance suite: a bucket larger or smaller than its refill, new keys that start short of full.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { consumeAll, PolicyOverrides, type ManualClock, type RateLimiter, type RateLimiterOptions } from '../../src/index.js';

/** What the suite hands the burst cases. */
export interface BurstContext {
  readonly clock: ManualClock;
  /** A limiter on the store under test, with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store'>): RateLimiter;
}

/** Consumes one unit at a time until refused; returns how many were admitted. */
async function drain(l: RateLimiter, key: string): Promise<number> {
  let n = 0;
  while ((await l.consume(key)).allowed) n++;
  return n;
}

/** Registers the burst cases inside a conformance `describe`. */
export function burstCases(ctx: BurstContext): void {
  const { clock } = ctx;

  test('token bucket burst: 50 at once, then 10 a second, never 50 + 10·t exceeded', async () => {
    const l = ctx.limiter({ algorithm: 'token-bucket', limit: 10, window: '1s', burst: 50 });
    const first = await l.consume('k');
    assert.equal(first.limit, 50);
    assert.equal(first.windowMs, 5000, 'windowMs: the time to refill the whole burst');
    assert.equal(first.remaining, 49);
    assert.equal(first.resetMs, 100);
    assert.equal(await drain(l, 'k'), 49);
    const refused = await l.consume('k', 3);
    assert.equal(refused.allowed, false);
    assert.equal(refused.retryAfterMs, 300, 'three tokens at 10 a second');
    assert.equal(refused.resetMs, 5000);
    clock.advance(1000);
    assert.equal(await drain(l, 'k'), 10);
    clock.advance(60_000);
    assert.equal(await drain(l, 'k'), 50, 'refilled to the burst, no further');
  });

  test('token bucket burst below the limit: 3 at once, refilled at 10 a second', async () => {
    const l = ctx.limiter({ algorithm: 'token-bucket', limit: 10, window: '1s', burst: 3 });
    assert.equal(await drain(l, 'k'), 3);
    clock.advance(100);
    assert.equal(await drain(l, 'k'), 1);
    clock.advance(10_000);
    assert.equal(await drain(l, 'k'), 3);
    await assert.rejects(async () => l.consume('k', 4), { code: 'FLOODGATE_COST_EXCEEDS_LIMIT' });
  });

  test('token bucket initialTokens 0: a new key earns its first unit, a refused consume starts its refill', async () => {
    const l = ctx.limiter({ algorithm: 'token-bucket', limit: 2, window: '1s', burst: 4, initialTokens: 0 });
    const first = await l.consume('k');
    assert.equal(first.allowed, false);
    assert.equal(first.remaining, 0);
    assert.equal(first.retryAfterMs, 500);
    clock.advance(500);
    assert.equal(await drain(l, 'k'), 1, 'the bucket began at the refused consume');
    clock.advance(1999);
    assert.equal(await drain(l, 'k'), 3, 'refilled towards the burst at the rate');
    // Full again 2 s after it was emptied, the key is forgotten: then it is new, and starts empty.
    clock.advance(10_000);
    assert.equal(await drain(l, 'k'), 0);
  });

  test('token bucket initialTokens: each new key starts with them, and a key forgotten when full starts anew', async () => {
    const l = ctx.limiter({ algorithm: 'token-bucket', limit: 3, window: '1s', burst: 6, initialTokens: 2 });
    assert.equal((await l.peek('a')).remaining, 2);
    assert.equal(await drain(l, 'a'), 2);
    assert.equal(await drain(l, 'b'), 2);
    clock.advance(1000);
    assert.equal(await drain(l, 'a'), 3);
    // Full again after 2 s and forgotten: the key starts with its initial tokens again.
    clock.advance(2000);
    assert.equal(await drain(l, 'a'), 2);
  });

  test('token bucket burst under an override: the override changes the rate, the burst stays', async () => {
    const overrides = new PolicyOverrides({ fast: { limit: 20 } });
    const l = ctx.limiter({ algorithm: 'token-bucket', limit: 10, window: '1s', burst: 30, overrides });
    assert.equal(await drain(l, 'fast'), 30);
    clock.advance(100);
    assert.equal(await drain(l, 'fast'), 2, '20 a second');
    assert.equal(await drain(l, 'slow'), 30);
    clock.advance(100);
    assert.equal(await drain(l, 'slow'), 1, '10 a second');
  });

  test('token bucket burst in a composite: each part keeps its own bucket', async () => {
    const burst = ctx.limiter({ algorithm: 'token-bucket', limit: 1, window: '1s', burst: 5, initialTokens: 4 });
    const daily = ctx.limiter({ limit: 100, window: '1d' });
    // A hash tag in the key keeps both parts in one Redis Cluster slot.
    const key = `{burst:${process.pid}}k`;
    const both = () =>
      consumeAll([
        { limiter: burst, key },
        { limiter: daily, key },
      ]);
    let n = 0;
    while ((await both()).allowed) n++;
    assert.equal(n, 4);
    assert.equal((await daily.peek(key)).remaining, 96);
    clock.advance(1000);
    const d = await both();
    assert.equal(d.allowed, true);
    assert.equal(d.parts[0]?.limit, 5);
    clock.advance(10_000);
    n = 0;
    while ((await both()).allowed) n++;
    assert.equal(n, 4, 'forgotten when full: a new bucket of 4');
  });
}
