// Child process of the waiting accuracy test: keeps many consumes with wait of one shared key in flight against a real Redis until told to stop, then reports every admission with the end of the window it was admitted in.
/**
 * It also reports how far past its timeout a call waited beyond what this process's event loop and
 * the store's round trips account for, both measured here as they happened.
 */
import { Redis } from 'ioredis';
import { RateLimiter, type Store } from '../../src/index.js';
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
  /**
   * The most any call waited past its timeout beyond the lateness measured for it: how late this
   * process ran a timer due just after the call's deadline, plus the longest store call that came
   * back between the deadline and the answer. 0 when every wait ended as soon as the event loop and
   * the store let it (1 may be a clock reading crossing a millisecond).
   */
  maxUnexplainedMs: number;
  /** The largest lateness measured for a call that waited past its timeout (for the log). */
  maxExplainedMs: number;
}

/** A timer due this long after a call's deadline runs after the wait queue's own deadline timer. */
const PROBE_AFTER_MS = 2;

const [url, prefix, limit, windowMs, timeoutMs, inFlight] = process.argv.slice(2);
if (inFlight === undefined) throw new Error('usage: waiting-hammer.ts <redis url> <prefix> <limit> <windowMs> <timeoutMs> <in flight>');

const client = new Redis(url!);
/** When each store call of this process started and came back (Date.now()), in the order they came back. */
const calls: { start: number; end: number }[] = [];
const redisStore = new RedisStore({ client });
// The real store, with each apply timed: a waiter whose deadline passes while the call ahead of it is
// at the store is answered when that call comes back, one store round trip late, however long that is.
const store = new Proxy(redisStore, {
  get(target, property) {
    if (property === 'apply') {
      return (operation: Parameters<Store['apply']>[0]) => {
        const start = Date.now();
        return target.apply(operation).finally(() => calls.push({ start, end: Date.now() }));
      };
    }
    const value: unknown = Reflect.get(target, property, target);
    return typeof value === 'function' ? value.bind(target) : value;
  },
});
const limiter = new RateLimiter({
  store,
  prefix: prefix!,
  limit: Number(limit),
  window: Number(windowMs),
  wait: { timeout: Number(timeoutMs) },
});
const admissions: Admission[] = [];
let refused = 0;
let maxWaitedMs = 0;
let maxUnexplainedMs = 0;
let maxExplainedMs = 0;
let running = true;

/**
 * How late past its deadline a call asked at `asked` may legitimately be answered: until this
 * process ran a timer due just after the deadline (`probeAt`; or the answer itself when that came
 * first), plus the longest store call that came back between the deadline and the answer (the one
 * the waiter was behind, which may have started only when that late timer ran).
 */
function explainedLateness(asked: number, probeAt: number | undefined, answeredAt: number): number {
  const deadline = asked + Number(timeoutMs);
  const loopLate = Math.max(0, (probeAt ?? answeredAt) - deadline);
  let roundTrip = 0;
  for (let i = calls.length - 1; i >= 0 && calls[i]!.end > deadline; i--) {
    if (calls[i]!.end <= answeredAt) roundTrip = Math.max(roundTrip, calls[i]!.end - calls[i]!.start);
  }
  return loopLate + roundTrip;
}

async function loop(): Promise<void> {
  while (running) {
    // Read before the call, so the deadline the limiter sets is this or a little later.
    const asked = Date.now();
    let probeAt: number | undefined;
    const probe = setTimeout(() => (probeAt = Date.now()), Number(timeoutMs) + PROBE_AFTER_MS);
    const d = await limiter.consume('shared');
    const now = Date.now();
    clearTimeout(probe);
    const waitedMs = d.waitedMs ?? 0;
    maxWaitedMs = Math.max(maxWaitedMs, waitedMs);
    if (waitedMs > Number(timeoutMs)) {
      const explained = explainedLateness(asked, probeAt, now);
      maxExplainedMs = Math.max(maxExplainedMs, explained);
      maxUnexplainedMs = Math.max(maxUnexplainedMs, waitedMs - Number(timeoutMs) - explained);
    }
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
    const report: HammerReport = { type: 'report', admissions, refused, maxWaitedMs, maxUnexplainedMs, maxExplainedMs };
    process.send?.(report, () => {
      client.disconnect();
      process.exit(0);
    });
  });
});
process.send?.({ type: 'ready' });
