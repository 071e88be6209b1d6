// Koa 2 and 3: the shared adapter behaviour on real servers (with @koa/router for per-route limits), plus the koa-grounded (seed 001) option mapping.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import Router from '@koa/router';
import { Redis } from 'ioredis';
import Koa from 'koa';
import Koa3 from 'koa3';
import { ErrorCode } from '../../../src/core/errors.js';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../../src/stores/memory.js';
import { grounded, rateLimit, type KoaRateLimitOptions } from '../../../src/http/adapters/koa.js';
import { freePort, startRedis, type RedisServer } from '../../support/redis-server.js';
import { close, get, listen, readIetf, statuses } from '../support/http.js';
import type { RateLimitInfo } from '../../../src/http/types.js';
import { adapterSuite, answerStatus, seenRateLimit, type Harness } from '../support/suite.js';

/** The shared adapter suite on a real server of one Koa major version (both take the same middleware). */
function harness(name: string, KoaApp: typeof Koa): Harness {
  return {
    name,
    async start(spec) {
      const app = new KoaApp();
      app.silent = true; // expected errors (the throwing key test) need not be printed
      if (spec.global) app.use(rateLimit(spec.global as unknown as KoaRateLimitOptions));
      const router = new Router();
      for (const [path, options] of Object.entries(spec.routes ?? {})) {
        router.get(path, rateLimit(options as unknown as KoaRateLimitOptions), (ctx) => {
          ctx.body = 'ok';
        });
      }
      app.use(router.routes());
      app.use((ctx) => {
        ctx.set('x-seen-rate-limit', seenRateLimit((ctx.state as { rateLimit?: RateLimitInfo }).rateLimit));
        ctx.status = answerStatus(ctx.headers);
        ctx.type = 'text/plain';
        ctx.body = 'ok';
      });
      const server = createServer(app.callback());
      const url = await listen(server, spec.host);
      return { url, close: () => close(server) };
    },
  };
}

adapterSuite(harness('Koa 2', Koa));
adapterSuite(harness('Koa 3', Koa3));

