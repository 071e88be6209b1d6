// retryAfterJitter and the middleware's shadow option without a server: typed errors for bad values, and a Retry-After never before the true wait.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import { ConcurrencyLimiter } from '../../src/limiter/concurrency-limiter.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { ManualClock } from '../../src/core/clock.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { HttpLimiter } from '../../src/http/http-limiter.js';
import type { HttpOutcome, HttpRateLimitOptions, RequestView } from '../../src/http/types.js';
import { forgetWarnings } from '../../src/core/warnings.js';
import { captureWarnings } from './support/warnings.js';

const adapter = { owner: 'test', frameworkIp: false };
const build = (options: Record<string, unknown>): HttpLimiter<unknown> =>
  new HttpLimiter<unknown>(options as unknown as HttpRateLimitOptions<unknown>, adapter);
const view: RequestView<unknown> = { raw: {}, socketAddress: '192.0.2.1', headers: {}, method: 'GET', path: '/' };
const header = (outcome: HttpOutcome, name: string): string | undefined =>
  outcome.action === 'error' ? undefined : outcome.headers.find(([n]) => n === name)?.[1];

describe('retryAfterJitter', () => {
  it('bad values are typed errors', () => {
    const limiter = new RateLimiter({ limit: 1, window: '1m' });
    const cases: Array<[unknown, string]> = [
      [true, ErrorCode.INVALID_DURATION],
      ['2 seconds', ErrorCode.INVALID_DURATION],
      [-1000, ErrorCode.INVALID_DURATION],
      [0, ErrorCode.INVALID_DURATION],
      ['2h', ErrorCode.INVALID_DURATION],
      [{ random: Math.random }, ErrorCode.INVALID_OPTIONS],
      [{ max: '2s', random: 0.5 }, ErrorCode.INVALID_OPTIONS],
      [{ max: '2s', seed: 1 }, ErrorCode.UNKNOWN_OPTION],
    ];
    for (const [value, code] of cases) {
      assert.throws(() => build({ limiter, retryAfterJitter: value }), { code }, JSON.stringify(value));
    }
    // Off: unset or false.
    build({ limiter, retryAfterJitter: false });
  });

  it('Retry-After is the true wait rounded up plus at most the jitter, whole seconds, over the whole range of draws', () => {
    const clock = new ManualClock(1_000_000);
    for (const r of [0, 0.1, 0.5, 0.999999]) {
      const limiter = new RateLimiter({ limit: 1, window: '10s', clock: clock.now, store: new MemoryStore({ clock: clock.now }) });
      const http = build({ limiter, retryAfterJitter: { max: '3s', random: () => r } });
      assert.equal((http.decide(view) as HttpOutcome).action, 'continue');
      clock.advance(2500); // 7.5 s left: the true Retry-After is 8
      const refused = http.decide(view) as HttpOutcome;
      const seconds = Number(header(refused, 'Retry-After'));
      assert.equal(seconds, Math.ceil((7500 + r * 3000) / 1000), `draw ${r}`);
      assert.ok(seconds >= 8 && seconds <= 11);
    }
  });

  it('a random source that breaks its contract is reported, not turned into a Retry-After', () => {
    const limiter = new RateLimiter({ limit: 1, window: '10s' });
    const http = build({ limiter, retryAfterJitter: { max: '3s', random: () => 1 } });
    http.decide(view);
    const outcome = http.decide(view) as HttpOutcome;
    assert.equal(outcome.action, 'error');
    assert.equal((outcome as { error: { code: string } }).error.code, ErrorCode.INVALID_OPTIONS);
  });
});

describe('the middleware shadow option', () => {
  it('bad values and conflicts are typed errors', () => {
    const limiter = new RateLimiter({ limit: 1, window: '1m' });
    assert.throws(() => build({ limiter, shadow: 'on' }), { code: ErrorCode.INVALID_OPTIONS });
    assert.throws(() => build({ limiter, dryRun: true }), { code: ErrorCode.UNKNOWN_OPTION });
    const waiting = new RateLimiter({ limit: 1, window: '1m', wait: { timeout: '1s' } });
    assert.throws(() => build({ limiter: waiting, shadow: true }), { code: ErrorCode.CONFLICTING_OPTIONS, message: /would delay/ });
    const slots = new ConcurrencyLimiter({ limit: 1, wait: { timeout: '1s' } });
    assert.throws(() => build({ limiter, concurrency: slots, shadow: true }), { code: ErrorCode.CONFLICTING_OPTIONS });
  });

  it('FLOODGATE_ON_LIMITED_IN_SHADOW: an onLimited hook on a shadow route, which nothing calls, is warned of once; validate: false silences it', async () => {
    forgetWarnings();
    const limiter = new RateLimiter({ limit: 1, window: '1m' });
    const seen = captureWarnings();
    build({ limiter, shadow: true, onLimited: () => {} });
    build({ limiter, shadow: true, onLimited: () => {} });
    build({ limiter, shadow: false, onLimited: () => {} });
    // Only this warning's: an earlier test's limiters may still be warning of their own.
    const warnings = (await seen.stop()).filter((w) => w.code === 'FLOODGATE_ON_LIMITED_IN_SHADOW');
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['FLOODGATE_ON_LIMITED_IN_SHADOW'],
    );
    assert.match(warnings[0]!.message, /use onDecision: \(req, info\) => \{ if \(info\.shadowLimited\)/);
    forgetWarnings();
    const quiet = captureWarnings();
    build({ limiter, shadow: true, onLimited: () => {}, validate: false });
    assert.deepEqual(
      (await quiet.stop()).filter((w) => w.code === 'FLOODGATE_ON_LIMITED_IN_SHADOW'),
      [],
    );
  });

  it('a would-be refusal goes on with the real RateLimit fields and no Retry-After, decided in memory without a promise', () => {
    const limiter = new RateLimiter({ limit: 1, window: '1m' });
    const http = build({ limiter, shadow: true, retryAfterJitter: '2s' });
    http.decide(view);
    const outcome = http.decide(view) as HttpOutcome;
    assert.equal(outcome.action, 'continue');
    assert.equal(header(outcome, 'Retry-After'), undefined);
    assert.match(header(outcome, 'RateLimit')!, /^"1-per-1m";r=0;t=\d+$/);
    assert.equal((outcome as { info: { shadowLimited?: boolean } }).info.shadowLimited, true);
  });
});
