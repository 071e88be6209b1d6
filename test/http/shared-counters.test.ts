// Two routes' limiters with the same policy on one store: the shared counters they get from the default prefix are reported once, on memory and on a real Redis.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { beforeEach, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import express from 'express';
import { Redis } from 'ioredis';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import type { Store } from '../../src/stores/store.js';
import { forgetWarnings } from '../../src/core/warnings.js';
import { rateLimit } from '../../src/http/adapters/express.js';
import { redisFixture } from '../support/redis-clients.js';
import { close, listen, statuses } from './support/http.js';
import { captureWarnings } from './support/warnings.js';

const PREFIX = 'fg:fixed-window:2:60000:0';

const sharedWarning = (storeName: string): string =>
  `Two RateLimiters with the same policy use one ${storeName} store under the default prefix "${PREFIX}" (derived from the policy), so they share counters: a request counted by one is counted by the other. If each should have its own quota (one per route, say), give each its own prefix, e.g. prefix: 'login'; if one quota is meant, share one RateLimiter.`;

/** An Express app with /login and /signup, each limited by its own limiter built by `make`. */
async function twoRoutes(make: (route: string) => RateLimiter): Promise<{ url: string; stop: () => Promise<void> }> {
  const app = express();
  for (const route of ['login', 'signup']) {
    app.get(`/${route}`, rateLimit({ limiter: make(route) }), (_req, res) => void res.send('ok'));
  }
  const server = createServer(app);
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

/** Runs the user's step on `store`: two routes, same policy, no prefix; then with a prefix each. */
async function sharedThenSeparate(store: () => Store, storeName: string): Promise<void> {
  const warnings = captureWarnings();
  const shared = await twoRoutes(() => new RateLimiter({ store: store(), limit: 2, window: '1m' }));
  try {
    // The login route's two requests used up the signup route's quota too.
    assert.deepEqual(await statuses(`${shared.url}/login`, 2), [200, 200]);
    assert.deepEqual(await statuses(`${shared.url}/signup`, 1), [429]);
  } finally {
    await shared.stop();
  }
  assert.deepEqual(await warnings.stop(), [{ code: 'FLOODGATE_SHARED_DEFAULT_PREFIX', message: sharedWarning(storeName) }]);

  forgetWarnings();
  const quiet = captureWarnings();
  const separate = await twoRoutes(
    (route) => new RateLimiter({ store: store(), limit: 2, window: '1m', prefix: `${route}-${Date.now()}` }),
  );
  try {
    assert.deepEqual(await statuses(`${separate.url}/login`, 2), [200, 200]);
    assert.deepEqual(await statuses(`${separate.url}/signup`, 1), [200]);
  } finally {
    await separate.stop();
  }
  assert.deepEqual(await quiet.stop(), []);
}

beforeEach(() => forgetWarnings());

describe('two routes, one policy, one store, no prefix', () => {
  it('shared counters on a shared MemoryStore are reported once, with the fix; a prefix each keeps them apart', async () => {
    const store = new MemoryStore();
    await sharedThenSeparate(() => store, 'memory');
  });

  it('a limiter per route on its own default MemoryStore shares nothing and warns nothing', async () => {
    const warnings = captureWarnings();
    const { url, stop } = await twoRoutes(() => new RateLimiter({ limit: 2, window: '1m' }));
    try {
      assert.deepEqual(await statuses(`${url}/login`, 2), [200, 200]);
      assert.deepEqual(await statuses(`${url}/signup`, 1), [200]);
    } finally {
      await stop();
    }
    assert.deepEqual(await warnings.stop(), []);
  });

  it('the same prefix given on purpose is not reported', async () => {
    const warnings = captureWarnings();
    const store = new MemoryStore();
    new RateLimiter({ store, limit: 2, window: '1m', prefix: 'auth' });
    new RateLimiter({ store, limit: 2, window: '1m', prefix: 'auth' });
    assert.deepEqual(await warnings.stop(), []);
  });

  it('holds limiters weakly: one that was collected is not reported as sharing', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const warnings = captureWarnings();
    const store = new MemoryStore();
    (() => new RateLimiter({ store, limit: 2, window: '1m' }))();
    // A WeakRef holds its target until the current job ends.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    new RateLimiter({ store, limit: 2, window: '1m' });
    assert.deepEqual(await warnings.stop(), []);
  });

  describe('on a real Redis', () => {
    let client: Redis;
    redisFixture((open) => {
      client = open();
    });

    it('shared counters on one RedisStore are reported once, with the fix; a prefix each keeps them apart', async () => {
      const store = new RedisStore({ client });
      await sharedThenSeparate(() => store, 'redis');
    });
  });
});
