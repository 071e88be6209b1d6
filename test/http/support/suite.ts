// The behaviour every HTTP adapter must show, run by each framework's test file against real servers on ephemeral ports.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../../src/stores/memory.js';
import { QUOTA_EXCEEDED_TYPE } from '../../../src/http/refusal.js';
import type { ClientInfo, DecisionInfo, RateLimitInfo } from '../../../src/http/types.js';
import { RedisStore } from '../../../src/stores/redis/index.js';
import type { Store } from '../../../src/stores/store.js';
import { redisFixture } from '../../support/redis-clients.js';
import { forgetWarnings } from '../../../src/core/warnings.js';
import { captureWarnings } from './warnings.js';
import { FailingStore, HangingStore, get, readDraft6, readDraft7, readIetf, statuses } from './http.js';
import { atomicPoliciesSuite, withServer } from './atomic-suite.js';
import { shadowSuite } from './shadow-suite.js';

/** A server started by a harness. */
export interface RunningServer {
  /** Base URL, e.g. http://127.0.0.1:40123 */
  url: string;
  close(): Promise<void>;
}

/** What to mount: one middleware for all routes, and/or per-route middleware. Every other path answers 200 "ok". */
export interface ServerSpec {
  /** Options of a middleware that covers every route. */
  global?: Record<string, unknown>;
  /** Per-route options (GET only). */
  routes?: Record<string, Record<string, unknown>>;
  /** Listen address; default 127.0.0.1. */
  host?: string;
}

/** How one framework (and version) starts a server with floodgate mounted. */
export interface Harness {
  name: string;
  start(spec: ServerSpec): Promise<RunningServer>;
}

const limiter = (limit: number, window: string | number = '1m', extra: Record<string, unknown> = {}): RateLimiter =>
  new RateLimiter({ limit, window, store: new MemoryStore({ sweepIntervalMs: 0 }), ...extra });

/** The status a harness's catch-all handler answers: `x-answer-status` when the request sets it, else 200. */
export function answerStatus(headers: Record<string, string | string[] | undefined>): number {
  const asked = Number(headers['x-answer-status']);
  return Number.isInteger(asked) && asked >= 200 ? asked : 200;
}

/** What a harness's catch-all handler echoes of the decision it was handed, in `x-seen-rate-limit`. */
export function seenRateLimit(info: RateLimitInfo | undefined): string {
  if (info === undefined) return 'none';
  return JSON.stringify({
    key: info.key,
    cost: info.cost,
    remaining: info.remaining,
    resetInWindow: info.resetMs > 0 && info.resetMs <= 60_000,
    policies: info.policies.map((p) => `${p.name}:${p.remaining}`),
    // Only when set: the other tests compare the whole object.
    ...(info.shadowLimited === true ? { shadowLimited: true } : {}),
  });
}

