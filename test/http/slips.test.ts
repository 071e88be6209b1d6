// The likeliest slips in setting up the middleware, each on a real server: the message or one-time warning a user now gets.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { beforeEach, describe, it } from 'node:test';
import express from 'express';
import fastify from 'fastify';
import Koa from 'koa';
import Koa3 from 'koa3';
import { createRequire } from 'node:module';
import { ErrorCode } from '../../src/core/errors.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { forgetWarnings } from '../../src/core/warnings.js';
import { rateLimit as expressRateLimit } from '../../src/http/adapters/express.js';
import { rateLimit as fastifyRateLimit } from '../../src/http/adapters/fastify.js';
import { rateLimit as koaRateLimit } from '../../src/http/adapters/koa.js';
import { rateLimit as nodeRateLimit } from '../../src/http/adapters/node.js';
import { close, get, listen, statuses } from './support/http.js';
import { captureWarnings } from './support/warnings.js';

const FORWARDED_WARNING = (subject: string, header: string, framework: boolean): string =>
  `${subject}: requests carry ${header} but trustProxy is unset, so they are counted by the proxy's address and every client behind that proxy shares one quota. Set trustProxy to the number of proxies in front of the app (e.g. trustProxy: 1), their addresses or CIDRs${
    framework ? `, or "framework" to follow the framework's own proxy setting` : ''
  }. If the header does not come from a proxy of yours, set trustProxy: false (or validate: { forwardedHeader: false }) to silence this warning.`;

/** Three clients behind one proxy: each request carries its own X-Forwarded-For, all from the same socket address. */
async function threeClientsBehindAProxy(url: string, header = 'x-forwarded-for'): Promise<number[]> {
  const out: number[] = [];
  for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
    out.push((await get(url, { headers: { [header]: header === 'forwarded' ? `for=${client}` : client } })).status);
  }
  return out;
}

// express4 is an npm alias of express@4 without its own types; it has the same call shape for what is used here.
const express4 = createRequire(import.meta.url)('express4') as typeof express;

async function serveExpress(
  setup: (app: express.Express) => void,
  framework: typeof express = express,
): Promise<{ url: string; stop: () => Promise<void> }> {
  const app = framework();
  app.set('env', 'test');
  setup(app);
  const server = createServer(app);
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

beforeEach(() => forgetWarnings());

describe('proxy headers with trustProxy unset', () => {
  it('a per-address policy beside an API-key route behind a proxy: the same warning, naming the policies', async () => {
    const warnings = captureWarnings();
    const { url, stop } = await serveExpress((app) => {
      const store = new MemoryStore();
      const perKey = new RateLimiter({ limit: 5, window: '1m', prefix: 'slip-key', store });
      const perAddress = new RateLimiter({ limit: 2, window: '1m', prefix: 'slip-address', store });
      app.use(
        expressRateLimit({
          key: { header: 'x-api-key' },
          limiter: [
            { limiter: perKey, name: 'key' },
            { limiter: perAddress, name: 'address', key: 'ip' },
          ],
        }),
      );
      app.get('/', (_req, res) => void res.send('ok'));
    });
    try {
      const out: number[] = [];
      for (const [i, client] of ['203.0.113.1', '203.0.113.2', '203.0.113.3'].entries())
        out.push((await get(url, { headers: { 'x-forwarded-for': client, 'x-api-key': `k${i}` } })).status);
      assert.deepEqual(out, [200, 200, 429]);
      assert.deepEqual(await warnings.stop(), [
        {
          code: 'FLOODGATE_FORWARDED_HEADER_IGNORED',
          message: FORWARDED_WARNING('floodgate/express rateLimit (policies "key", "address")', 'X-Forwarded-For', true),
        },
      ]);
    } finally {
      await stop();
    }
  });

  it('behind a load balancer with trustProxy unset: one warning that every client shares one quota, naming trustProxy', async () => {
    const warnings = captureWarnings();
    const { url, stop } = await serveExpress((app) => {
      app.use(expressRateLimit({ limiter: new RateLimiter({ limit: 2, window: '1m' }) }));
      app.get('/', (_req, res) => void res.send('ok'));
    });
    try {
      assert.deepEqual(await threeClientsBehindAProxy(url), [200, 200, 429]);
      const seen = await warnings.stop();
      assert.deepEqual(seen, [
        {
          code: 'FLOODGATE_FORWARDED_HEADER_IGNORED',
          message: FORWARDED_WARNING('floodgate/express rateLimit (policy "2-per-1m")', 'X-Forwarded-For', true),
        },
      ]);
    } finally {
      await stop();
    }
  });

  it('warns once per limiter: a second middleware with other policies gets its own warning', async () => {
    const warnings = captureWarnings();
    const { url, stop } = await serveExpress((app) => {
      app.use(expressRateLimit({ limiter: new RateLimiter({ limit: 50, window: '1m' }) }));
      app.use(expressRateLimit({ limiter: { name: 'burst', limiter: new RateLimiter({ limit: 50, window: '1s' }) } }));
      app.get('/', (_req, res) => void res.send('ok'));
    });
    try {
      await threeClientsBehindAProxy(url);
      await threeClientsBehindAProxy(url, 'forwarded');
      const seen = await warnings.stop();
      assert.deepEqual(
        seen.map((w) => w.message.split(':')[0]),
        ['floodgate/express rateLimit (policy "50-per-1m")', 'floodgate/express rateLimit (policy "burst")'],
      );
    } finally {
      await stop();
    }
  });

  it('is silenced by validate: { forwardedHeader: false }, validate: false, trustProxy: false, or a key that is not the IP', async () => {
    const warnings = captureWarnings();
    const limiter = (): RateLimiter => new RateLimiter({ limit: 100, window: '1m' });
    const { url, stop } = await serveExpress((app) => {
      app.get('/a', expressRateLimit({ limiter: limiter(), validate: { forwardedHeader: false } }), (_q, r) => void r.send('ok'));
      app.get('/b', expressRateLimit({ limiter: limiter(), validate: false }), (_q, r) => void r.send('ok'));
      app.get('/c', expressRateLimit({ limiter: limiter(), trustProxy: false }), (_q, r) => void r.send('ok'));
      app.get('/d', expressRateLimit({ limiter: limiter(), key: { header: 'x-api-key' } }), (_q, r) => void r.send('ok'));
      app.get('/e', expressRateLimit({ limiter: limiter(), trustProxy: 1 }), (_q, r) => void r.send('ok'));
    });
    try {
      for (const path of ['/a', '/b', '/c', '/d', '/e']) {
        await get(`${url}${path}`, { headers: { 'x-forwarded-for': '203.0.113.9', 'x-api-key': 'k' } });
      }
      assert.deepEqual(await warnings.stop(), []);
    } finally {
      await stop();
    }
  });

  it('validate is checked: an unknown check or a non-boolean is refused', () => {
    const limiter = new RateLimiter({ limit: 1, window: '1s' });
    assert.throws(
      () => expressRateLimit({ limiter, validate: { forwardedHeaders: false } as never }),
      (e: Error & { code?: string }) => e.code === ErrorCode.UNKNOWN_OPTION && /no option "forwardedHeaders"/.test(e.message),
    );
    assert.throws(() => expressRateLimit({ limiter, validate: { forwardedHeader: 'no' } as never }), { code: ErrorCode.INVALID_OPTIONS });
  });

  it('Fastify and node:http warn the same way (node:http without "framework")', async () => {
    const warnings = captureWarnings();
    const app = fastify();
    await app.register(fastifyRateLimit, { limiter: new RateLimiter({ limit: 2, window: '1m' }) });
    app.get('/', async () => 'ok');
    const fastifyUrl = await app.listen({ port: 0, host: '127.0.0.1' });
    const limit = nodeRateLimit({ limiter: new RateLimiter({ limit: 2, window: '1m' }) });
    const server = createServer((req, res) => {
      void limit(req, res).then((go) => go && res.end('ok'));
    });
    const nodeUrl = await listen(server);
    try {
      assert.deepEqual(await threeClientsBehindAProxy(fastifyUrl), [200, 200, 429]);
      assert.deepEqual(await threeClientsBehindAProxy(nodeUrl, 'forwarded'), [200, 200, 429]);
      assert.deepEqual(await warnings.stop(), [
        {
          code: 'FLOODGATE_FORWARDED_HEADER_IGNORED',
          message: FORWARDED_WARNING('floodgate/fastify rateLimit (policy "2-per-1m")', 'X-Forwarded-For', true),
        },
        {
          code: 'FLOODGATE_FORWARDED_HEADER_IGNORED',
          message: FORWARDED_WARNING('floodgate/node rateLimit (policy "2-per-1m")', 'Forwarded', false),
        },
      ]);
    } finally {
      await app.close();
      await close(server);
    }
  });
});

describe('a RateLimiter where the options go', () => {
  const limiter = new RateLimiter({ limit: 1, window: '1s' });
  const expected = (owner: string, usage: string): RegExp =>
    new RegExp(`^${owner.replace(/\//g, '\\/')}\\(\\) takes options, not a RateLimiter: write ${usage.replace(/[(){}]/g, '\\$&')}\\.$`);

  it('rateLimit(new RateLimiter(…)): "rateLimit() takes options, not a RateLimiter", not `no option "policy"`', () => {
    for (const [factory, owner] of [
      [expressRateLimit, 'floodgate/express rateLimit'],
      [koaRateLimit, 'floodgate/koa rateLimit'],
      [nodeRateLimit, 'floodgate/node rateLimit'],
    ] as const) {
      assert.throws(
        () => (factory as (o: unknown) => unknown)(limiter),
        (e: Error & { code?: string }) => e.code === ErrorCode.INVALID_OPTIONS && expected(owner, 'rateLimit({ limiter })').test(e.message),
      );
    }
  });

  it('app.register(rateLimit, limiter) on Fastify: the same message, with the register call', async () => {
    const app = fastify();
    await assert.rejects(
      async () => {
        await app.register(fastifyRateLimit, limiter as never);
        await app.ready();
      },
      (e: Error & { code?: string }) =>
        e.code === ErrorCode.INVALID_OPTIONS &&
        expected('floodgate/fastify rateLimit', 'app.register(rateLimit, { limiter })').test(e.message),
    );
    await app.close();
  });
  it('config: { rateLimit: limiter } on a Fastify route: "takes options, not a RateLimiter: write config: { rateLimit: { limiter } }"', async () => {
    const app = fastify();
    await app.register(fastifyRateLimit, { limiter, global: false });
    assert.throws(
      () => app.get('/login', { config: { rateLimit: limiter as never } }, async () => 'ok'),
      (e: Error & { code?: string }) =>
        e.code === ErrorCode.INVALID_OPTIONS &&
        e.message ===
          'floodgate/fastify rateLimit (route GET /login) config.rateLimit takes options, not a RateLimiter: write config: { rateLimit: { limiter } }.',
    );
    await app.close();
  });
});

