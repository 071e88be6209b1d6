// Shadow mode (the dry run) and Retry-After jitter through each adapter on real servers: the request goes on, marked, and a client cannot switch either.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { ConcurrencyLimiter } from '../../../src/limiter/concurrency-limiter.js';
import { MemoryStore } from '../../../src/stores/memory.js';
import type { DecisionInfo, RefusalInfo } from '../../../src/http/types.js';
import { get, readIetf } from './http.js';
import { withServer } from './atomic-suite.js';
import type { Harness } from './suite.js';

const store = (): MemoryStore => new MemoryStore({ sweepIntervalMs: 0 });

/** What the catch-all handler echoed of `rateLimit` (see seenRateLimit). */
function seen(headers: Record<string, string | string[] | undefined>): { shadowLimited?: boolean; policies: string[] } {
  return JSON.parse(String(headers['x-seen-rate-limit'])) as { shadowLimited?: boolean; policies: string[] };
}

/** Requests a client might send to turn a dry run off or on: headers and query parameters that name it. */
const TAMPERING: ReadonlyArray<{ path: string; headers: Record<string, string> }> = [
  { path: '/x?shadow=false', headers: {} },
  { path: '/x?shadow=true&dryRun=1', headers: {} },
  { path: '/x', headers: { 'x-floodgate-shadow': 'false', 'floodgate-shadow': '?0' } },
  { path: '/x', headers: { 'x-dry-run': 'true', 'x-shadow': '1', 'ratelimit-policy': '"2-per-1m";q=1000' } },
  { path: '/x', headers: { ratelimit: '"2-per-1m";r=99', 'retry-after': '0' } },
];

