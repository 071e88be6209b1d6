/** OverloadLimiter: priority classes, tenant-fair waiting, bounded queue, deadlines; then a simulated upstream under overload. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock, OverloadLimiter, type OverloadLimiterOptions, type OverloadSlot, isFloodgateError } from '../../src/index.js';
import { mulberry32 } from '../accuracy/traffic.js';

/** Timers on a ManualClock: `advance` runs the ones that come due, in order. */
class ManualTimers {
  private timers: { at: number; fn: () => void; live: boolean }[] = [];
  constructor(readonly clock: ManualClock) {}
  readonly schedule = (fn: () => void, ms: number): (() => void) => {
    const timer = { at: this.clock.now() + ms, fn, live: true };
    this.timers.push(timer);
    return () => void (timer.live = false);
  };
  advance(ms: number): void {
    const until = this.clock.now() + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.live && t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      due.live = false;
      this.clock.set(Math.max(this.clock.now(), due.at));
      due.fn();
    }
    this.timers = this.timers.filter((t) => t.live);
    this.clock.set(until);
  }
  get pending(): number {
    return this.timers.filter((t) => t.live).length;
  }
}

function fixed(limit: number, extra: OverloadLimiterOptions = {}): { limiter: OverloadLimiter; timers: ManualTimers } {
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  return { limiter: new OverloadLimiter({ limit, clock: clock.now, schedule: timers.schedule, ...extra }), timers };
}

/** Lets settled promises run their callbacks. */
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Admits waiters one at a time: releases the slot last admitted and records who got the next. */
async function serveInTurn(first: OverloadSlot, waits: readonly { label: string; slot: Promise<OverloadSlot> }[]): Promise<string[]> {
  const order: { label: string; slot: OverloadSlot }[] = [];
  for (const w of waits) void w.slot.then((slot) => order.push({ label: w.label, slot }));
  let slot = first;
  for (let i = 0; i < waits.length; i++) {
    slot.release({ latencyMs: 10 });
    await flush();
    assert.equal(order.length, i + 1, 'each release admits exactly one waiter');
    slot = order[i]!.slot;
  }
  slot.release({ latencyMs: 10 });
  return order.map((o) => o.label);
}

test('a freed slot goes to the highest class waiting, whatever the order they came in', async () => {
  const { limiter } = fixed(1);
  const first = limiter.tryAcquire()!;
  assert.equal(first.allowed, true);
  const waits = (['sheddable', 'default', 'critical', 'sheddable', 'critical'] as const).map((priority, i) => ({
    label: `${priority}${i}`,
    slot: limiter.acquire({ priority }),
  }));
  assert.deepEqual(await serveInTurn(first, waits), ['critical2', 'critical4', 'default1', 'sheddable0', 'sheddable3']);
});

test('a newcomer never takes a free slot ahead of a waiter of its class or higher', async () => {
  const { limiter } = fixed(1);
  const held = limiter.tryAcquire()!;
  const waiting = limiter.acquire({ priority: 'critical' });
  held.release({ latencyMs: 5 });
  // The slot went to the waiter in release, so a default newcomer now finds none.
  const newcomer = limiter.tryAcquire({ priority: 'default' });
  assert.equal(newcomer, undefined);
  assert.equal((await waiting).allowed, true);
});

test('waiters of one class are served round-robin across tenants: a noisy tenant does not push a quiet one back', async () => {
  const { limiter } = fixed(1);
  const held = limiter.tryAcquire()!;
  const waits = [
    ...[0, 1, 2, 3, 4, 5].map((i) => ({ label: `noisy${i}`, slot: limiter.acquire({ tenant: 'noisy' }) })),
    ...[0, 1].map((i) => ({ label: `quiet${i}`, slot: limiter.acquire({ tenant: 'quiet' }) })),
  ];
  assert.deepEqual(await serveInTurn(held, waits), ['noisy0', 'quiet0', 'noisy1', 'quiet1', 'noisy2', 'noisy3', 'noisy4', 'noisy5']);
});

