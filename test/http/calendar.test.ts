// Calendar windows through the node:http adapter: RateLimit and Retry-After give the real time to the period's end in its zone (Feb 1 00:00 in Berlin), not a window length.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { rateLimit } from '../../src/http/adapters/node.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { close, get, listen, readIetf } from './support/http.js';

describe('node:http with a monthly calendar window', () => {
  it('Retry-After at the end of January counts the seconds to Feb 1 00:00 in Europe/Berlin; February then lasts 28 days', async () => {
    // 23:59:10.5 in Berlin on January 31.
    const clock = new ManualClock(Date.parse('2026-01-31T22:59:10.500Z'));
    const limiter = new RateLimiter({
      limit: 2,
      window: { calendar: 'month', timeZone: 'Europe/Berlin' },
      store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
      clock: clock.now,
    });
    const limit = rateLimit({ limiter });
    const server = createServer(async (req, res) => {
      if (await limit(req, res)) res.end('ok');
    });
    const url = await listen(server);
    try {
      assert.equal((await get(url)).status, 200);
      const second = await get(url);
      assert.equal(second.status, 200);
      const ietf = readIetf(second.headers).get('2-per-month')!;
      // 49.5 s to midnight, rounded up; w states the longest month (31 days and a DST hour).
      assert.deepEqual([ietf.q, ietf.w, ietf.r, ietf.t], [2, 2_682_000, 0, 50]);
      const refused = await get(url);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['retry-after'], '50');
      clock.set(Date.parse('2026-01-31T23:00:00Z'));
      const february = await get(url);
      assert.equal(february.status, 200);
      assert.equal(readIetf(february.headers).get('2-per-month')!.t, 28 * 86_400);
    } finally {
      await close(server);
    }
  });
});
