// OutboundLimiter cases of the conformance suite: two limiters on one store stand for two processes; budgets, holds and a caller that died holding a reservation.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, isFloodgateError, type ManualClock, type Store } from '../../src/index.js';
import { OutboundLimiter, type OutboundLimiterOptions } from '../../src/egress/index.js';
import { ManualTimers } from '../support/manual-timers.js';

/** What the suite hands the outbound cases. */
export interface OutboundContext {
  readonly clock: ManualClock;
  /** The store under test (built on `clock`). */
  store(): Store;
}

let prefixes = 0;

/**
 * Lets the ManualClock's due timers fire and real store round trips come back until `done` holds (at most 10 s of real
 * time). With `stepMs`, the clock also moves that much per turn: a retry a line scheduled while its store call was still out
 * (after the test moved the clock) comes due too, as it would in real time.
 */
async function eventually(timers: ManualTimers, done: () => boolean, stepMs = 0): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) {
    await timers.advance(stepMs);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Lets real store round trips come back for a while (what should not happen has had its chance). */
async function quietly(timers: ManualTimers): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await timers.advance(0);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Registers the outbound cases inside a conformance `describe`. */
export function outboundCases(ctx: OutboundContext): void {
  /** Two limiters on the store under test with one prefix: two processes sharing its budgets. */
  const pair = (
    options: Omit<OutboundLimiterOptions, 'store' | 'prefix' | 'clock' | 'timers'>,
  ): [OutboundLimiter, OutboundLimiter, ManualTimers] => {
    const timers = new ManualTimers(ctx.clock);
    const prefix = `out${++prefixes}:${process.pid}`;
    const make = (): OutboundLimiter =>
      new OutboundLimiter({ ...options, store: ctx.store(), prefix, clock: ctx.clock.now, timers: timers.schedule });
    return [make(), make(), timers];
  };

  test('outbound: two processes share one rate budget; the calls past it start when the window ends', async () => {
    const [a, b, timers] = pair({ rate: { limit: 5, window: '10s' } });
    const started: string[] = [];
    const calls = [
      ...[1, 2, 3, 4].map((i) => a.schedule('k', () => void started.push(`a${i}`))),
      ...[1, 2, 3, 4].map((i) => b.schedule('k', () => void started.push(`b${i}`))),
    ];
    await eventually(timers, () => started.length >= 5);
    await quietly(timers);
    assert.equal(started.length, 5, `started ${started.join(', ')}`);
    await timers.advance(10_000);
    await eventually(timers, () => started.length === 8, 25);
    assert.equal(started.length, 8, `started ${started.join(', ')}`);
    await Promise.all(calls);
    assert.equal(started.length, 8);
  });

  test('outbound: a concurrency budget holds across processes, and a freed slot lets the other process start', async () => {
    const [a, b, timers] = pair({ concurrency: { limit: 2, ttl: '60s' } });
    const finish: Array<() => void> = [];
    const job = (): Promise<void> => new Promise<void>((resolve) => finish.push(resolve));
    const a1 = a.schedule('k', job);
    const a2 = a.schedule('k', job);
    await eventually(timers, () => finish.length === 2);
    let bStarted = false;
    const b1 = b.schedule('k', () => void (bStarted = true));
    await quietly(timers);
    await timers.advance(100);
    await quietly(timers);
    assert.equal(bStarted, false, 'both slots are held by the other process');
    // Whichever of the two started first ends first (both asked for a slot at once, so either may have).
    finish[0]!();
    await Promise.race([a1, a2]);
    await timers.advance(100);
    await eventually(timers, () => bStarted, 25);
    assert.equal(bStarted, true, 'the freed slot went to the other process within its poll');
    finish[1]!();
    await Promise.all([a2, b1]);
  });

  test('outbound: a refusal one process hears holds every process until its Retry-After', async () => {
    const [a, b, timers] = pair({ rate: { limit: 100, window: '10s' } });
    await a.schedule('k', ({ learn }) => learn({ status: 429, requests: { retryAfterMs: 3000 } }));
    let started = false;
    const call = b.schedule('k', () => void (started = true));
    await quietly(timers);
    await timers.advance(2900);
    await quietly(timers);
    assert.equal(started, false);
    await timers.advance(200);
    await eventually(timers, () => started, 25);
    assert.equal(started, true);
    await call;
    assert.equal(started, true);
  });

  test('outbound: tokens are reserved at the estimate and settled at the actual cost, for every process', async () => {
    const [a, b, timers] = pair({ tokens: { limit: 100, window: '10s' } });
    await a.schedule('k', ({ settle: pay }) => pay(20), { cost: 80 });
    let started = false;
    const call = b.schedule('k', () => void (started = true), { cost: 70 });
    await eventually(timers, () => started, 25);
    assert.equal(started, true, '20 spent: 70 fit');
    await call;
  });

  test('outbound: a caller that died holding a reservation leaves its estimate charged until the window ends, then the units return', async () => {
    const [a, b, timers] = pair({ tokens: { limit: 100, window: '10s' } });
    // The call ran and its process went away before it settled: nothing ever commits or cancels it.
    await a.schedule('k', () => undefined, { cost: 80 });
    let started = false;
    const call = b.schedule('k', () => void (started = true), { cost: 50 });
    await quietly(timers);
    await timers.advance(9000);
    await quietly(timers);
    assert.equal(started, false, 'the estimate stays charged');
    await timers.advance(1100);
    await eventually(timers, () => started, 25);
    assert.equal(started, true);
    await call;
    assert.equal(started, true);
  });

  test('outbound: a call that cannot start in time rejects with FLOODGATE_DEADLINE_EXCEEDED and spends nothing', async () => {
    const [a, b, timers] = pair({ rate: { limit: 1, window: '10s' } });
    await a.schedule('k', () => undefined);
    let error: unknown;
    void b.schedule('k', () => 'ran', { timeout: '1s' }).catch((e: unknown) => void (error = e));
    await quietly(timers);
    await timers.advance(1000);
    await eventually(timers, () => error !== undefined, 25);
    assert.ok(isFloodgateError(error, ErrorCode.DEADLINE_EXCEEDED), `rejected with ${String(error)}`);
    await timers.advance(9000);
    let ran: unknown;
    void b.schedule('k', () => 'ran').then((r) => void (ran = r));
    await eventually(timers, () => ran !== undefined, 25);
    assert.equal(ran, 'ran', 'the window’s next unit was not spent by the call that gave up');
  });
}
