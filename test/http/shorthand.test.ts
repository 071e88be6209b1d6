/** The limit / window shorthand's refusals: with a limiter too, without a window, a limit function that answers badly or too many distinct limits; and its burst, a token bucket. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { HttpLimiter } from '../../src/http/http-limiter.js';
import type { HttpOutcome } from '../../src/http/types.js';

const config = { owner: 'floodgate/node rateLimit', frameworkIp: false };
const view = (plan: number) => ({
  raw: plan,
  socketAddress: '127.0.0.1',
  headers: {},
  method: 'GET',
  path: '/',
});

describe('limit / window shorthand', () => {
  it('limit with limiter too, or limit without window: refused with what to write', () => {
    assert.throws(
      () => new HttpLimiter({ limit: 5, window: '1m', limiter: new RateLimiter({ limit: 5, window: '1m' }) }, config),
      (e: Error & { code?: string }) =>
        e.code === ErrorCode.CONFLICTING_OPTIONS &&
        e.message ===
          'floodgate/node rateLimit: give either limiter or limit and window (the middleware then builds the RateLimiter), not both.',
    );
    assert.throws(
      () => new HttpLimiter({ limit: 5 }, config),
      (e: Error & { code?: string }) =>
        e.code === ErrorCode.INVALID_OPTIONS &&
        e.message === "floodgate/node rateLimit needs both limit and window, e.g. rateLimit({ limit: 100, window: '15m' }); got no window.",
    );
    assert.throws(
      () => new HttpLimiter({ limit: 0, window: '1m' }, config),
      (e: Error & { code?: string }) => e.code === ErrorCode.INVALID_LIMIT,
    );
    assert.throws(
      () => new HttpLimiter({}, config),
      (e: Error & { code?: string }) =>
        e.code === ErrorCode.INVALID_OPTIONS && /needs a limit, e\.g\. \{ limit: 100, window: '15m' \}/.test(e.message),
    );
  });

  it('a limit function answering a non-number, or more than 100 distinct limits: an error outcome naming the fix', async () => {
    const limiter = new HttpLimiter<number>(
      { limit: (plan) => (plan < 0 ? ('many' as unknown as number) : plan + 1), window: '1m' },
      config,
    );
    const bad = (await limiter.decide(view(-1))) as HttpOutcome & { error?: Error & { code?: string } };
    assert.equal(bad.action, 'error');
    assert.equal(bad.error?.code, ErrorCode.INVALID_LIMIT);
    assert.match(String(bad.error?.message), /the limit function must return a number; got "many"/);
    for (let plan = 0; plan < 100; plan += 1) assert.equal((await limiter.decide(view(plan))).action, 'continue');
    const tooMany = (await limiter.decide(view(100))) as HttpOutcome & { error?: Error };
    assert.equal(tooMany.action, 'error');
    assert.match(String(tooMany.error?.message), /more than 100 distinct limits; build one RateLimiter per plan/);
  });

  it('burst makes the shorthand a token bucket: the burst at once, then the rate; q=burst, w=seconds to refill it', async () => {
    const limiter = new HttpLimiter<number>({ limit: 1, window: '1m', burst: 3 }, config);
    const actions: string[] = [];
    let last: HttpOutcome | undefined;
    for (let i = 0; i < 4; i++) {
      last = await limiter.decide(view(0));
      actions.push(last.action);
    }
    assert.deepEqual(actions, ['continue', 'continue', 'continue', 'respond']);
    assert.ok(last !== undefined && last.action === 'respond');
    const policy = last.headers.find(([name]) => name === 'RateLimit-Policy');
    assert.equal(policy?.[1], '"1-per-1m";q=3;w=180');
    assert.throws(
      () => new HttpLimiter({ limit: 1, window: '1m', burst: 0 }, config),
      (e: Error & { code?: string }) => e.code === ErrorCode.INVALID_BURST,
    );
    assert.throws(
      () => new HttpLimiter({ burst: 3, limiter: new RateLimiter({ limit: 5, window: '1m' }) }, config),
      (e: Error & { code?: string }) => e.code === ErrorCode.CONFLICTING_OPTIONS,
    );
  });
});
