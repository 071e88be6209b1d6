/** The middleware's response-long work on node:http and Express: a concurrency slot held until the response ends (finish, close, error), and units settled at the actual cost; two servers on one real Redis sharing one in-flight limit. */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import { Redis } from 'ioredis';
import { ConcurrencyLimiter } from '../../src/limiter/concurrency-limiter.js';
import { ErrorCode, FloodgateError } from '../../src/core/errors.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import type { Store } from '../../src/stores/store.js';
import { rateLimit as expressLimit } from '../../src/http/adapters/express.js';
import { rateLimit, type NodeRateLimitOptions } from '../../src/http/adapters/node.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { close, get, listen, readIetf } from './support/http.js';

/** Requests the handler holds open until `release()`; counts how many run at once. */
class Gate {
  inFlight = 0;
  most = 0;
  private waiting: Array<() => void> = [];
  enter(): Promise<void> {
    this.inFlight += 1;
    this.most = Math.max(this.most, this.inFlight);
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  leave(): void {
    this.inFlight -= 1;
  }
  release(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const go of waiting) go();
  }
}

/** A node:http server limited by `options`, whose handler holds requests to `/hold` at `gate` (when given), and answers with the `x-cost` of the query. */
async function server(options: NodeRateLimitOptions, gate?: Gate): Promise<{ url: string; stop: () => Promise<void> }> {
  const limit = rateLimit(options);
  const s = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!(await limit(req, res))) return;
    if (gate !== undefined && req.url?.startsWith('/hold')) {
      await gate.enter();
      gate.leave();
    }
    const cost = new URL(req.url ?? '/', 'http://x').searchParams.get('cost');
    if (cost !== null) res.setHeader('x-cost', cost);
    // Ended whether or not the client is still there, as Express, Fastify and most handlers do.
    if (!res.destroyed) res.setHeader('x-done', '1');
    res.end('ok');
  });
  const url = await listen(s);
  return { url, stop: () => close(s) };
}

const settle = (ms = 30): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds (polling), failing after 2 s. */
async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await settle(5);
  }
}

