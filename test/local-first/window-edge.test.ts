// LocalFirstStore at the window edge on a real Redis: consumes hammered in the last ms of each window are never decided from a lease after Redis's window has ended.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { RateLimiter } from '../../src/index.js';
import { LocalFirstStore, RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { sleep, untilLive } from '../support/local-first.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';

const LIMIT = 150;
const WINDOW_MS = 100;
const ROUNDS = 14;
/** On a loaded machine a round may miss the edge's last ms; rounds go on until one reaches it, up to this many. */
const MAX_ROUNDS = 60;

let server: RedisServer;
let admin: Redis;
const redis = redisFixture((open, started) => {
  server = started;
  admin = open();
});

/**
 * Bounds of Redis's clock minus this process's performance.now(), from the
 * TIME calls with the shortest round trips: Redis read its clock between
 * the send and the reply, so offset ∈ [T − replyAt, T − sentAt].
 */
async function clockOffset(): Promise<{ low: number; high: number }> {
  let low = -Infinity;
  let high = Infinity;
  for (let i = 0; i < 20; i++) {
    const sentAt = performance.now();
    const [s, us] = await admin.time();
    const replyAt = performance.now();
    const t = Number(s) * 1000 + Number(us) / 1000;
    low = Math.max(low, t - replyAt);
    // TIME truncates to whole µs.
    high = Math.min(high, t + 0.001 - sentAt);
  }
  return { low, high };
}

interface Admission {
  /** Redis-clock bounds of when the decision was made. */
  low: number;
  high: number;
  /** Redis-clock upper bound of the window end the decision reported (high + resetMs). */
  reportedEnd: number;
  /** Decided synchronously from a lease (consumeNow), rather than after a Redis call. */
  local: boolean;
}

async function store(): Promise<LocalFirstStore> {
  const client = new Redis(server.url);
  client.on('error', () => {});
  const s = new LocalFirstStore({ client, channel: `edge-${process.pid}` });
  redis.cleanup(async () => {
    await s.close();
    client.disconnect();
  });
  await untilLive(s);
  return s;
}

test('regression: leases are never spent after the Redis window ends (hammering the last ms of each window, 2 stores)', async () => {
  const prefix = `edge-${process.pid}`;
  const stores = [await store(), await store()];
  const limiters = stores.map((s) => new RateLimiter({ store: s, limit: LIMIT, window: WINDOW_MS, prefix }));
  // Opens a window when none is open: a store that heard "exhausted" refuses from memory until its
  // upper bound of the window end, so the hammer does not always open the next window itself.
  const opener = new RateLimiter({ store: new RedisStore({ client: admin }), limit: LIMIT, window: WINDOW_MS, prefix });
  const state = redisKeys(`${prefix}:k`).state;
  const admissions: Admission[] = [];
  const windowEnds: number[] = [];
  let offset = await clockOffset();
  const redisNow = () => performance.now() + offset.low;

  // The window a decision's lease came from: the known end nearest to the end it reported.
  const leaseWindow = (a: Admission) =>
    windowEnds.reduce((best, end) => (Math.abs(end - a.reportedEnd) < Math.abs(best - a.reportedEnd) ? end : best));
  const fromLastMs = () => admissions.filter((a) => a.local && a.low >= leaseWindow(a) - 3).length;
  let rounds = 0;
  for (; rounds < MAX_ROUNDS && (rounds < ROUNDS || fromLastMs() === 0); rounds++) {
    offset = await clockOffset();
    let r = Number(await admin.hget(state, 'r'));
    if (!(r > redisNow() + 20)) {
      await sleep(Math.max(0, r - redisNow() + 1));
      const before = performance.now();
      const d = await opener.consume('k');
      const done = performance.now();
      if (d.allowed)
        admissions.push({ low: before + offset.low, high: done + offset.high, reportedEnd: done + offset.high + d.resetMs, local: false });
      r = Number(await admin.hget(state, 'r'));
    }
    if (windowEnds.at(-1) !== r) windowEnds.push(r);
    // Idle through the window (leases stay held), then hammer from 4 ms before its end to 2 ms after.
    await sleep(Math.max(0, r - 8 - redisNow()));
    while (redisNow() < r - 4) await new Promise((resolve) => setImmediate(resolve));
    const loop = async (limiter: RateLimiter) => {
      while (redisNow() < r + 2) {
        const before = performance.now();
        const now = limiter.consumeNow('k');
        const afterCall = performance.now();
        if (now !== undefined) {
          if (now.allowed)
            admissions.push({
              low: before + offset.low,
              high: afterCall + offset.high,
              reportedEnd: afterCall + offset.high + now.resetMs,
              local: true,
            });
        } else {
          const d = await limiter.consume('k');
          const done = performance.now();
          if (d.allowed)
            admissions.push({
              low: before + offset.low,
              high: done + offset.high,
              reportedEnd: done + offset.high + d.resetMs,
              local: false,
            });
        }
        // One consume per turn per loop, so lease replies land between them and leases are held at the edge.
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await Promise.all(limiters.flatMap((l) => [loop(l), loop(l)]));
  }
  const last = Number(await admin.hget(state, 'r'));
  if (last > windowEnds.at(-1)!) windowEnds.push(last);

  // Spent late: decided, at the earliest, at or after its window's end.
  const late = admissions.filter((a) => a.local && a.low >= leaseWindow(a));
  // Per Redis window by time: a local decision counts where it was made, a Redis one where its lease was.
  const perWindow = new Map<number, number>(windowEnds.map((end) => [end, 0]));
  for (const a of admissions) {
    const end = a.local ? windowEnds.find((e) => a.low < e) : leaseWindow(a);
    if (end !== undefined) perWindow.set(end, perWindow.get(end)! + 1);
  }
  const lastMs = fromLastMs();
  const counts = [...perWindow.values()];
  console.log(
    `window edge, ${LIMIT}/${WINDOW_MS} ms, ${rounds} edges: ${admissions.length} admitted, ${lastMs} from leases in the last 3 ms of a window, ${late.length} late (worst ${late.length ? Math.max(...late.map((a) => a.low - leaseWindow(a))).toFixed(3) : '-'} ms past the end); per window ${JSON.stringify(counts)}; offset ±${((offset.high - offset.low) / 2).toFixed(3)} ms`,
  );
  assert.ok(lastMs > 0, 'the hammer reached the last ms of the windows');
  assert.equal(late.length, 0, `${late.length} consumes spent a lease at or after its window's end`);
  assert.ok(Math.max(...counts) <= LIMIT, `a window admitted ${Math.max(...counts)}`);
});
