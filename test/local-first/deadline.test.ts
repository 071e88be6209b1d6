// LocalFirstStore deadlines on a real Redis: a lease round trip longer than the window still settles every consume, and every waiting consume settles within timeoutMs.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { ErrorCode, isFloodgateError } from '../../src/index.js';
import type { Operation, Outcome, Policy } from '../../src/core/policy.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';
import { startDelayProxy, type DelayProxy } from '../support/delay-proxy.js';
import { sleep, untilLive } from '../support/local-first.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';

let server: RedisServer;
const cleanups: (() => unknown)[] = [];
before(async () => {
  server = await startRedis();
});
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await server.stop();
});

async function proxied(delayMs: number): Promise<DelayProxy> {
  const proxy = await startDelayProxy({ targetPort: server.port, delayMs });
  cleanups.push(() => proxy.stop());
  return proxy;
}

async function store(url: string, timeoutMs: number): Promise<LocalFirstStore> {
  const client = new Redis(url);
  client.on('error', () => {});
  const s = new LocalFirstStore({ client, channel: `deadline-${process.pid}`, timeoutMs });
  cleanups.push(async () => {
    await s.close();
    client.disconnect();
  });
  await untilLive(s);
  return s;
}

/** One settled consume: when it started and ended (performance.now()), and how. */
interface Settled {
  start: number;
  end: number;
  outcome?: Outcome;
  error?: unknown;
}

async function timed(s: LocalFirstStore, op: Operation): Promise<Settled> {
  const start = performance.now();
  try {
    const outcome = await s.apply(op);
    return { start, end: performance.now(), outcome };
  } catch (error) {
    return { start, end: performance.now(), error };
  }
}

for (const blockMs of [0, 200]) {
  const name = blockMs === 0 ? '' : ` (blockDuration ${blockMs} ms)`;
  test(`regression: a lease round trip (80 ms) longer than the window (10 per 50 ms${name}) settles every consume within timeoutMs, never over the limit, without burning leases`, () =>
    slowLease(blockMs));
}

async function slowLease(blockMs: number): Promise<void> {
  const proxy = await proxied(40);
  const timeoutMs = 1000;
  const s = await store(proxy.url, timeoutMs);
  const policy: Policy = { algorithm: 'fixed-window', limit: 10, windowMs: 50, blockMs };
  const op: Operation = { kind: 'consume', key: `slow-${process.pid}-${blockMs}`, amount: 1, policy };
  const all: Promise<Settled>[] = [];
  // Bursts of 6 every 15 ms for about 1.2 s: waiters queue behind every lease call in flight.
  const stopAt = performance.now() + 1200;
  while (performance.now() < stopAt) {
    for (let i = 0; i < 6; i++) all.push(timed(s, op));
    await sleep(15);
  }
  // Before the fix the first consume never settled: give it far more than timeoutMs, then look.
  const settled = await Promise.race([Promise.all(all), sleep(timeoutMs + 3000).then(() => undefined)]);
  assert.ok(settled !== undefined, `${all.length} consumes did not all settle within ${timeoutMs + 3000} ms`);
  const slowest = Math.max(...settled.map((r) => r.end - r.start));
  const errors = settled.filter((r) => r.error !== undefined);
  for (const r of errors)
    assert.ok(isFloodgateError(r.error) && r.error.code === ErrorCode.STORE_TIMEOUT, `unexpected failure ${String(r.error)}`);
  const admitted = settled.filter((r) => r.outcome?.allowed === true);
  const refused = settled.filter((r) => r.outcome?.allowed === false);
  // Windows told apart by the end each admission reports (ends lie >= 50 ms apart; 20 ms tolerance).
  const ends = admitted.map((r) => r.end + r.outcome!.resetMs).sort((a, b) => a - b);
  const perWindow: number[] = [];
  let previous = -Infinity;
  for (const end of ends) {
    if (end - previous > 25) perWindow.push(0);
    perWindow[perWindow.length - 1]!++;
    previous = end;
  }
  const stats = s.stats();
  console.log(
    `80 ms RTT, 10/50 ms, block ${blockMs} ms: ${settled.length} consumes, ${admitted.length} admitted, ${refused.length} refused, ${errors.length} timed out; slowest ${slowest.toFixed(0)} ms; per window ${JSON.stringify(perWindow)}; ${JSON.stringify(stats)}`,
  );
  assert.ok(slowest <= timeoutMs + 250, `a consume took ${slowest.toFixed(0)} ms (timeoutMs ${timeoutMs})`);
  assert.ok(admitted.length > 0, 'the consumes Redis counted are admitted');
  // Consumes a drained window cannot take are refused (and blocked), not queued into later windows until they time out.
  assert.ok(errors.length <= settled.length / 10, `${errors.length} of ${settled.length} consumes timed out`);
  assert.ok(Math.max(...perWindow) <= policy.limit, `a window admitted ${Math.max(...perWindow)}`);
  // Every unit leased is one admitted, except at most a first slice taken before the round trip was known.
  assert.ok(
    stats.unitsLeased - stats.unitsReturned <= admitted.length + policy.limit,
    `${stats.unitsLeased} units leased for ${admitted.length} admissions`,
  );
}

test('a consume waiting behind a lease call settles with STORE_TIMEOUT within timeoutMs when Redis is slower than that', async () => {
  const proxy = await proxied(300);
  const timeoutMs = 200;
  const s = await store(proxy.url, timeoutMs);
  const policy: Policy = { algorithm: 'fixed-window', limit: 100, windowMs: 60_000, blockMs: 0 };
  const op: Operation = { kind: 'consume', key: `stuck-${process.pid}`, amount: 1, policy };
  const first = timed(s, op);
  await sleep(120);
  // This one joins the call in flight, which times out 80 ms from now; its own deadline is 200 ms from now.
  const second = timed(s, op);
  const results = await Promise.all([first, second]);
  for (const r of results) {
    assert.ok(
      isFloodgateError(r.error) && r.error.code === ErrorCode.STORE_TIMEOUT,
      `expected STORE_TIMEOUT, got ${String(r.error ?? JSON.stringify(r.outcome))}`,
    );
    assert.ok(r.end - r.start <= timeoutMs + 250, `settled after ${(r.end - r.start).toFixed(0)} ms`);
  }
});
