// Child process of the waiting accuracy test: keeps many consumes with wait of one shared key in flight against a real Redis until told to stop, then reports every admission with the end of the window it was admitted in.
import { Redis } from 'ioredis';
import { RateLimiter } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';

/** One admitted call: when its answer came (wall ms) and when its window ends (wall ms, from the decision's resetMs). */
export interface Admission {
  at: number;
  windowEnd: number;
  waitedMs: number;
}

/** What a child reports when told to stop. */
export interface HammerReport {
  type: 'report';
  admissions: Admission[];
  refused: number;
  maxWaitedMs: number;
}

const [url, prefix, limit, windowMs, timeoutMs, inFlight] = process.argv.slice(2);
if (inFlight === undefined) throw new Error('usage: waiting-hammer.ts <redis url> <prefix> <limit> <windowMs> <timeoutMs> <in flight>');

const client = new Redis(url!);
const limiter = new RateLimiter({
  store: new RedisStore({ client }),
  prefix: prefix!,
  limit: Number(limit),
  window: Number(windowMs),
  wait: { timeout: Number(timeoutMs) },
});
const admissions: Admission[] = [];
let refused = 0;
let maxWaitedMs = 0;
let running = true;

async function loop(): Promise<void> {
  while (running) {
    const d = await limiter.consume('shared');
    const now = Date.now();
    maxWaitedMs = Math.max(maxWaitedMs, d.waitedMs ?? 0);
    if (d.allowed) admissions.push({ at: now, windowEnd: now + d.resetMs, waitedMs: d.waitedMs ?? 0 });
    else refused++;
  }
}

const loops: Promise<void>[] = [];
process.on('message', (message: { type?: string } | undefined) => {
  if (message?.type === 'go') for (let i = 0; i < Number(inFlight); i++) loops.push(loop());
  if (message?.type !== 'stop') return;
  running = false;
  void Promise.all(loops).then(() => {
    const report: HammerReport = { type: 'report', admissions, refused, maxWaitedMs };
    process.send?.(report, () => {
      client.disconnect();
      process.exit(0);
    });
  });
});
process.send?.({ type: 'ready' });