test('a full queue sheds the newest of the lowest class for a higher one, and the longest line for a quieter tenant', async () => {
  const { limiter } = fixed(1, { queue: { maxQueue: 3, timeout: '10s' } });
  limiter.tryAcquire();
  const sheddable = [0, 1].map(() => limiter.acquire({ priority: 'sheddable', tenant: 'a' }));
  const noisy = limiter.acquire({ tenant: 'noisy' });
  // Full: a critical newcomer evicts the newest sheddable waiter.
  const critical = limiter.acquire({ priority: 'critical' });
  const shed = await sheddable[1]!;
  assert.deepEqual([shed.allowed, shed.reason, shed.priority], [false, 'shed', 'sheddable']);
  // Full again: a default newcomer of another tenant evicts the remaining sheddable waiter (lower class first).
  const quiet = limiter.acquire({ tenant: 'quiet' });
  assert.equal((await sheddable[0]!).reason, 'shed');
  // Now critical, noisy, quiet wait; a second noisy waiter finds a full queue where no line is longer than its own would be.
  const again = limiter.tryAcquire({ tenant: 'noisy' });
  assert.deepEqual([again?.allowed, again?.reason], [false, 'full']);
  assert.deepEqual(limiter.stats().queued, { critical: 1, default: 2, sheddable: 0 });
  void noisy;
  void critical;
  void quiet;
});

test('a noisy tenant filling the queue is evicted from its own line when a quiet tenant arrives', async () => {
  const { limiter } = fixed(1, { queue: { maxQueue: 4, timeout: '10s' } });
  limiter.tryAcquire();
  const noisy = [0, 1, 2, 3].map(() => limiter.acquire({ tenant: 'noisy' }));
  void limiter.acquire({ tenant: 'quiet' });
  const evicted = await noisy[3]!;
  assert.equal(evicted.reason, 'shed');
  assert.equal(limiter.stats().queued.default, 4);
});

test('a waiter is refused with reason timeout at its deadline, and its own timeout can only shorten the queue’s', async () => {
  const { limiter, timers } = fixed(1, { queue: { timeout: '1s' } });
  limiter.tryAcquire();
  const long = limiter.acquire({ timeout: '5s' });
  const short = limiter.acquire({ timeout: '200ms' });
  timers.advance(200);
  const s = await short;
  assert.deepEqual([s.allowed, s.reason, s.waitedMs], [false, 'timeout', 200]);
  timers.advance(800);
  const l = await long;
  assert.deepEqual([l.reason, l.waitedMs], ['timeout', 1000]);
  assert.equal(timers.pending, 0);
  assert.equal(limiter.stats().decisions.default!.timeout, 2);
});

test('an aborted wait rejects with FLOODGATE_ABORTED and leaves nothing behind (no waiter, no timer, no listener)', async () => {
  const { limiter, timers } = fixed(1);
  const held = limiter.tryAcquire()!;
  const controller = new AbortController();
  const waiting = limiter.acquire({ signal: controller.signal });
  controller.abort();
  await assert.rejects(waiting, (e: unknown) => isFloodgateError(e, 'FLOODGATE_ABORTED'));
  assert.equal(limiter.stats().queued.default, 0);
  assert.equal(timers.pending, 0);
  // The freed slot is not given to the gone waiter.
  held.release({ latencyMs: 1 });
  assert.equal(limiter.stats().inFlight, 0);
  await assert.rejects(
    limiter.acquire({ signal: AbortSignal.abort() }).then(() => limiter.acquire({ signal: AbortSignal.abort() })),
    (e: unknown) => isFloodgateError(e, 'FLOODGATE_ABORTED'),
  );
});

test('queue: false refuses at once at the limit, with reason limit', () => {
  const { limiter } = fixed(1, { queue: false, priorities: ['all'] });
  assert.equal(limiter.tryAcquire()!.allowed, true);
  const refused = limiter.tryAcquire()!;
  assert.deepEqual([refused.allowed, refused.reason], [false, 'limit']);
});

