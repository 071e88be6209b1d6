// Fastify setup slips: the plugin registered after the routes (warned, naming them), an unsupported Fastify major (a typed error), on real servers.
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import fastify5 from 'fastify';
import fastify4 from 'fastify4';
import type { FastifyInstance } from 'fastify';
import { ErrorCode } from '../../../src/core/errors.js';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { forgetWarnings } from '../../../src/core/warnings.js';
import { rateLimit } from '../../../src/http/adapters/fastify.js';
import { routesBefore } from '../../../src/http/adapters/fastify-checks.js';
import { statuses } from '../support/http.js';
import { captureWarnings } from '../support/warnings.js';

const afterRoutes = (routes: string, count: string): string =>
  `floodgate/fastify rateLimit was registered after ${count} (${routes}), which it does not limit (Fastify tells a plugin only of routes added after it): register floodgate before your routes (await app.register(rateLimit, …)); for a route meant to stay unlimited, give it config: { rateLimit: false } instead, or set validate: { routesBeforePlugin: false }.`;

beforeEach(() => forgetWarnings());

for (const [name, fastify] of [
  ['Fastify 4', fastify4 as unknown as typeof fastify5],
  ['Fastify 5', fastify5],
] as const) {
  describe(`${name}: plugin order`, () => {
    it('registering the plugin after the routes: one warning naming them ("register floodgate before your routes"), not silence', async () => {
      const warnings = captureWarnings();
      const app = fastify();
      app.get('/early', async () => 'ok');
      app.post('/api/items/:id', async () => 'ok');
      await app.register(rateLimit, { limiter: new RateLimiter({ limit: 1, window: '1m' }) });
      app.get('/late', async () => 'ok');
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        // What the warning is about: the early route is not limited, the late one is.
        assert.deepEqual(await statuses(`${url}/early`, 3), [200, 200, 200]);
        assert.deepEqual(await statuses(`${url}/late`, 2), [200, 429]);
        assert.deepEqual(await warnings.stop(), [
          { code: 'FLOODGATE_PLUGIN_AFTER_ROUTES', message: afterRoutes('GET /early, POST /api/items/:id', '2 routes') },
        ]);
      } finally {
        await app.close();
      }
    });

    it('registered first, inside a prefix after root routes, or with validate: { routesBeforePlugin: false }: no warning', async () => {
      const warnings = captureWarnings();
      const limiter = (): RateLimiter => new RateLimiter({ limit: 5, window: '1m' });
      const first = fastify();
      await first.register(rateLimit, { limiter: limiter() });
      first.get('/a', async () => 'ok');
      const scoped = fastify();
      scoped.get('/health', async () => 'ok');
      await scoped.register(
        async (api: FastifyInstance) => {
          await api.register(rateLimit, { limiter: limiter() });
          api.get('/items', async () => 'ok');
        },
        { prefix: '/api' },
      );
      const silenced = fastify();
      silenced.get('/health', async () => 'ok');
      await silenced.register(rateLimit, { limiter: limiter(), validate: { routesBeforePlugin: false } });
      try {
        await Promise.all([first.ready(), scoped.ready(), silenced.ready()]);
        assert.deepEqual(await warnings.stop(), []);
      } finally {
        await Promise.all([first.close(), scoped.close(), silenced.close()]);
      }
    });
  });
}

describe('Fastify version', () => {
  it('Fastify 3: a typed error naming the version found and the ones needed', async () => {
    // The plugin reads only `version` before refusing; Fastify 3 itself is not installed next to 4 and 5.
    const fastify3 = { version: '3.29.5' } as unknown as FastifyInstance;
    await assert.rejects(
      () => rateLimit(fastify3, { limiter: new RateLimiter({ limit: 1, window: '1s' }) }),
      (e: Error & { code?: string }) =>
        e.code === ErrorCode.MISSING_DEPENDENCY &&
        e.message === 'floodgate/fastify rateLimit needs fastify 4 or 5; found fastify 3.29.5. Upgrade it: npm install fastify@5.',
    );
  });
});

describe("reading Fastify's route tree", () => {
  it('finds full paths and methods, leaving out the automatic HEAD of a GET', () => {
    const tree = '└── /\n    ├── a (GET, HEAD)\n    │   └── pi/b/:id (POST)\n    └── x (HEAD)\n';
    assert.deepEqual(routesBefore(tree, ''), ['GET /a', 'POST /api/b/:id', 'HEAD /x']);
    assert.deepEqual(routesBefore(tree, '/api'), ['POST /api/b/:id']);
    assert.deepEqual(routesBefore('(empty tree)', ''), []);
  });
});