describe('concurrency in the middleware (node:http)', () => {
  it('a third request while two are in flight gets 429 naming the in-flight policy, and its units go back', async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ limit: 10, window: '1m', store });
    const concurrency = new ConcurrencyLimiter({ limit: 2, store });
    const gate = new Gate();
    const { url, stop } = await server({ limiter, concurrency }, gate);
    try {
      const first = [get(`${url}/hold`), get(`${url}/hold`)];
      await until(() => gate.inFlight === 2, 'two requests in the handler');
      const third = await get(`${url}/c`);
      assert.equal(third.status, 429);
      assert.match(third.body, /2-in-flight/);
      await settle();
      // Only the two admitted requests are counted.
      assert.equal((await limiter.peek('127.0.0.1')).remaining, 8);
      gate.release();
      assert.deepEqual(
        (await Promise.all(first)).map((r) => r.status),
        [200, 200],
      );
      // Both slots are free again once the responses have ended.
      await until(async () => (await get(`${url}/d`)).status === 200, 'a slot to come free');
      assert.equal(gate.most, 2);
    } finally {
      gate.release();
      await stop();
    }
  });

  it('F4: a client that leaves mid-request keeps its slot until the handler ends its response, then frees it', async () => {
    const concurrency = new ConcurrencyLimiter({ limit: 1 });
    const limiter = new RateLimiter({ limit: 100, window: '1m' });
    const gate = new Gate();
    const { url, stop } = await server({ limiter, concurrency }, gate);
    try {
      await new Promise<void>((resolve) => {
        const req = request(`${url}/hold`);
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        req.end();
        void until(() => gate.inFlight === 1, 'the request in the handler').then(() => req.destroy());
      });
      // The handler still runs the request whose connection is gone: its slot stays taken until it ends.
      await settle(50);
      assert.equal((await get(`${url}/next`)).status, 429, 'the handler still runs');
      assert.equal(gate.inFlight, 1);
      gate.release();
      await until(async () => (await get(`${url}/next`)).status === 200, 'the slot of the request whose handler ended');
    } finally {
      gate.release();
      await stop();
    }
  });

  it('a handler that fails (Express error, 500) frees its slot', async () => {
    const concurrency = new ConcurrencyLimiter({ limit: 1 });
    const app = express();
    app.use(expressLimit({ limiter: new RateLimiter({ limit: 100, window: '1m' }), concurrency }));
    app.get('/boom', () => {
      throw new Error('handler failed');
    });
    app.get('/ok', (_req, res) => void res.send('ok'));
    // Express logs the error to stderr by default; keep the output clean.
    app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).end());
    const s = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => s.once('listening', resolve));
    const url = `http://127.0.0.1:${(s.address() as { port: number }).port}`;
    try {
      assert.equal((await get(`${url}/boom`)).status, 500);
      await until(async () => (await get(`${url}/ok`)).status === 200, 'the failed request to free its slot');
    } finally {
      await close(s);
    }
  });

  it('the store failing at acquire: 503 with the units given back, or admitted with onStoreError "pass"', async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const failing: Store = {
      name: 'failing-slots',
      apply: (op) => memory.apply(op),
      acquireSlot: () => Promise.reject(new FloodgateError(ErrorCode.STORE_ERROR, 'slots are down')),
      releaseSlot: (key, owner) => memory.releaseSlot!(key, owner),
      renewSlot: (key, owner, ttl) => memory.renewSlot!(key, owner, ttl),
    };
    const limiter = new RateLimiter({ limit: 10, window: '1m', store: memory });
    const concurrency = new ConcurrencyLimiter({ limit: 1, store: failing });
    const errors: unknown[] = [];
    const responding = await server({ limiter, concurrency, onError: (e) => errors.push(e) });
    const passing = await server({ limiter, concurrency, onStoreError: 'pass', onError: (e) => errors.push(e) });
    try {
      assert.equal((await get(`${responding.url}/x`)).status, 503);
      await settle();
      assert.equal((await limiter.peek('127.0.0.1')).remaining, 10);
      assert.equal((await get(`${passing.url}/x`)).status, 200);
      assert.equal(errors.length, 2);
    } finally {
      await responding.stop();
      await passing.stop();
    }
  });

  it('a slot the store grants after the middleware timed out is freed, not held (and renewed) for ever', async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const slow: Store = {
      name: 'slow-slots',
      apply: (op) => memory.apply(op),
      acquireSlot: (key, limit, owner, ttl) =>
        new Promise((resolve) => setTimeout(resolve, 200)).then(() => memory.acquireSlot!(key, limit, owner, ttl)),
      releaseSlot: (key, owner) => memory.releaseSlot!(key, owner),
      renewSlot: (key, owner, ttl) => memory.renewSlot!(key, owner, ttl),
    };
    const concurrency = new ConcurrencyLimiter({ limit: 1, store: slow, ttl: '3s' });
    const limiter = new RateLimiter({ limit: 10, window: '1m', store: memory });
    const { url, stop } = await server({ limiter, concurrency, timeout: 50, onError: () => {} });
    try {
      assert.equal((await get(`${url}/x`)).status, 503);
      await settle(400);
      // The late slot went back: another holder gets the only one.
      const other = new ConcurrencyLimiter({ limit: 1, store: memory, ttl: '3s' });
      const slot = await other.acquire('127.0.0.1');
      assert.equal(slot.allowed, true);
      await slot.release();
    } finally {
      await stop();
    }
  });

  it('concurrency that is not a ConcurrencyLimiter is refused at start with what to write', () => {
    assert.throws(
      () => rateLimit({ limit: 5, window: '1m', concurrency: 3 as unknown as ConcurrencyLimiter }),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS && /new ConcurrencyLimiter/.test(e.message),
    );
  });
});

