// node:http: the shared adapter behaviour on real servers, plus the node adapter's own contract (true/false, 500 on callback errors).
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../../src/core/errors.js';
import { RateLimiter } from '../../../src/limiter/rate-limiter.js';
import { rateLimit, type NodeRateLimit, type NodeRateLimitOptions } from '../../../src/http/adapters/node.js';
import { close, get, listen } from '../support/http.js';
import { adapterSuite, answerStatus, seenRateLimit, type Harness } from '../support/suite.js';

const harness: Harness = {
  name: 'node:http',
  async start(spec) {
    const global = spec.global ? rateLimit(spec.global as unknown as NodeRateLimitOptions) : undefined;
    const routes = new Map<string, NodeRateLimit>();
    for (const [path, options] of Object.entries(spec.routes ?? {}))
      routes.set(path, rateLimit(options as unknown as NodeRateLimitOptions));
    const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      if (global && !(await global(req, res))) return;
      const route = routes.get((req.url ?? '/').split('?')[0]!);
      if (route && !(await route(req, res))) return;
      res.statusCode = answerStatus(req.headers);
      res.setHeader('x-seen-rate-limit', seenRateLimit(req.rateLimit));
      res.setHeader('content-type', 'text/plain');
      res.end('ok');
    });
    const url = await listen(server, spec.host);
    return { url, close: () => close(server) };
  },
};

adapterSuite(harness);

describe('node:http: specifics', () => {
  it('resolves true and leaves the response to the handler when admitted, false after answering', async () => {
    const limit = rateLimit({ limiter: new RateLimiter({ limit: 1, window: '1m' }) });
    const results: boolean[] = [];
    const server = createServer(async (req, res) => {
      const ok = await limit(req, res);
      results.push(ok);
      if (ok) res.end('handled');
    });
    const url = await listen(server);
    try {
      assert.equal((await get(url)).body, 'handled');
      assert.equal((await get(url)).status, 429);
      assert.deepEqual(results, [true, false]);
    } finally {
      await close(server);
    }
  });

  it('rejects trustProxy: "framework", which needs a framework', () => {
    assert.throws(() => rateLimit({ limiter: new RateLimiter({ limit: 1, window: '1m' }), trustProxy: 'framework' }), {
      code: ErrorCode.INVALID_OPTIONS,
    });
  });
});
