// A route whose limiter waits, on a real node:http server: a request over the limit is held until a unit comes, then answered 200; one whose wait would pass the timeout gets its 429 at once.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test } from 'node:test';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { rateLimit } from '../../src/http/adapters/node.js';
import { close, get, listen } from './support/http.js';

async function serve(limiter: RateLimiter): Promise<{ url: string; stop: () => Promise<void> }> {
  const limit = rateLimit({ limiter, key: () => 'everyone' });
  const server = createServer(async (req, res) => {
    if (await limit(req, res)) res.end('ok');
  });
  return { url: await listen(server), stop: () => close(server) };
}

test('a request over the limit of a waiting limiter is held until the window resets, then answered 200', async () => {
  const { url, stop } = await serve(new RateLimiter({ limit: 1, window: '300ms', wait: { timeout: '2s' } }));
  try {
    const [a, b] = await Promise.all([get(url), get(url)]);
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    const slow = Math.max(a.elapsedMs, b.elapsedMs);
    assert.ok(slow >= 280 && slow < 800, `the second request took ${slow} ms`);
  } finally {
    await stop();
  }
});

test('a request that could only be admitted after the timeout gets its 429 at once, with Retry-After', async () => {
  const { url, stop } = await serve(new RateLimiter({ limit: 1, window: '1m', wait: { timeout: '200ms' } }));
  try {
    assert.equal((await get(url)).status, 200);
    const refused = await get(url);
    assert.equal(refused.status, 429);
    assert.ok(refused.elapsedMs < 150, `answered in ${refused.elapsedMs} ms`);
    assert.ok(Number(refused.headers['retry-after']) >= 59);
  } finally {
    await stop();
  }
});

test('execEvenly on a route: a burst of requests is answered window/limit apart', async () => {
  const { url, stop } = await serve(new RateLimiter({ limit: 4, window: '800ms', execEvenly: true }));
  try {
    const replies = await Promise.all([0, 1, 2, 3].map(() => get(url)));
    assert.ok(replies.every((r) => r.status === 200));
    const took = replies.map((r) => r.elapsedMs).sort((x, y) => x - y);
    console.log(`execEvenly route: answered after ${took.join(', ')} ms (slots 200 ms apart)`);
    assert.ok(took[3]! >= 580 && took[3]! < 900, `the last took ${took[3]} ms`);
  } finally {
    await stop();
  }
});
