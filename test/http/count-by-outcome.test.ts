/** Counting by outcome on node:http: an aborted request counts as failed, a refund the store cannot take goes to onError, and the options that cannot work together are refused. */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import type { Operation, Outcome } from '../../src/core/policy.js';
import type { Store } from '../../src/stores/store.js';
import { rateLimit, type NodeRateLimitOptions } from '../../src/http/adapters/node.js';
import { close, get, listen } from './support/http.js';

/** A node:http server limited by `options` whose handler answers after `delayMs` (so a client can leave first). */
async function server(options: NodeRateLimitOptions, delayMs = 0): Promise<{ url: string; stop: () => Promise<void> }> {
  const limit = rateLimit(options);
  const s = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!(await limit(req, res))) return;
    setTimeout(() => {
      if (!res.destroyed) res.end('ok');
    }, delayMs);
  });
  const url = await listen(s);
  return { url, stop: () => close(s) };
}

/** Sends a request and drops the connection before the answer comes; resolves once the socket is closed. */
function leaveEarly(url: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(`${url}/x`);
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.end();
    setTimeout(() => req.destroy(), 30);
  });
}

describe('counting by outcome (node:http)', () => {
  it('a client that leaves before the answer: the request counts as failed, so skipFailedRequests gives it back', async () => {
    const limiter = new RateLimiter({ limit: 1, window: '1m', store: new MemoryStore({ sweepIntervalMs: 0 }) });
    const { url, stop } = await server({ limiter, skipFailedRequests: true }, 200);
    try {
      await leaveEarly(url);
      await leaveEarly(url);
      // Both were given back when their connections closed: the one unit is still there.
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal((await limiter.peek('127.0.0.1')).remaining, 1);
      assert.equal((await get(`${url}/x`)).status, 200);
      assert.equal((await get(`${url}/x`)).status, 429);
    } finally {
      await stop();
    }
  });

  it('a refund the store fails to take goes to onError, never an unhandled rejection', async () => {
    let failRewards = false;
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const store: Store = {
      name: 'flaky',
      apply(operation: Operation): Promise<Outcome> {
        if (operation.kind === 'reward' && failRewards) return Promise.reject(new Error('store went away'));
        return memory.apply(operation);
      },
    };
    const errors: unknown[] = [];
    const limiter = new RateLimiter({ limit: 5, window: '1m', store });
    const { url, stop } = await server({ limiter, skipSuccessfulRequests: true, onError: (error) => errors.push(error) });
    try {
      failRewards = true;
      assert.equal((await get(`${url}/x`)).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(errors.length, 1);
      assert.match(String((errors[0] as Error).message), /store went away/);
    } finally {
      await stop();
    }
  });

  it('skipFailedRequests with skipSuccessfulRequests, or requestWasSuccessful alone: refused with what to keep', () => {
    const limiter = new RateLimiter({ limit: 5, window: '1m' });
    assert.throws(
      () => rateLimit({ limiter, skipFailedRequests: true, skipSuccessfulRequests: true }),
      (error: Error & { code?: string }) =>
        error.code === ErrorCode.CONFLICTING_OPTIONS &&
        error.message ===
          'floodgate/node rateLimit: skipFailedRequests and skipSuccessfulRequests together give every request back, so nothing would be limited; keep one.',
    );
    assert.throws(
      () => rateLimit({ limiter, requestWasSuccessful: () => true }),
      (error: Error & { code?: string }) =>
        error.code === ErrorCode.CONFLICTING_OPTIONS && /requestWasSuccessful decides which requests/.test(error.message),
    );
    assert.throws(
      () => rateLimit({ limiter, skipFailedRequests: 'yes' as unknown as boolean }),
      (error: Error & { code?: string }) =>
        error.code === ErrorCode.INVALID_OPTIONS && /skipFailedRequests must be true or false/.test(error.message),
    );
  });
});
