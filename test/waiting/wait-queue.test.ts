// The per-key FIFO wait queue on a ManualClock and manual timers: order, retries only when due, wake, a bounded line, deadlines, close.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, ManualClock, isFloodgateError } from '../../src/index.js';
import { WaitQueue, type AttemptResult, type WaitResult } from '../../src/waiting/wait-queue.js';
import { ManualTimers, settle } from '../support/manual-timers.js';

/** A resource with `units` available, refilled to `units` at every multiple of `periodMs`; counts attempts. */
class Refill {
  attempts = 0;
  admitted: string[] = [];
  private left: number;
  private period = 0;
  constructor(
    private readonly clock: ManualClock,
    private readonly units: number,
    private readonly periodMs: number,
  ) {
    this.left = units;
  }
  attempt(id: string): () => Promise<AttemptResult<string>> {
    return async () => {
      this.attempts++;
      const now = this.clock.now();
      const period = Math.floor(now / this.periodMs);
      if (period !== this.period) [this.period, this.left] = [period, this.units];
      if (this.left > 0) {
        this.left--;
        this.admitted.push(id);
        return { admitted: true, value: id };
      }
      return { admitted: false, value: id, retryInMs: (period + 1) * this.periodMs - now };
    };
  }
}

test('waiters of a key are admitted in arrival order, and only the head asks, when its refusal said a unit is due', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  const refill = new Refill(timers.clock, 2, 100);
  const results: Promise<WaitResult<string>>[] = [];
  for (const id of ['a', 'b', 'c', 'd', 'e']) results.push(queue.run('k', refill.attempt(id), 1000));
  await settle();
  // a and b admitted, c refused once: the two behind it have not asked.
  assert.deepEqual(refill.admitted, ['a', 'b']);
  assert.equal(refill.attempts, 3);
  assert.equal(queue.waiting('k'), 3);
  await timers.advance(99);
  assert.equal(refill.attempts, 3, 'no retry before the unit is due');
  await timers.advance(1);
  assert.deepEqual(refill.admitted, ['a', 'b', 'c', 'd']);
  await timers.advance(100);
  assert.deepEqual(refill.admitted, ['a', 'b', 'c', 'd', 'e']);
  // a, b; c refused; c, d, e refused; e.
  assert.equal(refill.attempts, 7);
  const waited = (await Promise.all(results)).map((r) => (r.status === 'admitted' ? r.waitedMs : -1));
  assert.deepEqual(waited, [0, 0, 100, 100, 200]);
  assert.equal(queue.keys, 0, 'an empty line is forgotten');
  assert.equal(timers.pending, 0);
});

test('a refusal that says "now" but keeps refusing is retried every minRetryMs, never in a tight loop', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule, minRetryMs: 5 });
  let attempts = 0;
  const waiting = queue.run(
    'k',
    async () => {
      attempts++;
      return { admitted: false, value: 'no', retryInMs: 0 };
    },
    100,
  );
  await timers.advance(100);
  const result = await waiting;
  // At 0, 5, …, 100 (the deadline itself still allows a retry).
  assert.equal(attempts, 21, `${attempts} attempts in 100 ms`);
  assert.equal(result.status, 'timeout');
});

test('a full line refuses at once, without an attempt, with the time until its next retry', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 2, clock: timers.clock.now, schedule: timers.schedule });
  const refill = new Refill(timers.clock, 0, 300);
  const waiting = [queue.run('k', refill.attempt('a'), 10_000), queue.run('k', refill.attempt('b'), 10_000)];
  await settle();
  await timers.advance(50);
  const attempts = refill.attempts;
  const full = await queue.run('k', refill.attempt('c'), 10_000);
  assert.equal(full.status, 'full');
  assert.equal(full.waitedMs, 0);
  assert.equal(full.status === 'full' && full.retryInMs, 250);
  assert.equal(full.value, 'a', 'the latest refusal comes with it');
  assert.equal(refill.attempts, attempts);
  // Another key has its own line.
  assert.equal(queue.waiting('other'), 0);
  queue.close();
  for (const p of waiting) await assert.rejects(p, (e) => isFloodgateError(e, ErrorCode.CLOSED));
});

test('a waiter whose next retry falls after its deadline is refused at once with the time it would have needed; so are those behind it', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  const refill = new Refill(timers.clock, 0, 500);
  const head = queue.run('k', refill.attempt('a'), 600);
  await settle();
  const hopeless = await queue.run('k', refill.attempt('b'), 300);
  assert.deepEqual(hopeless, { status: 'timeout', value: 'a', waitedMs: 0, retryInMs: 500 });
  const short = await queue.run('x', refill.attempt('c'), 499);
  assert.equal(short.status, 'timeout');
  assert.equal(short.status === 'timeout' && short.retryInMs, 500);
  // The head's wait is allowed: its retry at 500 is before its deadline at 600.
  assert.equal(queue.waiting('k'), 1);
  const behind = queue.run('k', refill.attempt('d'), 550);
  await timers.advance(500);
  // Refused again at 500 with the next unit at 1000: both deadlines fall before it.
  assert.deepEqual(await head, { status: 'timeout', value: 'a', waitedMs: 500, retryInMs: 500 });
  const d = await behind;
  assert.equal(d.status, 'timeout');
  assert.equal(d.waitedMs, 500);
  assert.equal(timers.pending, 0);
});

