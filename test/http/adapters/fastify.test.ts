// Fastify 4 and 5: the shared adapter behaviour on real servers, plus the plugin's per-route config, opt-out and hook placement.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fastify5, { type FastifyReply, type FastifyRequest } from 'fastify';
import fastify4 from 'fastify4';
import { ErrorCode } from '../../../src/core/errors.js';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { rateLimit, type FastifyRateLimitOptions } from '../../../src/http/adapters/fastify.js';
import { get, readIetf, statuses } from '../support/http.js';
import { adapterSuite, answerStatus, seenRateLimit, type Harness } from '../support/suite.js';

type Factory = (options?: Record<string, unknown>) => ReturnType<typeof fastify5>;
// The plugin is typed against the installed (v5) Fastify; v4 instances accept it at run time.
const register = (app: unknown, options: FastifyRateLimitOptions): Promise<unknown> =>
  (app as { register(p: unknown, o: unknown): Promise<unknown> }).register(rateLimit, options);

async function listen(app: ReturnType<typeof fastify5>, host = '127.0.0.1'): Promise<string> {
  await app.listen({ port: 0, host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return `http://127.0.0.1:${port}`;
}

function harness(name: string, fastify: Factory): Harness {
  return {
    name,
    async start(spec) {
      const app = fastify();
      if (spec.global) await register(app, spec.global as unknown as FastifyRateLimitOptions);
      else await register(app, { global: false });
      for (const [path, options] of Object.entries(spec.routes ?? {})) {
        app.get(path, { config: { rateLimit: options } }, async () => 'ok');
      }
      app.get('/*', async (request: FastifyRequest, reply: FastifyReply) =>
        reply
          .code(answerStatus(request.headers))
          .header('x-seen-rate-limit', seenRateLimit(request.rateLimit))
          .type('text/plain')
          .send('ok'),
      );
      const url = await listen(app, spec.host);
      return { url, close: () => app.close() };
    },
  };
}

for (const [name, fastify] of [
  ['Fastify 4', fastify4 as unknown as Factory],
  ['Fastify 5', fastify5 as unknown as Factory],
] as const) {
  adapterSuite(harness(name, fastify));

  describe(`${name}: plugin specifics`, () => {
    it('applies the plugin limiter to every route, route config overriding it, and false opting out', async () => {
      const app = fastify();
      await register(app, { limiter: new RateLimiter({ limit: 2, window: '1m' }) });
      const login = new RateLimiter({ limit: 1, window: '15m' });
      app.get('/', async () => 'ok');
      app.post(
        '/login',
        { config: { rateLimit: { limiter: { limiter: login, name: 'login' }, key: { header: 'x-user' } } } },
        async () => 'ok',
      );
      app.get('/health', { config: { rateLimit: false } }, async () => 'ok');
      const url = await listen(app);
      try {
        assert.deepEqual(await statuses(`${url}/`, 3), [200, 200, 429]);
        const first = await get(`${url}/login`, { method: 'POST', headers: { 'x-user': 'ann' } });
        assert.equal(first.status, 200);
        assert.deepEqual([...readIetf(first.headers).keys()], ['login']);
        assert.equal((await get(`${url}/login`, { method: 'POST', headers: { 'x-user': 'ann' } })).status, 429);
        assert.equal((await get(`${url}/login`, { method: 'POST' })).status, 401, 'route key option applies');
        assert.deepEqual(await statuses(`${url}/health`, 4), [200, 200, 200, 200]);
      } finally {
        await app.close();
      }
    });

    it('counts a HEAD request once, and limits routes inside encapsulated plugins', async () => {
      const app = fastify();
      const limiter = new RateLimiter({ limit: 2, window: '1m' });
      await register(app, { limiter });
      await app.register(
        async (child: ReturnType<typeof fastify5>) => {
          child.get('/inner', async () => 'inner');
        },
        { prefix: '/v1' } as never,
      );
      const url = await listen(app);
      try {
        assert.equal((await get(`${url}/v1/inner`, { method: 'HEAD' })).status, 200);
        assert.equal((await limiter.peek('127.0.0.1')).remaining, 1, 'one unit for one HEAD request');
        assert.deepEqual(await statuses(`${url}/v1/inner`, 2), [200, 429]);
      } finally {
        await app.close();
      }
    });

    it('runs in preHandler when asked, after other hooks decorate the request', async () => {
      const app = fastify();
      app.addHook('onRequest', async (request: { headers: Record<string, unknown> } & Record<string, unknown>) => {
        request.user = String(request.headers['authorization'] ?? 'anonymous');
      });
      await register(app, {
        limiter: new RateLimiter({ limit: 1, window: '1m' }),
        hook: 'preHandler',
        key: (request) => (request as unknown as { user: string }).user,
      });
      app.get('/', async () => 'ok');
      const url = await listen(app);
      try {
        assert.deepEqual(await statuses(url, 2, { headers: { authorization: 'a' } }), [200, 429]);
        assert.equal((await get(url, { headers: { authorization: 'b' } })).status, 200);
      } finally {
        await app.close();
      }
    });

    it('rejects bad options at register time and bad route options at ready()', async () => {
      const app = fastify();
      await assert.rejects(
        async () => {
          await register(app, {});
        },
        { code: ErrorCode.INVALID_OPTIONS },
      );
      const app2 = fastify();
      await assert.rejects(
        async () => {
          await register(app2, { limiter: new RateLimiter({ limit: 1, window: '1m' }), max: 5 } as never);
        },
        { code: ErrorCode.UNKNOWN_OPTION },
      );
      const app3 = fastify();
      await register(app3, { global: false });
      assert.throws(
        () =>
          app3.get(
            '/x',
            { config: { rateLimit: { limiter: new RateLimiter({ limit: 1, window: '1m' }), timeWindow: 5 } } },
            async () => 'ok',
          ),
        { code: ErrorCode.UNKNOWN_OPTION },
      );
      await Promise.all([app.close(), app2.close(), app3.close()]);
    });
  });
}

describe('Fastify 5: types', () => {
  it('registers with the plugin type and typed route config, no casts', async () => {
    const app = fastify5();
    await app.register(rateLimit, { limiter: new RateLimiter({ limit: 1, window: '1m' }), key: (request) => request.ip });
    app.get('/', { config: { rateLimit: { headers: 'draft-7' } } }, async () => 'ok');
    app.get('/free', { config: { rateLimit: false } }, async () => 'ok');
    const url = await listen(app);
    try {
      assert.equal((await get(url)).headers['ratelimit'], 'limit=1, remaining=0, reset=60');
    } finally {
      await app.close();
    }
  });
});
