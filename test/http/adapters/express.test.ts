// Express 4 and 5: the shared adapter behaviour on real servers, plus Express specifics (mount paths, error handling).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import express5 from 'express';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { rateLimit, type ExpressRateLimitOptions } from '../../../src/http/adapters/express.js';
import { close, get, listen, readIetf, statuses } from '../support/http.js';
import { adapterSuite, answerStatus, seenRateLimit, type Harness, type ServerSpec } from '../support/suite.js';

// express4 is an npm alias of express@4 without its own types; it has the same call shape for what is used here.
const express4 = createRequire(import.meta.url)('express4') as typeof express5;

function harness(name: string, express: typeof express5): Harness {
  return {
    name,
    async start(spec: ServerSpec) {
      const app = express();
      app.set('env', 'test'); // keeps the default error handler from printing expected errors
      if (spec.global) app.use(rateLimit(spec.global as unknown as ExpressRateLimitOptions));
      for (const [path, options] of Object.entries(spec.routes ?? {})) {
        app.get(path, rateLimit(options as unknown as ExpressRateLimitOptions), (_req, res) => {
          res.send('ok');
        });
      }
      app.use((req, res) => {
        res.setHeader('x-seen-rate-limit', seenRateLimit(req.rateLimit));
        res.status(answerStatus(req.headers)).type('text/plain').send('ok');
      });
      const server = createServer(app);
      const url = await listen(server, spec.host);
      return { url, close: () => close(server) };
    },
  };
}

for (const [name, express] of [
  ['Express 4', express4],
  ['Express 5', express5],
] as const) {
  const h = harness(name, express);
  adapterSuite(h);

  describe(`${name}: specifics`, () => {
    it('limits a router mounted under a path, reporting headers on allowed responses', async () => {
      const app = express();
      const router = express.Router();
      router.use(rateLimit({ limiter: new RateLimiter({ limit: 1, window: '1m' }) }));
      router.get('/items', (_req, res) => {
        res.json({ ok: true });
      });
      app.use('/api', router);
      const server = createServer(app);
      const url = await listen(server);
      try {
        const ok = await get(`${url}/api/items?page=2`);
        assert.equal(ok.status, 200);
        assert.match(String(ok.headers['ratelimit']), /^"1-per-1m";r=0;t=\d+$/);
        assert.equal((await get(`${url}/api/items`)).status, 429);
      } finally {
        await close(server);
      }
    });

    it('reports app-wide and route policies together in the IETF fields', async () => {
      const app = express();
      app.use(rateLimit({ limiter: { limiter: new RateLimiter({ limit: 100, window: '1m' }), name: 'app' } }));
      app.post('/login', rateLimit({ limiter: { limiter: new RateLimiter({ limit: 1, window: '15m' }), name: 'login' } }), (_req, res) => {
        res.send('ok');
      });
      const server = createServer(app);
      const url = await listen(server);
      try {
        assert.equal((await get(`${url}/login`, { method: 'POST' })).status, 200);
        const refused = await get(`${url}/login`, { method: 'POST' });
        assert.equal(refused.status, 429);
        const report = readIetf(refused.headers);
        assert.deepEqual([...report.keys()], ['app', 'login']);
        assert.deepEqual([report.get('app')!.r, report.get('login')!.r], [98, 0]);
      } finally {
        await close(server);
      }
    });

    it('passes callback errors to next(err) and the app error handler', async () => {
      const app = express();
      app.use(
        rateLimit({
          limiter: new RateLimiter({ limit: 1, window: '1m' }),
          key: async () => {
            throw new Error('no user');
          },
        }),
      );
      app.use((_req, res) => {
        res.send('unreachable');
      });
      app.use((error: Error, _req: unknown, res: { status(n: number): { send(b: string): void } }, _next: unknown) => {
        res.status(418).send(error.message);
      });
      const server = createServer(app);
      const url = await listen(server);
      try {
        const reply = await get(`${url}/x`);
        assert.equal(reply.status, 418);
        assert.equal(reply.body, 'no user');
      } finally {
        await close(server);
      }
    });

    it('reads req.ip with trustProxy: "framework"', async () => {
      const app = express();
      app.set('trust proxy', 1);
      app.use(rateLimit({ limiter: new RateLimiter({ limit: 1, window: '1m' }), trustProxy: 'framework' }));
      app.use((_req, res) => {
        res.send('ok');
      });
      const server = createServer(app);
      const url = await listen(server);
      try {
        assert.deepEqual(await statuses(`${url}/x`, 2, { headers: { 'x-forwarded-for': '203.0.113.5' } }), [200, 429]);
        assert.equal((await get(`${url}/x`, { headers: { 'x-forwarded-for': '203.0.113.6' } })).status, 200);
      } finally {
        await close(server);
      }
    });
  });
}
