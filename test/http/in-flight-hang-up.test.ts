// F4 in the middleware: a client that hangs up must not free its concurrency slot while the app's handler still runs. Real Express 5,
// Koa, Fastify 5 and node:http apps whose job runs on for 600 ms after the client left; each counts its jobs running per key.
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, describe, it } from 'node:test';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import { ConcurrencyLimiter } from '../../src/limiter/concurrency-limiter.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { rateLimit as expressLimit } from '../../src/http/adapters/express.js';
import { rateLimit as fastifyLimit } from '../../src/http/adapters/fastify.js';
import { rateLimit as koaLimit } from '../../src/http/adapters/koa.js';
import { rateLimit as nodeLimit } from '../../src/http/adapters/node.js';
import { close, leaveAfter, listen } from './support/http.js';

const JOB_MS = 600;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Jobs running now and the most at once: a job runs its full time whether or not its client is still there. */
class Jobs {
  now = 0;
  most = 0;
  started = 0;
  async run(): Promise<void> {
    this.now += 1;
    this.started += 1;
    this.most = Math.max(this.most, this.now);
    await sleep(JOB_MS);
    this.now -= 1;
  }
}

const options = () => ({
  limiter: new RateLimiter({ limit: 1000, window: '1m' }),
  concurrency: new ConcurrencyLimiter({ limit: 2, ttl: '10s' }),
  key: () => 'one-key',
});

async function app(name: string, jobs: Jobs): Promise<{ url: string; stop: () => Promise<void> }> {
  if (name === 'express') {
    const a = express();
    a.use(expressLimit(options()));
    a.get('/job', async (_req, res) => {
      await jobs.run();
      res.send('done');
    });
    const server = createServer(a);
    return { url: await listen(server), stop: () => close(server) };
  }
  if (name === 'koa') {
    const a = new Koa();
    a.use(koaLimit(options()));
    a.use(async (ctx) => {
      await jobs.run();
      ctx.body = 'done';
    });
    const server = createServer(a.callback());
    return { url: await listen(server), stop: () => close(server) };
  }
  if (name === 'fastify') {
    const f = Fastify();
    await f.register(fastifyLimit, options());
    f.get('/job', async () => {
      await jobs.run();
      return 'done';
    });
    await f.listen({ port: 0, host: '127.0.0.1' });
    const address = f.server.address() as { port: number };
    return { url: `http://127.0.0.1:${address.port}`, stop: () => f.close() };
  }
  const limit = nodeLimit(options());
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!(await limit(req, res))) return;
    await jobs.run();
    res.end('done');
  });
  return { url: await listen(server), stop: () => close(server) };
}

describe('F4: the middleware’s concurrency counts the app’s work, not client connections', () => {
  const rows: Array<Record<string, string | number>> = [];
  after(() => {
    console.log('# 20 requests of one key, each hung up after 150 ms; concurrency: 2; job 600 ms');
    console.table(rows);
  });
  for (const name of ['express', 'koa', 'fastify', 'node:http']) {
    it(`F4 (${name}): 20 hang-ups start at most 2 jobs at once; the slot comes back when the handler ends`, async () => {
      const jobs = new Jobs();
      const { url, stop } = await app(name, jobs);
      try {
        for (let i = 0; i < 10; i++) {
          await Promise.all([leaveAfter(`${url}/job`, 150), leaveAfter(`${url}/job`, 150)]);
        }
        await sleep(JOB_MS + 100);
        rows.push({ framework: name, 'jobs started': jobs.started, 'most at once': jobs.most, limit: 2 });
        assert.ok(jobs.most <= 2, `${jobs.most} jobs at once`);
        assert.ok(jobs.started >= 2, 'jobs ran');
        // And the slots came back once the handlers ended: a new request is served.
        const served = await new Promise<number>((resolve) => {
          const req = request(`${url}/job`, { agent: false }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', () => resolve(0));
          req.end();
        });
        assert.equal(served, 200);
      } finally {
        await stop();
      }
    });
  }
});