test('no attempt is started that would answer after the deadline: the last answer time counts, and so does a late timer', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  let attempts = 0;
  // A store 10 ms away that frees a unit at 100 ms.
  const attempt = async (): Promise<AttemptResult<string>> => {
    attempts++;
    const asked = timers.clock.now();
    await new Promise<void>((resolve) => timers.schedule(resolve, 10));
    return asked >= 100 ? { admitted: true, value: 'in' } : { admitted: false, value: 'out', retryInMs: 100 - asked };
  };
  const tight = queue.run('k', attempt, 115);
  await timers.advance(200);
  // Refused at 10 ("in 100 ms", counted from the answer); a retry at 110 (before the deadline at 115) would answer at 120, after it: refused then, not retried.
  assert.deepEqual(await tight, { status: 'timeout', value: 'out', waitedMs: 10, retryInMs: 100 });
  assert.equal(attempts, 1);

  const late = new ManualTimers();
  late.lateness = 30;
  const q2 = new WaitQueue<string>({ maxQueue: 10, clock: late.clock.now, schedule: late.schedule });
  const waiting = q2.run('k', async () => ({ admitted: false, value: 'out', retryInMs: 50 }), 60);
  await late.advance(200);
  // The retry meant for 50 fires at 80, past the deadline at 60: refused without an attempt.
  const result = await waiting;
  assert.equal(result.status, 'timeout');
  assert.equal(result.waitedMs, 80);
});

test('an attempt still in flight at the deadline: its waiter is answered at the deadline, and an admission that comes later goes to late', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  // The first answer takes 5 ms; the retry at 50 takes 40 ms (a slow store), admitting at 90, after the deadline at 70.
  let calls = 0;
  const attempt = async (): Promise<AttemptResult<string>> => {
    calls++;
    await new Promise<void>((resolve) => timers.schedule(resolve, calls === 1 ? 5 : 40));
    return calls === 1 ? { admitted: false, value: 'out', retryInMs: 45 } : { admitted: true, value: 'in' };
  };
  const given: string[] = [];
  const waiting = queue.run('k', attempt, 70, undefined, (value) => given.push(value));
  let answeredAt: number | undefined;
  void waiting.then(() => (answeredAt = timers.clock.now()));
  await timers.advance(200);
  const result = await waiting;
  assert.equal(result.status, 'timeout');
  assert.equal(answeredAt, 70);
  assert.equal(result.waitedMs, 70);
  // The admission answered at 90 was not the caller's: it went back through late.
  assert.deepEqual(given, ['in']);
  assert.equal(queue.keys, 0);
});

test('a newcomer behind an attempt whose waiter left at its deadline waits for that attempt, never runs one beside it', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  let inFlight = 0;
  let most = 0;
  let calls = 0;
  const attempt = async (): Promise<AttemptResult<string>> => {
    calls++;
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise<void>((resolve) => timers.schedule(resolve, calls === 1 ? 5 : 40));
    inFlight--;
    return { admitted: false, value: `r${calls}`, retryInMs: 20 };
  };
  const first = queue.run('k', attempt, 40, undefined, () => {});
  await timers.advance(30); // the retry at 25 is in flight until 65; the deadline at 40 answers the first waiter
  const second = queue.run('k', attempt, 200, undefined, () => {});
  await timers.advance(300);
  assert.equal((await first).status, 'timeout');
  assert.equal(most, 1);
  assert.ok((await second).status === 'timeout' || (await second).status === 'admitted');
});

test('wake retries the head at once (a slot released in this process), not at its scheduled time', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  let free = false;
  const attempt = async (): Promise<AttemptResult<string>> =>
    free ? { admitted: true, value: 'in' } : { admitted: false, value: 'out', retryInMs: 30_000 };
  const waiting = queue.run('k', attempt, 60_000);
  await timers.advance(10);
  free = true;
  queue.wake('k');
  queue.wake('nobody');
  const result = await waiting;
  assert.deepEqual(result, { status: 'admitted', value: 'in', waitedMs: 10 });
  assert.equal(timers.pending, 0);
});

test('a wake during an attempt retries after minRetryMs, as the refusal may predate the release', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule, minRetryMs: 4 });
  let calls = 0;
  const attempt = async (): Promise<AttemptResult<string>> => {
    calls++;
    if (calls === 1) queue.wake('k');
    return calls === 1 ? { admitted: false, value: 'out', retryInMs: 30_000 } : { admitted: true, value: 'in' };
  };
  const waiting = queue.run('k', attempt, 60_000);
  await timers.advance(4);
  assert.deepEqual(await waiting, { status: 'admitted', value: 'in', waitedMs: 4 });
});

test('an attempt that rejects rejects its own waiter only; the next one goes on', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  let first = true;
  const failing = assert.rejects(
    queue.run(
      'k',
      async () => {
        if (first) {
          first = false;
          return { admitted: false, value: 'x', retryInMs: 10 };
        }
        throw new Error('store down');
      },
      1000,
    ),
    /store down/,
  );
  const next = queue.run('k', async () => ({ admitted: true, value: 'ok' }), 1000);
  await timers.advance(10);
  await failing;
  assert.equal((await next).status, 'admitted');
});

test('close rejects every waiter with FLOODGATE_CLOSED and leaves no timer behind', async () => {
  const timers = new ManualTimers();
  const queue = new WaitQueue<string>({ maxQueue: 10, clock: timers.clock.now, schedule: timers.schedule });
  const refill = new Refill(timers.clock, 0, 1000);
  const a = queue.run('k', refill.attempt('a'), 5000);
  const b = queue.run('j', refill.attempt('b'), 5000);
  await settle();
  assert.equal(timers.pending, 2);
  queue.close();
  assert.equal(timers.pending, 0);
  for (const p of [a, b]) await assert.rejects(p, (e) => isFloodgateError(e, ErrorCode.CLOSED));
  await assert.rejects(queue.run('k', refill.attempt('c'), 5000), (e) => isFloodgateError(e, ErrorCode.CLOSED));
});
