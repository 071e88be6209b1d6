// A route's several policies on real servers: one all-or-nothing decision on their common store, per-policy keys, the fields and body naming the refusing policy, and the give-back path (with its warning) across stores.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RateLimiter } from '../../../src/limiter.js';
import { MemoryStore } from '../../../src/stores/memory.js';
import type { Store } from '../../../src/stores/store.js';
import type { Operation, Outcome } from '../../../src/policy.js';
import type { DecisionInfo } from '../../../src/http/types.js';
import { forgetWarnings, WarningCode } from '../../../src/warnings.js';
import { get, readIetf } from './http.js';
import { captureWarnings } from './warnings.js';
import type { Harness, ServerSpec } from './suite.js';

async function withServer(h: Harness, spec: ServerSpec, fn: (url: string) => Promise<void>): Promise<void> {
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

const header = (req: unknown, name: string): string => {
  const raw = req as { headers?: Record<string, string | string[] | undefined>; req?: { headers: Record<string, string> } };
  const headers = raw.headers ?? raw.req?.headers ?? {};
  const value = headers[name];
  return typeof value === 'string' ? value : '';
};

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

    it('one route counts per user, per organisation and for everyone in one decision, each policy reported with its key', async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const perUser = new RateLimiter({ limit: 2, window: '1m', store, prefix: 'user' });
      const perOrg = new RateLimiter({ limit: 3, window: '1m', store, prefix: 'org' });
      const everyone = new RateLimiter({ limit: 4, window: '1m', store, prefix: 'all' });
      const decided: DecisionInfo[] = [];
      const spec = {
        global: {
          key: (req: unknown) => `user:${header(req, 'x-user')}`,
          limiter: [
            { limiter: perUser, name: 'per-user' },
            { limiter: perOrg, name: 'per-org', key: (req: unknown) => `org:${header(req, 'x-org')}` },
            { limiter: everyone, name: 'global', key: () => 'all' },
          ],
          onDecision: (_req: unknown, info: DecisionInfo) => decided.push(info),
        },
      };
      const as = (user: string, org: string): Promise<{ status: number; body: string }> =>
        get(`${url}/x`, { headers: { 'x-user': user, 'x-org': org } });
      let url = '';
      await withServer(h, spec, async (base) => {
        url = base;
        assert.equal((await as('ann', 'acme')).status, 200);
        assert.equal(decided[0]!.key, 'user:ann');
        assert.deepEqual(
          decided[0]!.policies.map((p) => [p.name, p.key, p.remaining]),
          [
            ['per-user', undefined, 1], // counted under the route's key, decided[0].key
            ['per-org', 'org:acme', 2],
            ['global', 'all', 3],
          ],
        );
        assert.equal((await as('ann', 'acme')).status, 200);
        const user = await as('ann', 'acme');
        assert.equal(user.status, 429);
        assert.deepEqual(JSON.parse(user.body)['violated-policies'], ['per-user']);
        assert.equal((await as('bob', 'acme')).status, 200);
        const org = await as('cy', 'acme');
        assert.equal(org.status, 429);
        assert.deepEqual(JSON.parse(org.body)['violated-policies'], ['per-org']);
        assert.equal((await perUser.peek('user:cy')).remaining, 2, 'the org refusal spent nothing of the user');
        assert.equal((await everyone.peek('all')).remaining, 1, 'refusals spent nothing of the global counter');
        assert.equal((await as('dee', 'zeta')).status, 200);
        const all = await as('eve', 'zeta');
        assert.equal(all.status, 429);
        assert.deepEqual(JSON.parse(all.body)['violated-policies'], ['global']);
        assert.equal((await perOrg.peek('org:zeta')).remaining, 2);
      });
    });

    it('a refusal by an in-memory block still reports the other policies as the memory store reads them, spending nothing', async () => {
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
        assert.equal((await get(`${url}/x`)).status, 429);
        const blocked = await get(`${url}/x`);
        assert.equal(blocked.status, 429);
        assert.deepEqual([...readIetf(blocked.headers).keys()], ['loose', 'strict']);
        assert.equal(readIetf(blocked.headers).get('loose')!.r, 99);
        assert.deepEqual(JSON.parse(blocked.body)['violated-policies'], ['strict']);
        assert.equal((await loose.peek('127.0.0.1')).remaining, 99);
      });
    });

    it('policies on different stores: a POLICIES_NOT_ATOMIC warning once, and the refusal still gives back what the others took', async () => {
      forgetWarnings();
      const warnings = captureWarnings();
      const fast = new RateLimiter({ limit: 5, window: '1m', store: new MemoryStore({ sweepIntervalMs: 0 }) });
      const slow = new RateLimiter({ limit: 1, window: '1h', store: new MemoryStore({ sweepIntervalMs: 0 }) });
      const names = [`fast ${h.name}`, `slow ${h.name}`];
      const spec = {
        global: {
          limiter: [
            { limiter: fast, name: names[0] },
            { limiter: slow, name: names[1] },
          ],
        },
      };
      await withServer(h, spec, async (url) => {
        assert.equal((await get(`${url}/x`)).status, 200);
        const refused = await get(`${url}/x`);
        assert.equal(refused.status, 429);
        assert.equal(readIetf(refused.headers).get(names[0]!)!.r, 4, 'the fast policy got its unit back');
        assert.equal((await get(`${url}/x`)).status, 429);
        assert.equal((await fast.peek('127.0.0.1')).remaining, 4);
      });
      const seen = (await warnings.stop()).filter((w) => w.code === WarningCode.POLICIES_NOT_ATOMIC);
      assert.equal(seen.length, 1);
      assert.equal(
        seen[0]!.message,
        `policies ${names.map((n) => JSON.stringify(n)).join(', ')} of one route are on different stores, so they cannot be decided all or nothing: each is consumed and given back when another refuses, and a request may be refused on units another request held for a moment. Put the route's limiters on one store (the same MemoryStore, RedisStore, …) to decide them in one atomic step.`,
      );
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

    it('skipFailedRequests gives each policy its units back under its own key', async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const perUser = new RateLimiter({ limit: 5, window: '1m', store, prefix: 'u' });
      const perOrg = new RateLimiter({ limit: 9, window: '1m', store, prefix: 'o' });
      const spec = {
        global: {
          key: () => 'user-1',
          limiter: [perUser, { limiter: perOrg, key: () => 'org-1' }],
          skipFailedRequests: true,
        },
      };
      await withServer(h, spec, async (url) => {
        assert.equal((await get(`${url}/x`)).status, 200);
        assert.equal((await get(`${url}/x`, { headers: { 'x-answer-status': '500' } })).status, 500);
        // The give-back runs once the response ends; let it land.
        for (let i = 0; i < 50 && (await perOrg.peek('org-1')).remaining !== 8; i++) await new Promise((r) => setTimeout(r, 10));
        assert.equal((await perUser.peek('user-1')).remaining, 4);
        assert.equal((await perOrg.peek('org-1')).remaining, 8);
      });
    });

    it("a policy key function's bad answer is handled as the route key's is", async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const a = new RateLimiter({ limit: 5, window: '1m', store, prefix: 'a' });
      const one = { limiter: a, name: 'a' };
      const b = new RateLimiter({ limit: 6, window: '1m', store, prefix: 'b' });
      const errors: unknown[] = [];
      const onError = (error: unknown): void => void errors.push(error);
      let routeStatus = 0;
      await withServer(h, { global: { limiter: [one, b], key: () => '', onError } }, async (url) => {
        routeStatus = (await get(`${url}/x`)).status;
      });
      await withServer(h, { global: { limiter: [one, { limiter: b, key: () => '' }], onError } }, async (url) => {
        assert.equal((await get(`${url}/x`)).status, routeStatus);
      });
      assert.notEqual(routeStatus, 200);
      assert.equal((await a.peek('127.0.0.1')).remaining, 5, 'nothing was spent for the failed request');
    });
  });
}