/** Registers the shadow-mode and jitter tests for `h`. */
export function shadowSuite(h: Harness): void {
  describe(`${h.name}: shadow mode (dry run)`, () => {
    it('shadow: true on the middleware: every request goes on; past the limit it is marked, with RateLimit r=0 and no Retry-After', async () => {
      const decisions: DecisionInfo[] = [];
      const limited: RefusalInfo[] = [];
      const global = {
        limit: 2,
        window: '1m',
        shadow: true,
        onDecision: (_req: unknown, info: DecisionInfo) => decisions.push(info),
        onLimited: (_req: unknown, info: RefusalInfo) => limited.push(info),
      };
      await withServer(h, { global }, async (url) => {
        const replies = [];
        for (let i = 0; i < 4; i += 1) replies.push(await get(`${url}/x`));
        assert.deepEqual(
          replies.map((r) => r.status),
          [200, 200, 200, 200],
        );
        assert.deepEqual(
          replies.map((r) => seen(r.headers).shadowLimited === true),
          [false, false, true, true],
        );
        for (const r of replies.slice(2)) {
          assert.equal(r.headers['retry-after'], undefined);
          assert.equal(r.body, 'ok');
          const ietf = readIetf(r.headers).get('2-per-1m')!;
          assert.equal(ietf.r, 0, 'the headers describe the real state');
          assert.ok(ietf.t !== undefined && ietf.t > 0 && ietf.t <= 60);
        }
        assert.equal(limited.length, 0, 'nothing was refused, so onLimited is not called');
        assert.deepEqual(
          decisions.map((d) => [d.allowed, d.shadowLimited === true]),
          [
            [true, false],
            [true, false],
            [true, true],
            [true, true],
          ],
        );
        assert.equal(decisions[2]!.policies[0]!.shadowLimited, true);
      });
    });

    it('a RateLimiter with shadow: true in an enforcing route: its would-be refusals go on, another policy still refuses', async () => {
      const s = store();
      const watched = new RateLimiter({ limit: 1, window: '1m', store: s, shadow: true, prefix: 'watched' });
      const enforced = new RateLimiter({ limit: 3, window: '1m', store: s, prefix: 'enforced' });
      const global = {
        limiter: [
          { limiter: watched, name: 'new-limit' },
          { limiter: enforced, name: 'old-limit' },
        ],
      };
      await withServer(h, { global }, async (url) => {
        const replies = [];
        for (let i = 0; i < 4; i += 1) replies.push(await get(`${url}/x`));
        assert.deepEqual(
          replies.map((r) => r.status),
          [200, 200, 200, 429],
        );
        assert.deepEqual(
          replies.slice(0, 3).map((r) => seen(r.headers).shadowLimited === true),
          [false, true, true],
        );
        // The enforced policy counted every admitted request, the shadow one's refusals included.
        assert.equal(readIetf(replies[2]!.headers).get('old-limit')!.r, 0);
        assert.equal(readIetf(replies[2]!.headers).get('new-limit')!.r, 0);
        const problem = JSON.parse(replies[3]!.body) as { 'violated-policies': string[] };
        assert.deepEqual(problem['violated-policies'], ['old-limit']);
        assert.equal((await enforced.peek('127.0.0.1')).remaining, 0);
      });
    });

    it('shadow: true with a concurrency limit: a request with no slot free goes on, holding none', async () => {
      const slots = new ConcurrencyLimiter({ limit: 1, store: store() });
      const held = await slots.acquire('127.0.0.1');
      try {
        await withServer(h, { global: { limit: 10, window: '1m', shadow: true, concurrency: slots } }, async (url) => {
          const reply = await get(`${url}/x`);
          assert.equal(reply.status, 200);
          assert.equal(seen(reply.headers).shadowLimited, true);
          assert.equal(reply.headers['retry-after'], undefined);
        });
      } finally {
        await held.release();
      }
    });

    it("the attacker's view: no header or query parameter turns a dry run off, or an enforced limit into one", async () => {
      await withServer(h, { routes: { '/x': { limit: 2, window: '1m' } } }, async (url) => {
        const got: number[] = [];
        for (const t of TAMPERING) got.push((await get(`${url}${t.path}`, { headers: t.headers })).status);
        assert.deepEqual(got, [200, 200, 429, 429, 429], 'an enforced route stays enforced');
      });
      await withServer(h, { routes: { '/x': { limit: 2, window: '1m', shadow: true } } }, async (url) => {
        const replies = [];
        for (const t of TAMPERING) replies.push(await get(`${url}${t.path}`, { headers: t.headers }));
        assert.deepEqual(
          replies.map((r) => r.status),
          [200, 200, 200, 200, 200],
          'a shadow route stays a dry run',
        );
        assert.ok(replies.every((r) => r.headers['retry-after'] === undefined));
      });
    });
  });

  describe(`${h.name}: Retry-After jitter`, () => {
    it('clients refused together are told different whole seconds, none before the true wait, and the body agrees', async () => {
      // A fixed sequence of draws: 0, 0.25, 0.5, 0.75 and 0.999 of the 4 s jitter.
      const draws = [0, 0.25, 0.5, 0.75, 0.999];
      let n = 0;
      const random = (): number => draws[n++ % draws.length]!;
      const limiter = new RateLimiter({ limit: 1, window: '10s', store: store() });
      const global = { limiter, key: () => 'everyone', retryAfterJitter: { max: '4s', random } };
      await withServer(h, { global }, async (url) => {
        assert.equal((await get(`${url}/x`)).status, 200);
        const refused = [];
        for (let i = 0; i < 5; i += 1) refused.push(await get(`${url}/x`));
        assert.ok(refused.every((r) => r.status === 429));
        const seconds = refused.map((r) => Number(r.headers['retry-after']));
        const t = readIetf(refused[0]!.headers).get('1-per-10s')!.t!;
        for (const [i, s] of seconds.entries()) {
          assert.ok(Number.isInteger(s), `Retry-After ${s} is a whole number`);
          assert.ok(s >= t, `Retry-After ${s} is not before the true wait (t=${t})`);
          assert.ok(s <= t + 4, `Retry-After ${s} is at most the jitter past the true wait (t=${t})`);
          const problem = JSON.parse(refused[i]!.body) as { detail: string };
          assert.match(problem.detail, new RegExp(`retry in ${s} second`));
        }
        assert.ok(new Set(seconds).size >= 3, `spread over several seconds: ${seconds.join(', ')}`);
      });
    });
  });
}
