// A route's several policies on one store, on real servers: a refusal spends nothing (no give-back), lists the refusing policy first, and a failing combined step fails as one.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../../src/stores/memory.js';
import type { Store } from '../../../src/stores/store.js';
import type { Operation, Outcome } from '../../../src/core/policy.js';
import { get, readIetf } from './http.js';
import type { Harness, ServerSpec } from './suite.js';

/** Starts `spec` on the harness's framework, runs `fn` against its URL and closes the server whatever happens. */
export async function withServer(h: Harness, spec: ServerSpec, fn: (url: string) => Promise<void>): Promise<void> {
  const server = await h.start(spec);
  try {
    await fn(server.url);
  } finally {
    await server.close();
  }
}

/** A store whose single operations work but whose all-or-nothing step fails, as one that lost its connection would. */
class BrokenComposites implements Store {
  readonly name = 'broken-composites';
  private readonly inner = new MemoryStore({ sweepIntervalMs: 0 });
  apply(operation: Operation): Promise<Outcome> {
    return this.inner.apply(operation);
  }
  consumeAll(): Promise<Outcome[]> {
    return Promise.reject(new Error('connection lost'));
  }
}

/** Counts the give-backs a limiter is asked for: an all-or-nothing refusal needs none. */
function countRewards(limiter: RateLimiter): { calls: number } {
  const seen = { calls: 0 };
  const reward = limiter.reward.bind(limiter);
  limiter.reward = (key, amount) => {
    seen.calls++;
    return reward(key, amount);
  };
  return seen;
}

/** Registers the several-policies tests for `h`. */
export function atomicPoliciesSuite(h: Harness): void {
  describe(`${h.name}: several policies, all or nothing`, () => {
    it('a refusal by the daily policy spends nothing of the per-second policy', async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const perSecond = new RateLimiter({ limit: 5, window: '1s', store });
      const daily = new RateLimiter({ limit: 2, window: '1d', store });
      const rewards = [countRewards(perSecond), countRewards(daily)];
      const spec = {
        global: {
          limiter: [
            { limiter: perSecond, name: 'per-second' },
            { limiter: daily, name: 'daily' },
          ],
        },
      };
      await withServer(h, spec, async (url) => {
        assert.equal((await get(`${url}/x`)).status, 200);
        assert.equal((await get(`${url}/x`)).status, 200);
        const refused = await get(`${url}/x`);
        assert.equal(refused.status, 429);
        assert.deepEqual(JSON.parse(refused.body)['violated-policies'], ['daily']);
        const fields = readIetf(refused.headers);
        assert.deepEqual([...fields.keys()], ['per-second', 'daily'], 'RateLimit lists every policy');
        assert.equal(fields.get('daily')!.r, 0);
        assert.ok(Number(refused.headers['retry-after']) > 60, 'Retry-After follows the refusing daily policy');
        const key = '127.0.0.1';
        // Two admitted requests in the last second at most: 5 - 2 left, whatever the refused one did.
        const left = (await perSecond.peek(key)).remaining;
        assert.ok(left >= 3, `the per-second policy has ${left} left: the refusal spent nothing there`);
        assert.equal((await daily.peek(key)).remaining, 0);
        assert.deepEqual(
          rewards.map((r) => r.calls),
          [0, 0],
          'nothing was spent, so nothing is given back',
        );
      });
    });

    it('a refusal by the store lists every policy, the refusing one first; one by the in-memory block lists that one alone, as on Redis', async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const strict = new RateLimiter({ limit: 1, window: '1m', store, prefix: 'strict', blockDuration: '1h', inMemoryBlock: true });
      const loose = new RateLimiter({ limit: 100, window: '1m', store, prefix: 'loose' });
      const spec = {
        global: {
          limiter: [
            { limiter: loose, name: 'loose' },
            { limiter: strict, name: 'strict' },
          ],
        },
      };
      await withServer(h, spec, async (url) => {
        assert.equal((await get(`${url}/x`)).status, 200);
        const refused = await get(`${url}/x`);
        assert.equal(refused.status, 429);
        assert.deepEqual([...readIetf(refused.headers).keys()], ['loose', 'strict'], 'RateLimit-Policy in the route order');
        assert.match(
          String(refused.headers['ratelimit']),
          /^"strict";r=0;t=\d+, "loose";r=99;t=\d+$/,
          'RateLimit: the refusing policy first',
        );
        assert.equal(readIetf(refused.headers).get('loose')!.r, 99);
        const blocked = await get(`${url}/x`);
        assert.equal(blocked.status, 429);
        assert.deepEqual([...readIetf(blocked.headers).keys()], ['strict']);
        assert.deepEqual(JSON.parse(blocked.body)['violated-policies'], ['strict']);
        assert.equal((await loose.peek('127.0.0.1')).remaining, 99);
      });
    });

    it('a store that fails the combined step fails it as one: 503 by default, passed with onStoreError: "pass", nothing spent', async () => {
      const store = new BrokenComposites();
      const a = new RateLimiter({ limit: 5, window: '1m', store, prefix: 'a', breaker: false });
      const b = new RateLimiter({ limit: 6, window: '1m', store, prefix: 'b', breaker: false });
      const errors: unknown[] = [];
      const onError = (error: unknown): void => void errors.push(error);
      await withServer(h, { global: { limiter: [a, b], onError } }, async (url) => {
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 503);
        assert.equal(reply.headers['ratelimit'], undefined, 'no policy answered, so none is reported');
      });
      await withServer(h, { global: { limiter: [a, b], onError, onStoreError: 'pass' } }, async (url) => {
        assert.equal((await get(`${url}/x`)).status, 200);
      });
      assert.equal(errors.length, 2, 'onError is told once per request, not once per policy');
      assert.equal((await a.peek('127.0.0.1')).remaining, 5);
      assert.equal((await b.peek('127.0.0.1')).remaining, 6);
    });
  });
}