test('ending a slot twice frees one slot, and a refused slot frees none', () => {
  const { limiter } = fixed(2);
  const a = limiter.tryAcquire()!;
  limiter.tryAcquire();
  assert.equal(limiter.tryAcquire({ priority: 'sheddable' }), undefined);
  assert.equal(a.release({ latencyMs: 1 }), true);
  assert.equal(a.release({ latencyMs: 1 }), false);
  assert.equal(a.drop(), false);
  assert.equal(limiter.stats().inFlight, 1);
});

test('bad options and requests get typed errors', () => {
  assert.throws(() => new OverloadLimiter({ limit: 0 }), { code: 'FLOODGATE_INVALID_LIMIT' });
  assert.throws(() => new OverloadLimiter({ limit: 5, adaptive: { maxLimit: 9 } }), { code: 'FLOODGATE_CONFLICTING_OPTIONS' });
  assert.throws(() => new OverloadLimiter({ priorities: [] }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => new OverloadLimiter({ priorities: ['a', 'a'] }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => new OverloadLimiter({ priorities: ['a'], defaultPriority: 'b' }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => new OverloadLimiter({ queue: { timeout: 'soon' } }), { code: 'FLOODGATE_INVALID_DURATION' });
  assert.throws(() => new OverloadLimiter({ queue: { maxQueue: 0 } }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => new OverloadLimiter({ qeue: {} } as never), { code: 'FLOODGATE_UNKNOWN_OPTION' });
  const limiter = new OverloadLimiter();
  assert.throws(() => limiter.tryAcquire({ priority: 'urgent' }), { code: 'FLOODGATE_INVALID_OPTIONS' });
  assert.throws(() => limiter.tryAcquire({ tenant: 7 as never }), { code: 'FLOODGATE_INVALID_OPTIONS' });
});

/**
 * A simulated upstream on a ManualClock: c workers, latency = base × max(1, in flight / c), arrivals evenly spaced; each
 * arrival names its class and tenant. Returns what each class and tenant got.
 */
/** The simulated time left out of the shares: the controller's first no-load probe runs at probeLimit. */
const WARMUP_MS = 2000;

async function simulate(options: {
  load: number;
  mix: readonly { priority?: string; tenant: string; weight: number }[];
  durationMs: number;
}): Promise<{
  admitted: Map<string, number>;
  refused: Map<string, number>;
  offered: Map<string, number>;
  refusedWhileLowerAdmitted: number;
}> {
  const workers = 20;
  const baseMs = 50;
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const limiter = new OverloadLimiter({
    clock: clock.now,
    random: mulberry32(8),
    schedule: timers.schedule,
    queue: { timeout: '500ms', maxQueue: 200 },
  });
  const random = mulberry32(7);
  const ending = new Map<number, OverloadSlot[]>();
  let inFlight = 0;
  const admitted = new Map<string, number>();
  const refused = new Map<string, number>();
  const offered = new Map<string, number>();
  const add = (m: Map<string, number>, k: string): void => void m.set(k, (m.get(k) ?? 0) + 1);
  const total = options.mix.reduce((sum, m) => sum + m.weight, 0);
  const perMs = (options.load * workers) / baseMs;
  /** When each lower-class request was admitted, and each refused request's wait, to check that no wait saw a lower class admitted. */
  const admittedAt: { at: number; priority: number }[] = [];
  const refusedWaits: { from: number; to: number; priority: number }[] = [];
  let owed = 0;
  const settle = (label: string, priority: number, slot: OverloadSlot, now: number): void => {
    // The controller's first no-load probe (its warm-up, at probeLimit) is left out of the shares.
    const counted = now >= WARMUP_MS;
    if (!slot.allowed) {
      if (counted) add(refused, label);
      refusedWaits.push({ from: now - slot.waitedMs, to: now, priority });
      return;
    }
    if (counted) add(admitted, label);
    admittedAt.push({ at: now, priority });
    inFlight++;
    const latency = Math.round(baseMs * Math.max(1, inFlight / workers) * (0.9 + 0.2 * random()));
    const at = now + Math.max(1, latency);
    ending.set(at, [...(ending.get(at) ?? []), slot]);
  };
  const rank = { critical: 0, default: 1, sheddable: 2 } as Record<string, number>;
  for (let now = 0; now < options.durationMs; now++) {
    timers.advance(now - clock.now());
    for (const slot of ending.get(now) ?? []) {
      inFlight--;
      slot.release();
    }
    ending.delete(now);
    await flush();
    owed += perMs;
    for (; owed >= 1; owed--) {
      let pick = random() * total;
      const m = options.mix.find((x) => (pick -= x.weight) < 0) ?? options.mix[0]!;
      const label = m.priority ?? m.tenant;
      if (now >= WARMUP_MS) add(offered, label);
      const request = { priority: m.priority ?? 'default', tenant: m.tenant };
      const p = rank[request.priority]!;
      const at = now;
      const sync = limiter.tryAcquire(request);
      if (sync !== undefined) settle(label, p, sync, at);
      else void limiter.acquire(request).then((slot) => settle(label, p, slot, clock.now()));
    }
  }
  // A refusal of class p while a request of a lower class (a higher number) was admitted during its wait.
  let refusedWhileLowerAdmitted = 0;
  for (const w of refusedWaits)
    if (admittedAt.some((a) => a.priority > w.priority && a.at >= w.from && a.at <= w.to)) refusedWhileLowerAdmitted++;
  return { admitted, refused, offered, refusedWhileLowerAdmitted };
}

test('under 1.5 × load split 50/50, critical sees no refusal while sheddable is still admitted', async (t) => {
  const r = await simulate({
    load: 1.5,
    mix: [
      { priority: 'critical', tenant: 't', weight: 1 },
      { priority: 'sheddable', tenant: 't', weight: 1 },
    ],
    durationMs: 20_000,
  });
  t.diagnostic(
    `critical admitted ${r.admitted.get('critical')} refused ${r.refused.get('critical') ?? 0}; sheddable admitted ${r.admitted.get('sheddable')} refused ${r.refused.get('sheddable')}`,
  );
  assert.equal(r.refused.get('critical') ?? 0, 0, `critical refused ${r.refused.get('critical')}`);
  assert.ok((r.admitted.get('sheddable') ?? 0) > 0, 'sheddable traffic is still admitted');
  assert.equal(r.refusedWhileLowerAdmitted, 0);
});

test('under 3 × load, no critical request is refused while a sheddable one is admitted during its wait', async () => {
  const r = await simulate({
    load: 3,
    mix: [
      { priority: 'critical', tenant: 't', weight: 1 },
      { priority: 'sheddable', tenant: 't', weight: 1 },
    ],
    durationMs: 20_000,
  });
  assert.equal(r.refusedWhileLowerAdmitted, 0);
});

test('four tenants, one sending 10 × the others at 3 × load: the quiet three each get ≥ 90 % of their fair share', async (t) => {
  const mix = [
    { tenant: 'noisy', weight: 10 },
    { tenant: 'q1', weight: 1 },
    { tenant: 'q2', weight: 1 },
    { tenant: 'q3', weight: 1 },
  ];
  const r = await simulate({ load: 3, mix, durationMs: 20_000 });
  const capacity = [...r.admitted.values()].reduce((a, b) => a + b, 0);
  // Max-min fair share: each quiet tenant asks for less than a quarter of what was admitted, so its fair share is its demand.
  const shares = ['q1', 'q2', 'q3'].map((t) => {
    const fair = Math.min(r.offered.get(t)!, capacity / 4);
    return r.admitted.get(t)! / fair;
  });
  for (const share of shares) assert.ok(share >= 0.9, `a quiet tenant got ${share.toFixed(3)} of its fair share`);
  const jain = shares.reduce((a, b) => a + b, 0) ** 2 / (shares.length * shares.reduce((a, b) => a + b * b, 0));
  t.diagnostic(`quiet tenants' shares of their fair share: ${shares.map((x) => x.toFixed(3)).join(', ')}; Jain's index ${jain.toFixed(4)}`);
  assert.ok(jain >= 0.99, `Jain's index ${jain}`);
});
