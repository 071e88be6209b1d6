// A client that leaves while its request waits for a unit, on each adapter (node:http, Express, Koa, Fastify): the wait ends at once, nothing is spent, the handler never runs, and no error reaches the app.
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import express from 'express';
import fastify from 'fastify';
import Koa from 'koa';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { rateLimit as expressLimit } from '../../src/http/adapters/express.js';
import { rateLimit as fastifyLimit } from '../../src/http/adapters/fastify.js';
import { rateLimit as koaLimit } from '../../src/http/adapters/koa.js';
import { rateLimit as nodeLimit } from '../../src/http/adapters/node.js';
import { close, get, listen } from './support/http.js';

/** What each adapter's app reports: handler runs and errors that reached the app. */
interface Seen {
  handled: number;
  errors: unknown[];
}

type Start = (limiter: RateLimiter, seen: Seen) => Promise<{ url: string; stop: () => Promise<void> }>;

const onError = (seen: Seen) => (error: unknown) => void seen.errors.push(error);

const adapters: Record<string, Start> = {
  'node:http': async (limiter, seen) => {
    const limit = nodeLimit({ limiter, key: () => 'one', onError: onError(seen) });
    const server = createServer(async (req, res) => {
      if (!(await limit(req, res))) return;
      seen.handled++;
      res.end('ok');
    });
    return { url: await listen(server), stop: () => close(server) };
  },
  Express: async (limiter, seen) => {
    const app = express();
    app.use(expressLimit({ limiter, key: () => 'one', onError: onError(seen) }));
    app.get('/', (_req, res) => {
      seen.handled++;
      res.send('ok');
    });
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      seen.errors.push(error);
      res.status(500).end();
    });
    const server = createServer(app);
    return { url: await listen(server), stop: () => close(server) };
  },
  Koa: async (limiter, seen) => {
    const app = new Koa();
    app.on('error', (error: unknown) => seen.errors.push(error));
    app.use(koaLimit({ limiter, key: () => 'one', onError: onError(seen) }));
    app.use((ctx) => {
      seen.handled++;
      ctx.body = 'ok';
    });
    const server: Server = createServer(app.callback());
    return { url: await listen(server), stop: () => close(server) };
  },
  Fastify: async (limiter, seen) => {
    const app = fastify();
    await app.register(fastifyLimit, { limiter, key: () => 'one', onError: onError(seen) });
    app.setErrorHandler((error, _request, reply) => {
      seen.errors.push(error);
      void reply.code(500).send();
    });
    app.get('/', async () => {
      seen.handled++;
      return 'ok';
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    return { url: `http://127.0.0.1:${port}`, stop: () => app.close() };
  },
};

/** Sends a request and drops its connection after `ms`; resolves once the socket has closed. */
function leaveAfter(url: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.end();
    setTimeout(() => req.destroy(), ms);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a client that leaves while its request waits', () => {
  for (const [name, start] of Object.entries(adapters)) {
    it(`${name}: the wait ends at once, nothing is spent, the handler never runs, no error reaches the app`, async () => {
      const limiter = new RateLimiter({ limit: 1, window: '2s', wait: { timeout: '5s' } });
      const seen: Seen = { handled: 0, errors: [] };
      const { url, stop } = await start(limiter, seen);
      try {
        assert.equal((await get(url)).status, 200);
        await leaveAfter(url, 100);
        // Had the wait gone on, it would have been admitted when the window reset and spent its unit; abandoned, it
        // took nothing, so after the window the key is whole.
        await sleep(2100);
        assert.equal((await limiter.peek('one')).remaining, 1);
        assert.equal(seen.handled, 1);
        assert.deepEqual(seen.errors, []);
      } finally {
        await stop();
      }
    });
  }
});
