// The middleware's concurrency slot when the client leaves before the decision is made: the response has closed already, and the slot must still be freed.
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { it } from 'node:test';
import { ConcurrencyLimiter } from '../../src/limiter/concurrency-limiter.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { rateLimit } from '../../src/http/adapters/node.js';
import { close, get, listen } from './support/http.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

it('regression: a client that leaves while its slot is being acquired does not keep the slot for good', async () => {
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  // A store that takes 100 ms to answer an acquisition, as a distant Redis might under load.
  const acquire = store.acquireSlot!.bind(store);
  store.acquireSlot = async (...args) => {
    await sleep(100);
    return acquire(...args);
  };
  const concurrency = new ConcurrencyLimiter({ limit: 1, store });
  const limit = rateLimit({ limiter: new RateLimiter({ limit: 100, window: '1m', store }), concurrency });
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!(await limit(req, res))) return;
    if (!res.destroyed) res.end('ok');
  });
  const url = await listen(server);
  try {
    await new Promise<void>((resolve) => {
      const req = request(url, { agent: false });
      req.on('error', () => resolve());
      req.end();
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 20);
    });
    // The acquisition lands after the client left; its slot goes back at once.
    await sleep(200);
    const reply = await get(url);
    assert.equal(reply.status, 200, reply.body);
  } finally {
    await close(server);
  }
});