async function serve(middleware: Koa.Middleware): Promise<{ url: string; stop(): Promise<void> }> {
  const app = new Koa();
  app.silent = true;
  app.use(middleware);
  app.use((ctx) => {
    ctx.body = 'Pong!';
  });
  const server = createServer(app.callback());
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

const HOUR_US = 60 * 60 * 1000 * 1000;

describe('Koa: koa-grounded options (seed 001)', () => {
  it('maps partitionKey, ratelimit, globalEXP, cacheSize and verbose', async () => {
    const lines: string[] = [];
    const middleware = grounded({
      partitionKey: 'grounded',
      ratelimit: 2,
      globalEXP: HOUR_US,
      cacheSize: 500,
      verbose: true,
      logger: (line) => lines.push(line),
    });
    await middleware.ready;
    assert.equal(middleware.limiter.prefix, 'grounded');
    assert.deepEqual(middleware.limiter.policy, { algorithm: 'fixed-window', limit: 2, windowMs: 3_600_000, blockMs: 0 });
    const { url, stop } = await serve(middleware);
    try {
      assert.equal((await get(`${url}/`)).body, 'Pong!');
      assert.deepEqual(await statuses(`${url}/`, 2), [200, 429]);
      assert.equal(lines.length, 3);
      assert.match(lines[0]!, /^floodgate 127\.0\.0\.1 GET \/ allowed 1\/2 reset \d+s$/);
      assert.match(lines[2]!, /refused 429/);
    } finally {
      await stop();
      await middleware.close();
    }
  });

  it('validates the koa-grounded names strictly', () => {
    assert.throws(() => grounded({ ratelimit: 10, globalEXP: 1500 }), { code: ErrorCode.INVALID_WINDOW });
    assert.throws(() => grounded({ ratelimit: 0, globalEXP: HOUR_US }), { code: ErrorCode.INVALID_LIMIT });
    assert.throws(() => grounded({ ratelimit: 10, globalEXP: HOUR_US, timeout: -1 }), { code: ErrorCode.INVALID_OPTIONS });
    assert.throws(() => grounded({ ratelimit: 10, globalEXP: HOUR_US, cachesize: 5 } as never), { code: ErrorCode.UNKNOWN_OPTION });
    assert.throws(() => grounded({ ratelimit: 10, globalEXP: HOUR_US, dbStr: 'redis://127.0.0.1:1/', store: new MemoryStore() }), {
      code: ErrorCode.CONFLICTING_OPTIONS,
    });
    // Options that would do nothing are refused rather than ignored.
    assert.throws(() => grounded({ ratelimit: 10, globalEXP: HOUR_US, timeout: 2000 }), {
      code: ErrorCode.CONFLICTING_OPTIONS,
      message: /dbStr/,
    });
    assert.throws(() => grounded({ ratelimit: 10, globalEXP: HOUR_US, logger: () => {} }), {
      code: ErrorCode.CONFLICTING_OPTIONS,
      message: /verbose/,
    });
  });

  it('uses the socket address, not a spoofable ctx.ip, unless told otherwise', async () => {
    const middleware = grounded({ ratelimit: 1, globalEXP: HOUR_US });
    const app = new Koa();
    app.proxy = true; // as koa-grounded's README recommends; floodgate does not follow it by default
    app.use(middleware);
    app.use((ctx) => {
      ctx.body = 'Pong!';
    });
    const server = createServer(app.callback());
    const url = await listen(server);
    try {
      assert.equal((await get(url, { headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 200);
      assert.equal((await get(url, { headers: { 'x-forwarded-for': '198.51.100.2' } })).status, 429);
    } finally {
      await close(server);
    }
  });

  describe('with dbStr', () => {
    let redis: RedisServer;
    before(async () => {
      redis = await startRedis();
    });
    after(async () => {
      await redis?.stop();
    });

    it('creates an ioredis client and a RedisStore, and counts in Redis under partitionKey', async () => {
      const middleware = grounded({ partitionKey: 'grounded-it', ratelimit: 2, globalEXP: HOUR_US, dbStr: `${redis.url}/` });
      await middleware.ready;
      const { url, stop } = await serve(middleware);
      const probe = new Redis(redis.url);
      try {
        assert.deepEqual(await statuses(url, 3), [200, 200, 429]);
        const keys = await probe.keys('*grounded-it*');
        assert.ok(keys.length >= 1, `keys under the partition: ${keys.join(', ')}`);
      } finally {
        probe.disconnect();
        await stop();
        await middleware.close();
      }
    });

    it('answers 503 quickly when Redis is unreachable, and 200 with onStoreError "pass"', async () => {
      const port = await freePort();
      const errors: unknown[] = [];
      const failing = grounded({ ratelimit: 2, globalEXP: HOUR_US, dbStr: `redis://127.0.0.1:${port}/`, onError: (e) => errors.push(e) });
      const passing = grounded({
        ratelimit: 2,
        globalEXP: HOUR_US,
        dbStr: `redis://127.0.0.1:${port}/`,
        onError: () => undefined,
        onStoreError: 'pass',
      });
      const a = await serve(failing);
      const b = await serve(passing);
      try {
        const reply = await get(a.url, { timeoutMs: 8000 });
        assert.equal(reply.status, 503);
        assert.ok(reply.elapsedMs < 6000, `answered in ${reply.elapsedMs} ms`);
        assert.ok(errors.length >= 1);
        assert.equal((await get(b.url, { timeoutMs: 8000 })).status, 200);
      } finally {
        await a.stop();
        await b.stop();
        await failing.close();
        await passing.close();
      }
    });
  });
});

describe('Koa: specifics', () => {
  it('reports app-wide and route policies together in the IETF fields', async () => {
    const app = new Koa();
    app.use(rateLimit({ limiter: { limiter: new RateLimiter({ limit: 100, window: '1m' }), name: 'app' } }));
    const router = new Router();
    router.get('/search', rateLimit({ limiter: { limiter: new RateLimiter({ limit: 1, window: '1m' }), name: 'search' } }), (ctx) => {
      ctx.body = 'ok';
    });
    app.use(router.routes());
    const server = createServer(app.callback());
    const url = await listen(server);
    try {
      const ok = await get(`${url}/search`);
      assert.deepEqual([...readIetf(ok.headers).keys()], ['app', 'search']);
      const refused = await get(`${url}/search`);
      assert.equal(refused.status, 429);
      assert.deepEqual(
        [...readIetf(refused.headers).values()].map((p) => p.r),
        [98, 0],
      );
    } finally {
      await close(server);
    }
  });

  it('limits a single router route and reports on the allowed response', async () => {
    const app = new Koa();
    const router = new Router();
    router.post('/login', rateLimit({ limiter: new RateLimiter({ limit: 1, window: '15m' }), headers: 'draft-6' }), (ctx) => {
      ctx.body = { ok: true };
    });
    app.use(router.routes());
    const server = createServer(app.callback());
    const url = await listen(server);
    try {
      const ok = await get(`${url}/login`, { method: 'POST' });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers['ratelimit-remaining'], '0');
      assert.equal((await get(`${url}/login`, { method: 'POST' })).status, 429);
    } finally {
      await close(server);
    }
  });
});