describe('actualCost in the middleware (node:http)', () => {
  it('each policy is charged the actual cost once the response ends: less gives back, more charges past the limit', async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const perMinute = new RateLimiter({ limit: 20, window: '1m', store, prefix: 'm' });
    const perHour = new RateLimiter({ limit: 100, window: '1h', store, prefix: 'h' });
    const actualCost = (_req: IncomingMessage, res: ServerResponse): number | undefined => {
      const header = res.getHeader('x-cost');
      return header === undefined ? undefined : Number(header);
    };
    const { url, stop } = await server({ limiter: [perMinute, perHour], cost: 5, actualCost });
    try {
      const first = await get(`${url}/x?cost=2`);
      assert.equal(first.status, 200);
      // The headers report the estimate: the actual cost is known only after they were sent.
      assert.equal(readIetf(first.headers).get('20-per-1m')?.r, 15);
      await settle();
      assert.equal((await perMinute.peek('127.0.0.1')).remaining, 18);
      assert.equal((await perHour.peek('127.0.0.1')).remaining, 98);
      assert.equal((await get(`${url}/x?cost=25`)).status, 200);
      await settle();
      // 2 + 25 = 27 charged against 20 a minute: over, and refused until the window ends.
      assert.equal((await perMinute.peek('127.0.0.1')).remaining, 0);
      assert.equal((await perHour.peek('127.0.0.1')).remaining, 73);
      assert.equal((await get(`${url}/x`)).status, 429);
    } finally {
      await stop();
    }
  });

  it('no actual cost keeps the estimate; a bad one keeps it too and goes to onError as INVALID_COST', async () => {
    const limiter = new RateLimiter({ limit: 20, window: '1m', store: new MemoryStore({ sweepIntervalMs: 0 }) });
    const errors: unknown[] = [];
    const actualCost = (req: IncomingMessage): number | undefined => {
      const cost = new URL(req.url ?? '/', 'http://x').searchParams.get('cost');
      return cost === null ? undefined : Number(cost);
    };
    const { url, stop } = await server({ limiter, cost: 3, actualCost, onError: (e) => errors.push(e) });
    try {
      assert.equal((await get(`${url}/x`)).status, 200);
      assert.equal((await get(`${url}/x?cost=-4`)).status, 200);
      assert.equal((await get(`${url}/x?cost=1.5`)).status, 200);
      await settle();
      assert.equal((await limiter.peek('127.0.0.1')).remaining, 11);
      assert.deepEqual(
        errors.map((e) => (e as FloodgateError).code),
        [ErrorCode.INVALID_COST, ErrorCode.INVALID_COST],
      );
    } finally {
      await stop();
    }
  });

  it('actualCost with skipFailedRequests: refused at start, since both would settle the same units', () => {
    assert.throws(
      () => rateLimit({ limit: 5, window: '1m', actualCost: () => 1, skipFailedRequests: true }),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.CONFLICTING_OPTIONS && /return 0/.test(e.message),
    );
  });
});

describe('concurrency across servers on one real Redis', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });

  it('two servers, each with its own client, never run more than the shared limit of one key at once', async () => {
    const clients = [new Redis(redis.url), new Redis(redis.url)];
    const gate = new Gate();
    const servers = await Promise.all(
      clients.map((client) => {
        const store = new RedisStore({ client });
        return server(
          {
            limiter: new RateLimiter({ limit: 1000, window: '1m', store }),
            concurrency: new ConcurrencyLimiter({ limit: 3, store, ttl: '10s' }),
            key: () => 'one-tenant',
          },
          gate,
        );
      }),
    );
    try {
      const replies = Array.from({ length: 12 }, (_, i) => get(`${servers[i % 2]!.url}/hold`));
      await until(() => gate.inFlight === 3, 'three requests in the handlers');
      await settle(100);
      assert.equal(gate.inFlight, 3);
      gate.release();
      const statuses = (await Promise.all(replies)).map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 200).length, 3);
      assert.equal(statuses.filter((s) => s === 429).length, 9);
      assert.equal(gate.most, 3);
      // Every slot is free once the responses have ended.
      const held = async (): Promise<number> => {
        let total = 0;
        for (const name of await clients[0]!.keys('*')) {
          if ((await clients[0]!.type(name)) === 'zset') total += await clients[0]!.zcard(name);
        }
        return total;
      };
      await until(async () => (await held()) === 0, 'every slot to be released in Redis');
    } finally {
      gate.release();
      await Promise.all(servers.map((s) => s.stop()));
      for (const client of clients) client.disconnect();
    }
  });
});
