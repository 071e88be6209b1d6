// overloadProtection in the adapters: real Express 5, Koa and node:http apps whose jobs count how many run at once; the
// limit holds, the highest class goes first, refusals say why, a client that hangs up at any point leaves nothing held.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, describe, it } from 'node:test';
import express from 'express';
import Koa from 'koa';
import Fastify from 'fastify';
import { OverloadLimiter } from '../../src/limiter/overload-limiter.js';
import { overloadProtection as expressOverload } from '../../src/http/adapters/express.js';
import { overloadProtection as koaOverload } from '../../src/http/adapters/koa.js';
import { overloadProtection as nodeOverload } from '../../src/http/adapters/node.js';
import { close, get, leaveAfter, listen } from './support/http.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What the app saw: jobs running now, the most at once, and the order they started in. */
class Jobs {
  now = 0;
  most = 0;
  order: string[] = [];
  async run(id: string, ms: number): Promise<void> {
    this.now += 1;
    this.order.push(id);
    this.most = Math.max(this.most, this.now);
    await sleep(ms);
    this.now -= 1;
  }
}

/** `/job?id=X&ms=N` runs a job of N ms (answering 503 for `/busy`); `/batch…` is sheddable, `/critical…` critical. */
async function app(
  kind: 'express' | 'koa' | 'node' | 'fastify',
  limiter: OverloadLimiter,
  jobs: Jobs,
): Promise<{ url: string; server: Server }> {
  const priority = (path: string): string | undefined =>
    path.startsWith('/batch') ? 'sheddable' : path.startsWith('/critical') ? 'critical' : undefined;
  const params = (url: string): { id: string; ms: number; busy: boolean } => {
    const u = new URL(url, 'http://x');
    return { id: u.searchParams.get('id') ?? '-', ms: Number(u.searchParams.get('ms') ?? 0), busy: u.pathname === '/busy' };
  };
  let server: Server;
  if (kind === 'express') {
    const a = express();
    a.use(expressOverload({ limiter, priority: (req) => priority(req.url ?? '/'), tenant: (req) => req.headers['x-tenant'] as string }));
    a.get(/.*/, async (req, res) => {
      const p = params(req.url);
      await jobs.run(p.id, p.ms);
      res.status(p.busy ? 503 : 200).send('ok');
    });
    server = createServer(a);
  } else if (kind === 'koa') {
    const a = new Koa();
    a.use(
      koaOverload({ limiter, priority: (ctx) => priority(ctx.path), tenant: (ctx) => ctx.req.headers['x-tenant'] as string | undefined }),
    );
    a.use(async (ctx) => {
      const p = params(ctx.url);
      await jobs.run(p.id, p.ms);
      ctx.status = p.busy ? 503 : 200;
      ctx.body = 'ok';
    });
    server = createServer(a.callback());
  } else if (kind === 'fastify') {
    // The recipe of docs/overload.md: the node:http check in an onRequest hook.
    const f = Fastify();
    const guard = nodeOverload({
      limiter,
      priority: (req) => priority(req.url ?? '/'),
      tenant: (req) => req.headers['x-tenant'] as string,
    });
    f.addHook('onRequest', async (request, reply) => {
      if (!(await guard(request.raw, reply.raw))) reply.hijack();
    });
    f.get('/*', async (request, reply) => {
      const p = params(request.url);
      await jobs.run(p.id, p.ms);
      return reply.code(p.busy ? 503 : 200).send('ok');
    });
    await f.ready();
    server = f.server;
  } else {
    const guard = nodeOverload({
      limiter,
      priority: (req) => priority(req.url ?? '/'),
      tenant: (req) => req.headers['x-tenant'] as string,
    });
    server = createServer((req, res) => {
      void (async () => {
        if (!(await guard(req, res))) return;
        const p = params(req.url ?? '/');
        await jobs.run(p.id, p.ms);
        res.writeHead(p.busy ? 503 : 200);
        res.end('ok');
      })();
    });
  }
  return { url: await listen(server), server };
}