describe('the factory mounted instead of the middleware', () => {
  const MESSAGE = (owner: string, usage: string): string =>
    `${owner} is a factory: write ${usage}. It was given a request, so it was mounted itself and every request fails until it is called with options.`;

  for (const [name, framework] of [
    ['Express 4', express4],
    ['Express 5', express],
  ] as const) {
    it(`app.use(rateLimit) without calling it (${name}): each request fails with "is a factory", not a 500 saying no option "_events"`, async () => {
      const warnings = captureWarnings();
      const errors: string[] = [];
      const { url, stop } = await serveExpress((app) => {
        app.use(expressRateLimit as never);
        app.get('/', (_req, res) => void res.send('ok'));
        app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
          errors.push(error.message);
          res.status(500).send(error.message);
        });
      }, framework);
      try {
        const first = await get(url);
        const second = await get(url);
        assert.equal(first.status, 500);
        assert.equal(second.status, 500);
        const message = MESSAGE('floodgate/express rateLimit', 'app.use(rateLimit({ … }))');
        assert.equal(first.body, message);
        assert.deepEqual(errors, [message, message]);
        assert.deepEqual(await warnings.stop(), [{ code: 'FLOODGATE_FACTORY_USED_AS_MIDDLEWARE', message }]);
      } finally {
        await stop();
      }
    });
  }

  for (const [name, Framework] of [
    ['Koa 2', Koa],
    ['Koa 3', Koa3 as unknown as typeof Koa],
  ] as const) {
    it(`app.use(rateLimit) without calling it (${name}): the error reaches Koa with "is a factory", warned once`, async () => {
      const warnings = captureWarnings();
      const app = new Framework();
      const errors: string[] = [];
      app.silent = true;
      app.on('error', (error: Error) => errors.push(error.message));
      app.use(koaRateLimit as never);
      app.use((ctx) => {
        ctx.body = 'ok';
      });
      const server = createServer(app.callback());
      const url = await listen(server);
      try {
        assert.deepEqual(await statuses(url, 2), [500, 500]);
        const message = MESSAGE('floodgate/koa rateLimit', 'app.use(rateLimit({ … }))');
        assert.deepEqual(errors, [message, message]);
        assert.deepEqual(await warnings.stop(), [{ code: 'FLOODGATE_FACTORY_USED_AS_MIDDLEWARE', message }]);
      } finally {
        await close(server);
      }
    });
  }

  it('app.addHook(\'onRequest\', rateLimit) on Fastify: each request fails with "is a plugin: write await app.register(…)", warned once', async () => {
    const warnings = captureWarnings();
    const app = fastify();
    app.addHook('onRequest', fastifyRateLimit as never);
    app.get('/', async () => 'ok');
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const message =
        'floodgate/fastify rateLimit is a plugin: write await app.register(rateLimit, { … }). It was given a request, so it was mounted itself and every request fails until it is registered.';
      const first = await get(url);
      assert.equal(first.status, 500);
      assert.equal((JSON.parse(first.body) as { message: string }).message, message);
      assert.equal((await get(url)).status, 500);
      assert.deepEqual(await warnings.stop(), [{ code: 'FLOODGATE_FACTORY_USED_AS_MIDDLEWARE', message }]);
    } finally {
      await app.close();
    }
  });

  it('await rateLimit(req, res) on node:http: a 500 for the request and one warning, not a request left open', async () => {
    const warnings = captureWarnings();
    const factory = nodeRateLimit as unknown as (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;
    const server = createServer((req, res) => {
      void factory(req, res).then((go) => go && res.end('ok'));
    });
    const url = await listen(server);
    try {
      assert.deepEqual(await statuses(url, 2), [500, 500]);
      assert.deepEqual(await warnings.stop(), [
        {
          code: 'FLOODGATE_FACTORY_USED_AS_MIDDLEWARE',
          message: MESSAGE('floodgate/node rateLimit', 'const limit = rateLimit({ … }) once, then await limit(req, res) per request'),
        },
      ]);
    } finally {
      await close(server);
    }
  });
});
