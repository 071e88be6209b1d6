// A RateLimiter from one build (CommonJS or ESM) given to the other build's middleware, as happens when an app mixes require and import: it works.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import express from 'express';
import { close, listen, statuses } from './support/http.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const built = existsSync(`${root}dist/cjs/index.js`) && existsSync(`${root}dist/esm/http/adapters/express.js`);

type Core = typeof import('../../src/index.js');
type ExpressAdapter = typeof import('../../src/http/adapters/express.js');

async function load(): Promise<{ cjs: Core; esm: Core; cjsExpress: ExpressAdapter; esmExpress: ExpressAdapter }> {
  const require = createRequire(import.meta.url);
  return {
    cjs: require(`${root}dist/cjs/index.js`) as Core,
    cjsExpress: require(`${root}dist/cjs/http/adapters/express.js`) as ExpressAdapter,
    esm: (await import(pathToFileURL(`${root}dist/esm/index.js`).href)) as Core,
    esmExpress: (await import(pathToFileURL(`${root}dist/esm/http/adapters/express.js`).href)) as ExpressAdapter,
  };
}

async function limitedTwice(middleware: express.RequestHandler): Promise<number[]> {
  const app = express();
  app.get('/', middleware, (_req, res) => void res.send('ok'));
  const server = createServer(app);
  const url = await listen(server);
  try {
    return await statuses(url, 2);
  } finally {
    await close(server);
  }
}

describe(
  'RateLimiter across the ESM and CommonJS builds',
  { skip: built ? false : 'dist/ is not built; run `node scripts/build.mjs`' },
  () => {
    it('a RateLimiter from the CommonJS build passed to the ESM middleware limits requests instead of being refused', async () => {
      const { cjs, esm, esmExpress } = await load();
      assert.notEqual(cjs.RateLimiter, esm.RateLimiter, 'two builds, two classes');
      const limiter = new cjs.RateLimiter({ limit: 1, window: '1m' });
      assert.ok(limiter instanceof esm.RateLimiter);
      assert.deepEqual(await limitedTwice(esmExpress.rateLimit({ limiter }) as express.RequestHandler), [200, 429]);
    });

    it('and the other way round, also as a named policy and as insurance', async () => {
      const { cjs, esm, cjsExpress } = await load();
      assert.ok(new esm.RateLimiter({ limit: 1, window: '1s' }) instanceof cjs.RateLimiter);
      const insured = new cjs.RateLimiter({
        limit: 1,
        window: '1m',
        store: new cjs.MemoryStore(),
        insurance: new esm.RateLimiter({ limit: 1, window: '1m' }),
      });
      const middleware = cjsExpress.rateLimit({
        limiter: [{ name: 'esm', limiter: new esm.RateLimiter({ limit: 1, window: '1m' }) }, insured],
      });
      assert.deepEqual(await limitedTwice(middleware as express.RequestHandler), [200, 429]);
    });

    it('a ConcurrencyLimiter from the other build holds a slot per request in the middleware', async () => {
      const { esm, cjsExpress } = await load();
      const concurrency = new esm.ConcurrencyLimiter({ limit: 1 });
      const middleware = cjsExpress.rateLimit({ limiter: new esm.RateLimiter({ limit: 10, window: '1m' }), concurrency });
      assert.deepEqual(await limitedTwice(middleware as express.RequestHandler), [200, 200]);
    });

    it('instanceof stays exact for what is not a RateLimiter, and for subclasses', async () => {
      const { cjs, esm } = await load();
      for (const value of [undefined, null, {}, { policy: {}, store: {}, prefix: 'p' }, cjs.RateLimiter]) {
        assert.equal(value instanceof esm.RateLimiter, false);
      }
      class Sub extends esm.RateLimiter {}
      assert.equal(new esm.RateLimiter({ limit: 1, window: '1s' }) instanceof Sub, false);
      assert.equal(new Sub({ limit: 1, window: '1s' }) instanceof esm.RateLimiter, true);
    });
  },
);
