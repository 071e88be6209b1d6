// outboundFetch against a real upstream on a real socket: retries of 429 (idempotent methods only), holds from x-ratelimit headers, token usage settled.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { OutboundLimiter, outboundFetch } from '../../src/egress/index.js';
import { close, listen } from '../http/support/http.js';

/** An upstream whose answers the test sets per path: status and headers for the next calls, and a log of what it was asked. */
let server: Server;
let base: string;
const script = new Map<string, Array<{ status: number; headers?: Record<string, string>; body?: string }>>();
const asked: Array<{ path: string; at: number; method: string }> = [];
before(async () => {
  server = createServer((req, res) => {
    asked.push({ path: req.url ?? '/', at: Date.now(), method: req.method ?? 'GET' });
    const next = script.get(req.url ?? '/')?.shift() ?? { status: 200 };
    res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers });
    res.end(next.body ?? '{}');
  });
  base = await listen(server);
});
after(() => close(server));

test('a 429 with Retry-After is retried after it (GET), and the caller sees only the answer that counts', async () => {
  script.set('/a', [
    { status: 429, headers: { 'retry-after': '1' } },
    { status: 200, body: '{"ok":true}' },
  ]);
  const f = outboundFetch({ limiter: new OutboundLimiter({ rate: { limit: 100, window: '10s' } }), backoff: 10 });
  const t0 = Date.now();
  const res = await f(`${base}/a`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { ok: true });
  assert.ok(Date.now() - t0 >= 950, `retried after ${Date.now() - t0} ms`);
});

test('a POST is not retried unless told: its 429 is the caller’s answer', async () => {
  script.set('/p', [{ status: 429, headers: { 'retry-after': '1' } }, { status: 200 }]);
  const before = asked.filter((a) => a.path === '/p').length;
  const f = outboundFetch({ limiter: new OutboundLimiter({ rate: { limit: 100, window: '10s' } }) });
  const res = await f(`${base}/p`, { method: 'POST', body: '{}' });
  assert.equal(res.status, 429);
  assert.equal(asked.filter((a) => a.path === '/p').length - before, 1);
});

test('x-ratelimit-remaining 0 with a reset holds the next call until the reset, for every caller of the limiter', async () => {
  script.set('/r', [{ status: 200, headers: { 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '1' } }]);
  const f = outboundFetch({ limiter: new OutboundLimiter({ rate: { limit: 100, window: '10s' } }) });
  await (await f(`${base}/r`)).arrayBuffer();
  const t0 = Date.now();
  await (await f(`${base}/r`)).arrayBuffer();
  assert.ok(Date.now() - t0 >= 900, `the second call went after ${Date.now() - t0} ms`);
});

test('token usage read from a clone settles the reservation, and the caller still reads the body', async () => {
  const limiter = new OutboundLimiter({ tokens: { limit: 1000, window: '10s' } });
  const f = outboundFetch({
    limiter,
    usage: async (res) => ((await res.json()) as { usage: { total_tokens: number } }).usage.total_tokens,
  });
  script.set('/llm', [{ status: 200, body: JSON.stringify({ usage: { total_tokens: 100 } }) }]);
  const res = await f(`${base}/llm`, { method: 'POST', body: '{}' }, { cost: 900 });
  assert.deepEqual(await res.json(), { usage: { total_tokens: 100 } });
  await new Promise((resolve) => setTimeout(resolve, 50));
  // 900 reserved, 100 used: a call estimating 850 fits at once.
  const t0 = Date.now();
  script.set('/llm', [{ status: 200, body: JSON.stringify({ usage: { total_tokens: 1 } }) }]);
  await (await f(`${base}/llm`, { method: 'POST', body: '{}' }, { cost: 850 })).arrayBuffer();
  assert.ok(Date.now() - t0 < 500);
});

test('bad options get typed errors', () => {
  assert.throws(() => outboundFetch({ limiter: {} as never }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => outboundFetch({ limiter: new OutboundLimiter({ concurrency: 1 }), retries: -1 }), {
    code: 'FLOODGATE_INVALID_OPTIONS',
  });
  assert.throws(() => outboundFetch({ limiter: new OutboundLimiter({ concurrency: 1 }), retry: 1 } as never), {
    code: 'FLOODGATE_UNKNOWN_OPTION',
  });
});