for (const kind of ['express', 'koa', 'node', 'fastify'] as const) {
  describe(`overloadProtection (${kind})`, () => {
    const servers: Server[] = [];
    after(async () => {
      for (const s of servers) await close(s);
    });
    const start = async (limiter: OverloadLimiter, jobs: Jobs): Promise<string> => {
      const a = await app(kind, limiter, jobs);
      servers.push(a.server);
      return a.url;
    };

    it('holds the app to the limit; the others wait, the highest class first', async () => {
      const jobs = new Jobs();
      const url = await start(new OverloadLimiter({ limit: 1, queue: { timeout: '5s' } }), jobs);
      const first = get(`${url}/job?id=first&ms=150`);
      await sleep(40);
      const batch = get(`${url}/batch?id=b&ms=5`);
      await sleep(10);
      const plain = get(`${url}/job?id=d&ms=5`);
      await sleep(10);
      const critical = get(`${url}/critical?id=c&ms=5`);
      const replies = await Promise.all([first, batch, plain, critical]);
      assert.deepEqual(
        replies.map((r) => r.status),
        [200, 200, 200, 200],
      );
      assert.deepEqual(jobs.order, ['first', 'c', 'd', 'b']);
      assert.equal(jobs.most, 1);
    });

    it('answers 503 with Retry-After and Floodgate-Overload when the queue is full or the wait times out', async () => {
      const jobs = new Jobs();
      const url = await start(new OverloadLimiter({ limit: 1, queue: { timeout: '150ms', maxQueue: 1 } }), jobs);
      const first = get(`${url}/job?id=first&ms=400`);
      await sleep(40);
      const waiting = get(`${url}/job?id=w`);
      await sleep(10);
      const full = await get(`${url}/job?id=f`);
      assert.deepEqual([full.status, full.headers['floodgate-overload'], full.headers['retry-after']], [503, 'full', '1']);
      const timedOut = await waiting;
      assert.deepEqual([timedOut.status, timedOut.headers['floodgate-overload']], [503, 'timeout']);
      await first;
      assert.deepEqual(jobs.order, ['first']);
    });

    it('a client that hangs up while waiting never reaches the app; one that hangs up mid-job holds its slot until the job ends', async () => {
      const jobs = new Jobs();
      const limiter = new OverloadLimiter({ limit: 1, queue: { timeout: '5s' } });
      const url = await start(limiter, jobs);
      const first = get(`${url}/job?id=first&ms=200`);
      await sleep(40);
      await Promise.all([0, 1, 2].map((i) => leaveAfter(`${url}/job?id=gone${i}&ms=1`, 30)));
      await first;
      await sleep(20);
      assert.deepEqual(jobs.order, ['first']);
      assert.deepEqual([limiter.stats().inFlight, limiter.stats().queued.default], [0, 0]);
      // Hangs up 30 ms into a 200 ms job: the job runs on, and so does its slot.
      await leaveAfter(`${url}/job?id=cut&ms=200`, 30);
      await sleep(50);
      assert.equal(limiter.stats().inFlight, 1, 'the slot is held while the job runs');
      const next = get(`${url}/job?id=next&ms=1`);
      await sleep(40);
      assert.deepEqual(jobs.order, ['first', 'cut'], 'the next request waits for the job, not for the client');
      assert.equal((await next).status, 200);
      assert.equal(jobs.most, 1);
      await sleep(20);
      assert.equal(limiter.stats().inFlight, 0);
    });

    it('reads the app’s 503 as overload: the adaptive limit backs off', async () => {
      const limiter = new OverloadLimiter({ adaptive: { initialLimit: 20, probeSamples: 1, sampleWindow: 10, minSamples: 1 } });
      const url = await start(limiter, new Jobs());
      await get(`${url}/job?ms=1`);
      for (let i = 0; i < 20; i++) await get(`${url}/busy?ms=1`);
      assert.ok(limiter.limit < 20, `limit ${limiter.limit}`);
      assert.ok(limiter.stats().overloads >= 20);
    });
  });
}

describe('overloadProtection options', () => {
  it('refuses a limiter that is not an OverloadLimiter, bad statuses and unknown options, with typed errors', () => {
    assert.throws(() => nodeOverload({ limiter: {} as never }), { code: 'FLOODGATE_INVALID_OPTIONS' });
    assert.throws(() => nodeOverload({ limiter: new OverloadLimiter(), errorStatuses: [200] }), { code: 'FLOODGATE_INVALID_OPTIONS' });
    assert.throws(() => expressOverload({ limiter: new OverloadLimiter(), tenants: () => 'x' } as never), {
      code: 'FLOODGATE_UNKNOWN_OPTION',
    });
  });
});