/** Registers the shared adapter tests for `h`. */
export function adapterSuite(h: Harness): void {
  atomicPoliciesSuite(h);
  shadowSuite(h);
  describe(`${h.name}: shared behaviour`, () => {
    it('admits up to the limit, then answers 429 with Retry-After and a problem body', async () => {
      const limited: unknown[] = [];
      await withServer(
        h,
        { global: { limiter: limiter(2), onLimited: (_req: unknown, info: unknown) => limited.push(info) } },
        async (url) => {
          assert.equal((await get(`${url}/x`)).status, 200);
          const second = await get(`${url}/x`);
          assert.equal(second.status, 200);
          assert.equal(second.body, 'ok');
          const third = await get(`${url}/x`);
          assert.equal(third.status, 429);
          const retryAfter = Number(third.headers['retry-after']);
          assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${third.headers['retry-after']}`);
          // Exactly: RFC 8259 defines no charset parameter for JSON, and every adapter must send the same field.
          assert.equal(third.headers['content-type'], 'application/problem+json');
          const problem = JSON.parse(third.body) as Record<string, unknown>;
          assert.equal(problem.type, QUOTA_EXCEEDED_TYPE);
          assert.equal(problem.status, 429);
          assert.deepEqual(problem['violated-policies'], ['2-per-1m']);
          const ietf = readIetf(third.headers).get('2-per-1m')!;
          assert.equal(ietf.r, 0);
          assert.ok(ietf.t !== undefined && ietf.t <= retryAfter, 'Retry-After is not earlier than the end of the effective window');
          assert.equal(limited.length, 1);
        },
      );
    });

    it('sends IETF RateLimit and RateLimit-Policy in the current draft syntax', async () => {
      await withServer(h, { global: { limiter: { limiter: limiter(5, '1m'), name: 'per "minute"' } } }, async (url) => {
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 200);
        const policy = readIetf(reply.headers).get('per "minute"');
        assert.deepEqual(policy, { name: 'per "minute"', q: 5, w: 60, r: 4, t: policy?.t });
        assert.ok(policy!.t! > 0 && policy!.t! <= 60);
        assert.equal(reply.headers['retry-after'], undefined);
      });
    });

    it('sends the draft-7, draft-6 and legacy forms when asked, and none with "none"', async () => {
      await withServer(h, { global: { limiter: limiter(3, '1h'), headers: 'draft-7' } }, async (url) => {
        const d7 = readDraft7((await get(`${url}/x`)).headers);
        assert.equal(d7.limit, 3);
        assert.equal(d7.remaining, 2);
        assert.ok(d7.reset > 0 && d7.reset <= 3600);
        assert.deepEqual(d7.policies, [{ q: 3, w: 3600 }]);
      });
      await withServer(h, { global: { limiter: limiter(3, '1h'), headers: 'draft-6' } }, async (url) => {
        const reply = await get(`${url}/x`);
        const d6 = readDraft6(reply.headers);
        assert.deepEqual({ limit: d6.limit, remaining: d6.remaining }, { limit: 3, remaining: 2 });
        assert.ok(d6.reset > 0 && d6.reset <= 3600);
        assert.equal(reply.headers['ratelimit'], undefined);
      });
      await withServer(h, { global: { limiter: limiter(3, '1h'), headers: ['ietf', 'legacy'] } }, async (url) => {
        const reply = await get(`${url}/x`);
        assert.equal(reply.headers['x-ratelimit-limit'], '3');
        assert.equal(reply.headers['x-ratelimit-remaining'], '2');
        const reset = Number(reply.headers['x-ratelimit-reset']);
        const now = Date.now() / 1000;
        assert.ok(reset > now && reset <= now + 3601, 'X-RateLimit-Reset is a Unix time in seconds');
        assert.equal(readIetf(reply.headers).get('3-per-1h')!.r, 2);
      });
      await withServer(h, { global: { limiter: limiter(1, '1h'), headers: 'none' } }, async (url) => {
        const ok = await get(`${url}/x`);
        assert.equal(ok.headers['ratelimit'], undefined);
        assert.equal(ok.headers['ratelimit-policy'], undefined);
        const refused = await get(`${url}/x`);
        assert.equal(refused.status, 429);
        assert.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After is sent even without rate-limit fields');
      });
    });

    it('identifies clients by an API-key header: missing gives 401 (or 400), keys count separately, long keys are hashed', async () => {
      const keys: string[] = [];
      const onDecision = (_req: unknown, info: DecisionInfo): void => {
        keys.push(info.key);
      };
      await withServer(h, { global: { limiter: limiter(1), key: { header: 'X-Api-Key' }, onDecision } }, async (url) => {
        const missing = await get(`${url}/x`);
        assert.equal(missing.status, 401);
        assert.match(String(missing.headers['www-authenticate']), /^ApiKey /);
        assert.match(JSON.parse(missing.body).detail as string, /x-api-key/);
        assert.equal((await get(`${url}/x`, { headers: { 'x-api-key': 'alice' } })).status, 200);
        assert.equal((await get(`${url}/x`, { headers: { 'x-api-key': 'alice' } })).status, 429);
        assert.equal((await get(`${url}/x`, { headers: { 'x-api-key': 'bob' } })).status, 200);
        const long = 'k'.repeat(5000);
        assert.equal((await get(`${url}/x`, { headers: { 'x-api-key': long } })).status, 200);
        assert.equal((await get(`${url}/x`, { headers: { 'x-api-key': long } })).status, 429);
        assert.deepEqual(keys.slice(0, 3), ['alice', 'alice', 'bob']);
        assert.match(keys[3]!, /^sha256:[A-Za-z0-9_-]{43}$/);
      });
      await withServer(h, { global: { limiter: limiter(1), key: { header: 'x-api-key', missingStatus: 400 } } }, async (url) => {
        const missing = await get(`${url}/x`, { headers: { 'x-api-key': '   ' } });
        assert.equal(missing.status, 400);
        assert.equal(missing.headers['www-authenticate'], undefined);
      });
    });

    it('honours skip, the allow list and the deny list', async () => {
      const spec = {
        limiter: limiter(1),
        key: { header: 'x-api-key' },
        skip: (_req: unknown, client: { path: string }) => client.path === '/health',
        allowList: ['trusted-key', '10.0.0.0/8'],
        denyList: ['banned-key', '127.0.0.1'],
      };
      await withServer(h, { global: spec }, async (url) => {
        // The test client is 127.0.0.1, which is denied, before any key check.
        const denied = await get(`${url}/x`, { headers: { 'x-api-key': 'anyone' } });
        assert.equal(denied.status, 403);
        assert.equal(denied.headers['ratelimit'], undefined);
        assert.deepEqual(await statuses(`${url}/health`, 3), [200, 200, 200]);
      });
      await withServer(h, { global: { ...spec, denyList: ['banned-key'] } }, async (url) => {
        assert.equal((await get(`${url}/x`, { headers: { 'x-api-key': 'banned-key' } })).status, 403);
        assert.deepEqual(await statuses(`${url}/x`, 3, { headers: { 'x-api-key': 'trusted-key' } }), [200, 200, 200]);
        assert.deepEqual(await statuses(`${url}/x`, 2, { headers: { 'x-api-key': 'someone' } }), [200, 429]);
      });
      await withServer(h, { global: { limiter: limiter(1), allowList: ['loopback'] } }, async (url) => {
        const reply = await get(`${url}/x`);
        assert.deepEqual(await statuses(`${url}/x`, 3), [200, 200, 200]);
        assert.equal(reply.headers['ratelimit'], undefined, 'allow-listed requests are not counted or reported');
      });
    });

    it('evaluates several policies together, reports all of them, and refunds when one refuses', async () => {
      const perMinute = limiter(5, '1m');
      const perHour = limiter(2, '1h');
      await withServer(
        h,
        {
          global: {
            limiter: [
              { limiter: perMinute, name: 'burst' },
              { limiter: perHour, name: 'hourly' },
            ],
          },
        },
        async (url) => {
          const first = await get(`${url}/x`);
          const report = readIetf(first.headers);
          assert.deepEqual([...report.keys()], ['burst', 'hourly']);
          assert.deepEqual([report.get('burst')!.q, report.get('burst')!.w, report.get('burst')!.r], [5, 60, 4]);
          assert.deepEqual([report.get('hourly')!.q, report.get('hourly')!.w, report.get('hourly')!.r], [2, 3600, 1]);
          assert.equal((await get(`${url}/x`)).status, 200);
          const refused = await get(`${url}/x`);
          assert.equal(refused.status, 429);
          assert.deepEqual(JSON.parse(refused.body)['violated-policies'], ['hourly']);
          const after = readIetf(refused.headers);
          assert.equal(after.get('hourly')!.r, 0);
          assert.equal(after.get('burst')!.r, 3, 'the burst policy got its unit back');
          assert.ok(Number(refused.headers['retry-after']) > 60, 'Retry-After follows the refusing hourly policy');
          const key = '127.0.0.1';
          assert.equal((await perMinute.peek(key)).remaining, 3, 'a refused request spent nothing');
          assert.equal((await perHour.peek(key)).remaining, 0);
        },
      );
    });

    it('policies on one store: decided all or nothing, so a refusal by one spends nothing of the others', async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const perMinute = new RateLimiter({ store, limit: 5, window: '1m' });
      const perHour = new RateLimiter({ store, limit: 2, window: '1h', algorithm: 'sliding-window' });
      const warnings = captureWarnings();
      await withServer(
        h,
        {
          global: {
            limiter: [
              { limiter: perMinute, name: 'burst' },
              { limiter: perHour, name: 'hourly' },
            ],
          },
        },
        async (url) => {
          assert.deepEqual(await statuses(`${url}/x`, 2), [200, 200]);
          const key = '127.0.0.1';
          for (let i = 0; i < 3; i++) {
            const refused = await get(`${url}/x`);
            assert.equal(refused.status, 429);
            assert.deepEqual(JSON.parse(refused.body)['violated-policies'], ['hourly']);
            const report = readIetf(refused.headers);
            assert.deepEqual([...report.keys()], ['burst', 'hourly']);
            assert.equal(report.get('hourly')!.r, 0);
            assert.equal(report.get('burst')!.r, 3, 'the burst policy was never charged for the refused request');
            assert.equal((await perMinute.peek(key)).remaining, 3);
          }
        },
      );
      assert.deepEqual(
        (await warnings.stop()).map((w) => w.code),
        [],
        'one store: no warning',
      );
    });

    it('policies on different stores: FLOODGATE_POLICIES_NOT_ATOMIC once, and the refund path', async () => {
      forgetWarnings();
      const warnings = captureWarnings();
      const spec = {
        global: {
          limiter: [
            { limiter: limiter(5), name: 'own-store-a' },
            { limiter: limiter(1), name: 'own-store-b' },
          ],
        },
      };
      await withServer(h, spec, async (url) => {
        assert.deepEqual(await statuses(`${url}/x`, 3), [200, 429, 429]);
      });
      const seen = (await warnings.stop()).filter((w) => w.code === 'FLOODGATE_POLICIES_NOT_ATOMIC');
      assert.equal(seen.length, 1);
      assert.match(seen[0]!.message, /policies "own-store-a", "own-store-b" of one route are on different stores/);
    });

    it('applies per-route limits independently', async () => {
      await withServer(h, { routes: { '/a': { limiter: limiter(1) }, '/b': { limiter: limiter(2) } } }, async (url) => {
        assert.deepEqual(await statuses(`${url}/a`, 2), [200, 429]);
        assert.deepEqual(await statuses(`${url}/b`, 3), [200, 200, 429]);
        assert.deepEqual(await statuses(`${url}/other`, 3), [200, 200, 200]);
      });
    });

    it('answers 503 when the store fails, passes when configured, and never hangs', async () => {
      const errors: unknown[] = [];
      const onError = (error: unknown): void => {
        errors.push(error);
      };
      const failing = new FailingStore();
      await withServer(h, { global: { limiter: limiter(5, '1m', { store: failing, breaker: false }), onError } }, async (url) => {
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 503);
        assert.equal(JSON.parse(reply.body).status, 503);
        assert.ok(failing.calls >= 1);
        assert.ok(errors.length >= 1);
      });
      await withServer(
        h,
        { global: { limiter: limiter(5, '1m', { store: new FailingStore(), breaker: false }), onError, onStoreError: 'pass' } },
        async (url) => {
          const reply = await get(`${url}/x`);
          assert.equal(reply.status, 200);
          assert.equal(reply.headers['ratelimit'], undefined, 'no policy answered, so none is reported');
        },
      );
      await withServer(h, { global: { limiter: limiter(5, '1m', { store: new HangingStore() }), onError, timeout: 100 } }, async (url) => {
        const reply = await get(`${url}/x`, { timeoutMs: 3000 });
        assert.equal(reply.status, 503);
        assert.ok(reply.elapsedMs < 2000, `answered in ${reply.elapsedMs} ms`);
      });
      // The limiter's own fault options win over the middleware's: fail-open admits, fail-closed refuses.
      await withServer(
        h,
        { global: { limiter: limiter(5, '1m', { store: new FailingStore(), onStoreFailure: 'fail-open' }), onError } },
        async (url) => {
          assert.equal((await get(`${url}/x`)).status, 200);
        },
      );
      await withServer(
        h,
        { global: { limiter: limiter(5, '1m', { store: new FailingStore(), onStoreFailure: 'fail-closed' }), onError } },
        async (url) => {
          const reply = await get(`${url}/x`);
          assert.equal(reply.status, 429);
          assert.match(JSON.parse(reply.body).type as string, /temporary-reduced-capacity$/);
        },
      );
      // A store failure on one policy refunds the other, so the request spends nothing.
      const healthy = limiter(5);
      await withServer(
        h,
        { global: { limiter: [healthy, limiter(9, '1m', { store: new FailingStore(), breaker: false })], onError } },
        async (url) => {
          assert.equal((await get(`${url}/x`)).status, 503);
          assert.equal((await healthy.peek('127.0.0.1')).remaining, 5);
        },
      );
    });

    it('ignores spoofed X-Forwarded-For unless proxies are trusted', async () => {
      await withServer(h, { global: { limiter: limiter(1) } }, async (url) => {
        assert.equal((await get(`${url}/x`, { headers: { 'x-forwarded-for': '203.0.113.1' } })).status, 200);
        assert.equal(
          (await get(`${url}/x`, { headers: { 'x-forwarded-for': '203.0.113.2' } })).status,
          429,
          'a new XFF does not buy a new quota',
        );
      });
      await withServer(h, { global: { limiter: limiter(1), trustProxy: 1 } }, async (url) => {
        const spoofed = { 'x-forwarded-for': '198.51.100.9, 203.0.113.1' };
        assert.equal((await get(`${url}/x`, { headers: spoofed })).status, 200);
        assert.equal(
          (await get(`${url}/x`, { headers: { 'x-forwarded-for': '1.1.1.1, 203.0.113.1' } })).status,
          429,
          'only the entry the trusted proxy wrote counts',
        );
        assert.equal((await get(`${url}/x`, { headers: { 'x-forwarded-for': '203.0.113.2' } })).status, 200);
      });
      await withServer(
        h,
        { global: { limiter: limiter(1), trustProxy: ['127.0.0.1/32', '10.0.0.0/8'], proxyHeader: 'forwarded' } },
        async (url) => {
          const via = (client: string): { headers: Record<string, string> } => ({ headers: { forwarded: `for=${client}, for=10.1.2.3` } });
          assert.equal((await get(`${url}/x`, via('"[2001:db8::1]:4711"'))).status, 200);
          assert.equal((await get(`${url}/x`, via('"[2001:db8::2]"'))).status, 429, 'same /64');
          assert.equal((await get(`${url}/x`, via('192.0.2.60'))).status, 200);
          assert.equal((await get(`${url}/x`)).status, 200, 'the proxy itself, with no header');
          assert.equal(
            (await get(`${url}/x`, { headers: { 'x-forwarded-for': '192.0.2.77' } })).status,
            429,
            'X-Forwarded-For is not read when Forwarded is configured',
          );
        },
      );
    });

    it('normalises IPv4-mapped socket addresses and groups IPv6 clients by /64', async () => {
      const keys: string[] = [];
      const onDecision = (_req: unknown, info: DecisionInfo): void => {
        keys.push(info.key);
      };
      let server: RunningServer;
      try {
        server = await h.start({ host: '::', global: { limiter: limiter(5), onDecision } });
      } catch {
        return; // no IPv6 on this host
      }
      try {
        const port = new URL(server.url).port;
        await get(`http://127.0.0.1:${port}/x`);
        assert.equal(keys[0], '127.0.0.1', 'a ::ffff:127.0.0.1 socket address counts as 127.0.0.1');
        await get(`http://[::1]:${port}/x`).then(
          () => assert.equal(keys[1], '::/64'),
          () => undefined,
        );
      } finally {
        await server.close();
      }
    });

    it('sends a text body or a custom one when configured', async () => {
      await withServer(h, { global: { limiter: limiter(1), body: 'text' } }, async (url) => {
        await get(`${url}/x`);
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 429);
        assert.equal(reply.headers['content-type'], 'text/plain; charset=utf-8');
        assert.match(reply.body, /^Request quota exceeded; retry in \d+ seconds?\.\n$/);
      });
      const body = (info: { reason: string; retryAfterSeconds?: number }) => ({ error: info.reason, wait: info.retryAfterSeconds });
      await withServer(h, { global: { limiter: limiter(1), body, statusCode: 503 } }, async (url) => {
        await get(`${url}/x`);
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 503);
        assert.equal(reply.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(JSON.parse(reply.body).error, 'limited');
      });
    });

    it('hands a body function whose answer has no JSON text to the framework as a 500', async () => {
      const body = (() => undefined) as unknown as () => object;
      await withServer(h, { global: { limiter: limiter(1), body, onError: () => undefined } }, async (url) => {
        await get(`${url}/x`);
        const reply = await get(`${url}/x`, { timeoutMs: 3000 });
        assert.equal(reply.status, 500);
      });
      const bigint = () => ({ n: 1n });
      await withServer(h, { global: { limiter: limiter(1), body: bigint, onError: () => undefined } }, async (url) => {
        await get(`${url}/x`);
        assert.equal((await get(`${url}/x`, { timeoutMs: 3000 })).status, 500);
      });
    });

    it('hands a throwing key function to the framework as a 500, without hanging', async () => {
      const key = (): string => {
        throw new Error('boom');
      };
      await withServer(h, { global: { limiter: limiter(1), key, onError: () => undefined } }, async (url) => {
        const reply = await get(`${url}/x`, { timeoutMs: 3000 });
        assert.equal(reply.status, 500);
      });
    });
  });

  describe(`${h.name}: per-plan limits (a limiter function of the request)`, () => {
    /**
     * Two plans built once; each request's plan comes from a header (an app would read its session), the key from
     * another. Each user gets their plan's limit and its headers; a user who changes plan counts afresh under the
     * new plan's prefix.
     */
    async function plans(storeFor: () => Store, asynchronous: boolean): Promise<void> {
      const free = new RateLimiter({ limit: 2, window: '1m', prefix: 'plan-free', store: storeFor() });
      const pro = new RateLimiter({ limit: 4, window: '1m', prefix: 'plan-pro', store: storeFor() });
      const pick = (_req: unknown, client: ClientInfo): RateLimiter => (client.headers['x-plan'] === 'pro' ? pro : free);
      const global = {
        key: (_req: unknown, client: ClientInfo) => String(client.headers['x-user']),
        limiter: asynchronous ? async (req: unknown, client: ClientInfo) => pick(req, client) : pick,
      };
      await withServer(h, { global }, async (url) => {
        const as = (user: string, plan: string) => ({ headers: { 'x-user': user, 'x-plan': plan } });
        const ana = [];
        for (let i = 0; i < 3; i += 1) ana.push(await get(`${url}/x`, as('ana', 'free')));
        const bo = [];
        for (let i = 0; i < 5; i += 1) bo.push(await get(`${url}/x`, as('bo', 'pro')));
        assert.deepEqual(
          ana.map((r) => r.status),
          [200, 200, 429],
        );
        assert.deepEqual(
          bo.map((r) => r.status),
          [200, 200, 200, 200, 429],
        );
        assert.equal(readIetf(ana[0]!.headers).get('2-per-1m')?.r, 1);
        assert.equal(readIetf(bo[0]!.headers).get('4-per-1m')?.r, 3);
        assert.equal(readIetf(bo[0]!.headers).has('2-per-1m'), false, 'only the applied policy is listed');
        assert.match(String(ana[2]!.headers['ratelimit-policy']), /^"2-per-1m";q=2;w=60/);
        assert.deepEqual((JSON.parse(bo[4]!.body) as Record<string, unknown>)['violated-policies'], ['4-per-1m']);
        // An upgrade: ana's requests now count against the pro plan's own counter.
        assert.equal((await get(`${url}/x`, as('ana', 'pro'))).status, 200);
      });
    }

    it('memory store: each user gets the limit and headers of their plan', () =>
      plans(() => new MemoryStore({ sweepIntervalMs: 0 }), false));

    describe('on a real Redis', () => {
      let client: Redis;
      redisFixture((open) => {
        client = open();
      });

      it('RedisStore, the plan picked through a promise: each user gets the limit and headers of their plan', async () => {
        const store = new RedisStore({ client });
        try {
          await plans(() => store, true);
        } finally {
          await store.close();
        }
      });
    });

    it('a limiter function that answers something else: a 500 through the framework', async () => {
      await withServer(h, { global: { limiter: () => 'pro' } }, async (url) => {
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 500);
      });
    });
  });

  describe(`${h.name}: per-policy keys (per user + per org + global in one decision)`, () => {
    /**
     * ana and bo are users of org acme (4 a minute between them); each user may do 3, everyone together 100. The
     * org's key comes from a header through a (sync or async) key function, the global one is a constant.
     */
    async function combined(store: Store, asynchronous: boolean): Promise<void> {
      const user = new RateLimiter({ limit: 3, window: '1m', prefix: 'pk-user', store });
      const org = new RateLimiter({ limit: 4, window: '1m', prefix: 'pk-org', store });
      const all = new RateLimiter({ limit: 100, window: '1m', prefix: 'pk-all', store });
      const orgOf = (_req: unknown, client: ClientInfo): string => String(client.headers['x-org']);
      const decisions: DecisionInfo[] = [];
      const global = {
        key: (_req: unknown, client: ClientInfo) => String(client.headers['x-user']),
        limiter: [
          { limiter: user, name: 'user' },
          { limiter: org, name: 'org', key: asynchronous ? async (req: unknown, c: ClientInfo) => orgOf(req, c) : orgOf },
          { limiter: all, name: 'everyone', key: () => 'all' },
        ],
        onDecision: (_req: unknown, info: DecisionInfo) => void decisions.push(info),
      };
      await withServer(h, { global }, async (url) => {
        const as = (u: string, o: string) => ({ headers: { 'x-user': u, 'x-org': o } });
        const ana = [];
        for (let i = 0; i < 3; i += 1) ana.push(await get(`${url}/x`, as('ana', 'acme')));
        assert.deepEqual(
          ana.map((r) => r.status),
          [200, 200, 200],
        );
        const ietf = readIetf(ana[2]!.headers);
        assert.deepEqual([...ietf.keys()], ['user', 'org', 'everyone'], 'every policy is listed');
        assert.deepEqual([ietf.get('user')?.r, ietf.get('org')?.r, ietf.get('everyone')?.r], [0, 1, 97]);
        assert.equal((await get(`${url}/x`, as('bo', 'acme'))).status, 200);
        const refused = await get(`${url}/x`, as('bo', 'acme'));
        assert.equal(refused.status, 429);
        assert.deepEqual((JSON.parse(refused.body) as Record<string, unknown>)['violated-policies'], ['org']);
        assert.deepEqual([...readIetf(refused.headers).keys()], ['user', 'org', 'everyone']);
        // The org refused: bo's own counter and everyone's kept nothing of the refused request.
        assert.equal((await user.peek('bo')).remaining, 2);
        assert.equal((await org.peek('acme')).remaining, 0);
        assert.equal((await all.peek('all')).remaining, 96);
        // Another org is not held back by acme's quota.
        const cy = await get(`${url}/x`, as('cy', 'zeta'));
        assert.equal(cy.status, 200);
        assert.deepEqual(JSON.parse(String(cy.headers['x-seen-rate-limit'])).policies, ['user:2', 'org:3', 'everyone:95']);
        const last = decisions.at(-1)!;
        assert.equal(last.key, 'cy');
        assert.deepEqual(
          last.policies.map((p) => [p.name, p.key]),
          [
            ['user', undefined],
            ['org', 'zeta'],
            ['everyone', 'all'],
          ],
        );
        const refusal = decisions.at(-2)!;
        assert.equal(refusal.allowed, false);
        assert.equal(refusal.policies.find((p) => p.name === 'org')?.key, 'acme');
      });
    }

    it("memory store: a refusal by the org spends nothing of the user's or the global counter", () =>
      combined(new MemoryStore({ sweepIntervalMs: 0 }), false));

    it('skipFailedRequests gives the units back to each policy under its own key', async () => {
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const user = new RateLimiter({ limit: 5, window: '1m', prefix: 'pkr-user', store });
      const org = new RateLimiter({ limit: 5, window: '1m', prefix: 'pkr-org', store });
      const global = {
        key: () => 'ana',
        limiter: [
          { limiter: user, name: 'user' },
          { limiter: org, name: 'org', key: () => 'acme' },
        ],
        skipFailedRequests: true,
      };
      await withServer(h, { global }, async (url) => {
        assert.equal((await get(`${url}/x`, { headers: { 'x-answer-status': '500' } })).status, 500);
        assert.equal((await get(`${url}/x`)).status, 200);
        // The response's finish event may run after the client has its answer.
        for (let i = 0; i < 50 && (await org.peek('acme')).remaining !== 4; i += 1) await new Promise((r) => setTimeout(r, 10));
        assert.equal((await user.peek('ana')).remaining, 4);
        assert.equal((await org.peek('acme')).remaining, 4);
      });
    });

    describe('on a real Redis', () => {
      let client: Redis;
      redisFixture((open) => {
        client = open();
      });

      it('RedisStore, the org key through a promise: one atomic decision over the three keys', async () => {
        const store = new RedisStore({ client });
        try {
          await combined(store, true);
        } finally {
          await store.close();
        }
      });
    });
  });

  describe(`${h.name}: the decision in the handler`, () => {
    it('the handler reads the decision (key, cost, remaining, reset, each policy); a skipped request has none', async () => {
      const minute = { limiter: limiter(3), name: 'minute' };
      const day = { limiter: limiter(10, '1d'), name: 'day' };
      const global = {
        limiter: [minute, day],
        key: (_req: unknown, client: ClientInfo) => String(client.headers['x-user']),
        cost: 2,
        skip: (_req: unknown, client: ClientInfo) => client.headers['x-skip'] === '1',
      };
      await withServer(h, { global }, async (url) => {
        const first = await get(`${url}/x`, { headers: { 'x-user': 'ana' } });
        assert.equal(first.status, 200);
        assert.deepEqual(JSON.parse(String(first.headers['x-seen-rate-limit'])), {
          key: 'ana',
          cost: 2,
          remaining: 1,
          resetInWindow: true,
          policies: ['minute:1', 'day:8'],
        });
        const skipped = await get(`${url}/x`, { headers: { 'x-user': 'ana', 'x-skip': '1' } });
        assert.equal(skipped.headers['x-seen-rate-limit'], 'none');
      });
    });
  });

  describe(`${h.name}: counting by outcome`, () => {
    const answering = (status: number) => ({ headers: { 'x-answer-status': String(status) } });
    const run = async (url: string, status: number, n: number): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < n; i += 1) out.push((await get(`${url}/x`, answering(status))).status);
      return out;
    };

    it('skipFailedRequests: failed responses give their units back, successes count', async () => {
      await withServer(h, { global: { limiter: limiter(2), skipFailedRequests: true } }, async (url) => {
        assert.deepEqual(await run(url, 500, 3), [500, 500, 500]);
        assert.deepEqual(await run(url, 200, 3), [200, 200, 429]);
      });
    });

    it('skipSuccessfulRequests: only failures count (failed logins)', async () => {
      await withServer(h, { global: { limiter: limiter(2), skipSuccessfulRequests: true } }, async (url) => {
        assert.deepEqual(await run(url, 200, 3), [200, 200, 200]);
        assert.deepEqual(await run(url, 401, 3), [401, 401, 429]);
      });
    });

    it('requestWasSuccessful decides what a success is', async () => {
      const global = {
        limiter: limiter(2),
        skipFailedRequests: true,
        requestWasSuccessful: (_req: unknown, status: number) => status !== 503,
      };
      await withServer(h, { global }, async (url) => {
        assert.deepEqual(await run(url, 503, 3), [503, 503, 503]);
        assert.deepEqual(await run(url, 404, 3), [404, 404, 429]);
      });
    });
  });

  describe(`${h.name}: the limit / window shorthand`, () => {
    it('rateLimit({ limit, window }): the middleware builds the limiter', async () => {
      await withServer(h, { global: { limit: 2, window: '1m' } }, async (url) => {
        assert.deepEqual(await statuses(`${url}/x`, 3), [200, 200, 429]);
      });
    });

    it('limit as a function of the request: each plan its own limit and headers', async () => {
      const global = {
        key: (_req: unknown, client: ClientInfo) => String(client.headers['x-user']),
        limit: (_req: unknown, client: ClientInfo) => (client.headers['x-plan'] === 'pro' ? 4 : 2),
        window: '1m',
      };
      await withServer(h, { global }, async (url) => {
        const as = (user: string, plan: string) => ({ headers: { 'x-user': user, 'x-plan': plan } });
        const free: number[] = [];
        for (let i = 0; i < 3; i += 1) free.push((await get(`${url}/x`, as('ana', 'free'))).status);
        const pro: number[] = [];
        for (let i = 0; i < 5; i += 1) pro.push((await get(`${url}/x`, as('bo', 'pro'))).status);
        assert.deepEqual(free, [200, 200, 429]);
        assert.deepEqual(pro, [200, 200, 200, 200, 429]);
        assert.equal(readIetf((await get(`${url}/x`, as('cy', 'pro'))).headers).get('4-per-1m')?.r, 3);
      });
    });
  });
}
