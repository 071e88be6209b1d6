/** AdaptiveConcurrencyLimiter and its controller against a simulated upstream (c workers, queueing beyond), on a ManualClock. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdaptiveConcurrencyLimiter, AdaptiveController, ConcurrencyLimiter, FloodgateError, ManualClock } from '../../src/index.js';
import { percentile, run, type RunResult } from './support/simulated-upstream.js';

const code = (c: string) => (error: unknown) => error instanceof FloodgateError && error.code === c;
const BASE = 50;

/** Trace points from `from` to `to` (ms) outside no-load probes. */
const steady = (r: RunResult, from: number, to: number) => r.trace.filter((t) => t.at >= from && t.at < to && t.phase === 'steady');

/** Seconds from `from` until the limit enters [lo, hi] and stays there (probes aside) until `to`. */
function settleSeconds(r: RunResult, from: number, to: number, lo: number, hi: number): number {
  const points = steady(r, from, to);
  let lastOut = from;
  for (const t of points) if (t.limit < lo || t.limit > hi) lastOut = t.at + 100;
  return (lastOut - from) / 1000;
}

/** Admitted calls per second between `from` and `to` (ms). */
const goodput = (r: RunResult, from: number, to: number) =>
  r.calls.filter((c) => !c.failed && c.admittedAt >= from && c.admittedAt < to).length / ((to - from) / 1000);

test('bad options throw typed errors that say what to write', () => {
  assert.throws(() => new AdaptiveConcurrencyLimiter({ minLimit: 0 }), {
    code: 'FLOODGATE_INVALID_LIMIT',
    message: 'AdaptiveConcurrencyLimiter minLimit must be a positive whole number; got 0.',
  });
  assert.throws(() => new AdaptiveConcurrencyLimiter({ maxLimit: 2.5 }), code('FLOODGATE_INVALID_LIMIT'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ minLimit: 10, maxLimit: 5 }), {
    code: 'FLOODGATE_CONFLICTING_OPTIONS',
    message: 'AdaptiveConcurrencyLimiter minLimit 10 is above maxLimit 5; the limit must have room between them.',
  });
  assert.throws(() => new AdaptiveConcurrencyLimiter({ maxLimit: 10, initialLimit: 11 }), code('FLOODGATE_CONFLICTING_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ minLimit: 5, probeLimit: 3 }), code('FLOODGATE_CONFLICTING_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ smoothing: 0 }), {
    code: 'FLOODGATE_INVALID_OPTIONS',
    message: 'AdaptiveConcurrencyLimiter smoothing must be a number in (0, 1]; got 0.',
  });
  assert.throws(() => new AdaptiveConcurrencyLimiter({ tolerance: 0.9 }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ backoffRatio: 1 }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ queueSize: -1 }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ minSamples: 0 }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ probeSamples: 1001 }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ sampleWindow: 'soon' }), code('FLOODGATE_INVALID_DURATION'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ probeInterval: 0 }), code('FLOODGATE_INVALID_DURATION'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ probeTimeout: '-1s' }), code('FLOODGATE_INVALID_DURATION'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ clock: 5 as never }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new AdaptiveConcurrencyLimiter({ limit: 5 } as never), code('FLOODGATE_UNKNOWN_OPTION'));
  assert.throws(() => new AdaptiveController({ clock: Date.now } as never, 0), code('FLOODGATE_UNKNOWN_OPTION'));
  // minLimit above the default probe limit (3) moves the probe limit up rather than failing.
  assert.equal(new AdaptiveConcurrencyLimiter({ minLimit: 8 }).limit, 8);
});

test('a slot ends once; a refused slot frees nothing; a bad outcome is a typed error', () => {
  const clock = new ManualClock(0);
  const limiter = new AdaptiveConcurrencyLimiter({ clock: clock.now, probeLimit: 1 });
  const first = limiter.acquire();
  assert.deepEqual([first.allowed, first.limit, first.inFlight], [true, 1, 1]);
  const refused = limiter.acquire();
  assert.deepEqual([refused.allowed, refused.inFlight], [false, 1]);
  assert.equal(refused.release(), false);
  assert.throws(() => first.release({ latencyMs: -1 }), {
    code: 'FLOODGATE_INVALID_OPTIONS',
    message: 'AdaptiveConcurrencyLimiter release latencyMs must be a finite number of ms, 0 or more; got -1.',
  });
  assert.throws(() => first.release({ error: 'yes' as never }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => first.release({ latency: 5 } as never), code('FLOODGATE_UNKNOWN_OPTION'));
  clock.advance(20);
  assert.equal(first.release(), true);
  assert.equal(first.release(), false);
  assert.equal(first.drop(), false);
  assert.equal(limiter.stats().inFlight, 0);
  const stats = limiter.stats();
  assert.deepEqual([stats.admitted, stats.refused, stats.overloads], [1, 1, 0]);
});

test('with a shared ConcurrencyLimiter behind it: a call the ceiling refuses is cancelled, neither a sample nor an overload', async () => {
  const clock = new ManualClock(0);
  const adaptive = new AdaptiveConcurrencyLimiter({ clock: clock.now, probeLimit: 2, probeSamples: 1 });
  const ceiling = new ConcurrencyLimiter({ limit: 1, heartbeat: false });
  const first = adaptive.acquire();
  const held = await ceiling.acquire('upstream');
  assert.equal(held.allowed, true);
  const second = adaptive.acquire();
  assert.equal(second.allowed, true, 'the adaptive limit (2 while probing) has room');
  const refused = await ceiling.acquire('upstream');
  assert.equal(refused.allowed, false, 'the shared ceiling of 1 does not');
  clock.advance(500);
  assert.equal(second.cancel(), true);
  // Had the cancel been a sample, this 500 ms would be the no-load latency; had it been an overload, it would count.
  assert.deepEqual([adaptive.stats().phase, adaptive.stats().overloads, adaptive.stats().inFlight], ['probe', 0, 1]);
  assert.equal(first.release({ latencyMs: 40 }), true);
  await held.release();
  assert.deepEqual([adaptive.stats().phase, adaptive.stats().noLoadLatencyMs], ['steady', 40]);
  assert.throws(() => new AdaptiveController({}, 0).succeeded(0, 0, Number.NaN), code('FLOODGATE_INVALID_OPTIONS'));
});

test('the first probe measures the no-load latency at probeLimit (median of probeSamples), then the limit starts at initialLimit', () => {
  const c = new AdaptiveController({ probeLimit: 2, probeSamples: 3, initialLimit: 7 }, 0);
  assert.equal(c.limit, 2);
  assert.equal(c.stats().phase, 'probe');
  assert.equal(c.tryAdmit(0), true);
  assert.equal(c.tryAdmit(0), true);
  assert.equal(c.tryAdmit(0), false);
  c.succeeded(10, 0, 10);
  c.succeeded(30, 0, 30);
  assert.equal(c.tryAdmit(30), true);
  assert.equal(c.stats().noLoadLatencyMs, undefined);
  c.succeeded(50, 30, 20);
  const s = c.stats();
  assert.deepEqual([s.phase, s.limit, s.noLoadLatencyMs, s.targetLatencyMs], ['steady', 7, 20, 22]);
});

test('a later probe counts only calls admitted after it began, then puts the limit back where it was', () => {
  const c = new AdaptiveController({ probeLimit: 1, probeSamples: 1, probeInterval: '1s', initialLimit: 5 }, 0);
  c.tryAdmit(0);
  c.succeeded(10, 0, 10);
  for (let i = 0; i < 4; i++) assert.equal(c.tryAdmit(20), true);
  assert.equal(c.tryAdmit(1010), false, 'the probe began: 4 in flight, limit 1');
  assert.deepEqual([c.stats().phase, c.stats().probes], ['probe', 2]);
  // Calls from before the probe ran at a higher load: their latency is not the no-load latency.
  for (let i = 0; i < 4; i++) c.succeeded(1020, 20, 1000);
  assert.equal(c.stats().phase, 'probe');
  assert.equal(c.tryAdmit(1020), true);
  c.succeeded(1032, 1020, 12);
  assert.deepEqual([c.stats().phase, c.limit, c.stats().noLoadLatencyMs], ['steady', 5, 12]);
});

test('later probes come up to probeJitter × probeInterval early, at random, so processes started together do not probe together', () => {
  const next = (draw: number): number => {
    const c = new AdaptiveController(
      { probeLimit: 1, probeSamples: 1, probeInterval: '10s', probeJitter: 0.5, initialLimit: 5 },
      0,
      () => draw,
    );
    c.tryAdmit(0);
    c.succeeded(10, 0, 10);
    for (let t = 10; t < 20_000; t += 10) {
      if (c.tryAdmit(t)) c.cancelled(t);
      if (c.stats().phase === 'probe') return t;
    }
    return Infinity;
  };
  // The first probe ended at 10 ms; the next is due 10 s later less up to half of it.
  assert.equal(next(0), 10_010);
  assert.equal(next(0.5), 7510);
  assert.ok(next(0.99) >= 5010 && next(0.99) <= 5070);
  assert.throws(() => new AdaptiveController({ probeJitter: 0.6 }, 0), code('FLOODGATE_INVALID_OPTIONS'));
});

test('a probe ends at probeTimeout with the samples it has; calls that never end do not hold it open', () => {
  const c = new AdaptiveController({ probeLimit: 2, initialLimit: 10 }, 0);
  c.tryAdmit(0);
  c.tryAdmit(0);
  assert.equal(c.tryAdmit(2500), false, 'the first probe has no sample yet: it goes on');
  assert.equal(c.stats().phase, 'probe');
  c.succeeded(3000, 0, 3000);
  const s = c.stats();
  assert.deepEqual([s.phase, s.limit, s.noLoadLatencyMs], ['steady', 10, 3000], 'one sample past the 2 s timeout is enough');
  for (let i = 0; i < 5; i++) assert.equal(c.tryAdmit(4000), true);
  assert.equal(c.tryAdmit(63_000), false, 'the next probe began at 63 s with 6 calls that never end in flight');
  assert.equal(c.stats().phase, 'probe');
  assert.equal(c.tryAdmit(65_000), true, 'at its timeout it ends with no sample, keeping the estimate');
  assert.deepEqual([c.stats().phase, c.stats().noLoadLatencyMs, c.stats().probes], ['steady', 3000, 2]);
});

test('a cancelled call is neither a sample nor an overload; an app using under half the limit does not raise it', () => {
  const c = new AdaptiveController({ probeLimit: 1, probeSamples: 1, initialLimit: 10, minSamples: 2, sampleWindow: 10 }, 0);
  c.tryAdmit(0);
  c.succeeded(10, 0, 10);
  // Two calls at a time, fast: a window that would raise the limit if the traffic reached it.
  for (let t = 10; t < 200; t += 10) {
    c.tryAdmit(t);
    c.tryAdmit(t);
    c.succeeded(t + 5, t, 10);
    c.succeeded(t + 5, t, 10);
  }
  assert.equal(c.limit, 10);
  assert.equal(c.stats().raised, 0);
  c.tryAdmit(300);
  c.cancelled(400);
  assert.deepEqual([c.stats().inFlight, c.stats().overloads, c.limit], [0, 0, 10]);
});

test("3× offered load: the limit converges near the upstream's workers, admitted latency stays under 2 × base, goodput holds", () => {
  const workers = 40;
  const r = run({ baseMs: BASE, phases: [{ fromMs: 0, workers }], loadFactor: 3, durationMs: 30_000 });
  const settled = steady(r, 10_000, 30_000);
  for (const t of settled) assert.ok(Math.abs(t.limit - workers) <= 0.3 * workers, `limit ${t.limit} at ${t.at} ms, workers ${workers}`);
  const latencies = r.calls.filter((c) => c.admittedAt >= 10_000).map((c) => c.latencyMs);
  assert.ok(Math.max(...latencies) <= 2 * BASE, `max latency ${Math.max(...latencies)} ms`);
  const capacity = (workers / BASE) * 1000;
  assert.ok(goodput(r, 10_000, 29_000) >= 0.9 * capacity, `goodput ${goodput(r, 10_000, 29_000)}/s of ${capacity}/s`);
  assert.ok(r.refused > 0);
  const s = r.limiter.stats();
  assert.ok(s.noLoadLatencyMs! > 0.85 * BASE && s.noLoadLatencyMs! < 1.1 * BASE, `no-load ${s.noLoadLatencyMs} ms`);
  assert.ok(s.targetLatencyMs! > s.noLoadLatencyMs!);
  console.log(
    `# converged: limit ${percentile(
      settled.map((t) => t.limit),
      50,
    )} (median) for ${workers} workers; ` +
      `latency p99 ${percentile(latencies, 99)} ms (base ${BASE}); goodput ${Math.round(goodput(r, 10_000, 29_000))}/s of ${capacity}/s`,
  );
});

test('capacity halves mid-run: the limit follows within 3 s, and recovers within 5 s when capacity returns', () => {
  const workers = 40;
  const r = run({
    baseMs: BASE,
    phases: [
      { fromMs: 0, workers },
      { fromMs: 20_000, workers: workers / 2 },
      { fromMs: 40_000, workers },
    ],
    loadFactor: 3,
    durationMs: 60_000,
  });
  const down = settleSeconds(r, 20_000, 40_000, 0.7 * (workers / 2), 1.3 * (workers / 2));
  const up = settleSeconds(r, 40_000, 60_000, 0.7 * workers, 1.3 * workers);
  assert.ok(down <= 3, `followed the halving in ${down} s`);
  assert.ok(up <= 5, `recovered in ${up} s`);
  const half = ((workers / 2) * 1000) / BASE;
  assert.ok(goodput(r, 20_000 + down * 1000, 39_000) >= 0.9 * half, `goodput while halved ${goodput(r, 21_000, 39_000)}/s`);
  const halvedLatency = r.calls.filter((c) => c.admittedAt >= 20_000 + down * 1000 && c.admittedAt < 40_000).map((c) => c.latencyMs);
  assert.ok(Math.max(...halvedLatency) <= 2 * BASE);
  console.log(`# capacity ${workers} → ${workers / 2}: limit within ±30 % after ${down} s; back to ${workers}: after ${up} s`);
});

test('maxLimit and minLimit hold whatever the latency says', () => {
  const capped = run({ baseMs: BASE, phases: [{ fromMs: 0, workers: 40 }], loadFactor: 3, durationMs: 15_000, limiter: { maxLimit: 25 } });
  assert.ok(capped.trace.every((t) => t.limit <= 25));
  assert.ok(
    steady(capped, 5_000, 15_000).every((t) => t.limit === 25),
    'an upstream with room keeps the limit at maxLimit',
  );
  const floored = run({ baseMs: BASE, phases: [{ fromMs: 0, workers: 4 }], loadFactor: 3, durationMs: 15_000, limiter: { minLimit: 10 } });
  assert.ok(
    floored.trace.every((t) => t.limit >= 10),
    'probes included',
  );
  // With 4 workers the right limit is about 6: the floor holds it at 10 and a little over, since a probe at 10 in flight
  // measures a queue, not the no-load latency (docs/overload.md: keep minLimit under the upstream's capacity).
  const floor = steady(floored, 5_000, 15_000).map((t) => t.limit);
  assert.ok(
    floor.every((l) => l >= 10 && l <= 14),
    floor.join(','),
  );
});

test('errors and drops lower the limit to minLimit while they last, and it recovers after', () => {
  for (const failure of ['error', 'drop'] as const) {
    const r = run({
      baseMs: BASE,
      phases: [{ fromMs: 0, workers: 40 }],
      loadFactor: 3,
      durationMs: 30_000,
      limiter: { minLimit: 2 },
      // The upstream fails 20 % of calls from 10 s to 15 s, at no extra latency: only the error signal says it is in trouble.
      failure: (now, random) => (now >= 10_000 && now < 15_000 && random() < 0.2 ? failure : undefined),
    });
    const before = steady(r, 8_000, 10_000);
    assert.ok(
      before.every((t) => t.limit >= 35),
      `${failure}: limit before ${before.map((t) => t.limit).join(',')}`,
    );
    const during = steady(r, 13_000, 15_000);
    // A window of 10 calls with none failing (0.8¹⁰ ≈ 11 %) lets it up a step or two before the next error takes it back.
    assert.ok(
      during.every((t) => t.limit <= 5),
      `${failure}: limit during ${during.map((t) => t.limit).join(',')}`,
    );
    assert.ok(
      during.some((t) => t.limit === 2),
      `${failure}: reaches minLimit`,
    );
    assert.ok(
      steady(r, 25_000, 30_000).every((t) => t.limit >= 35),
      `${failure}: recovered`,
    );
    const s = r.limiter.stats();
    assert.ok(s.overloads > 0 && s.lowered > 0 && s.raised > 0);
  }
});

test('noisy latency does not drag the limit down to a fraction of capacity', () => {
  // Latency uniform in base ± 50 %: the lowest of many window means once became the no-load estimate, the target fell under
  // the idle upstream's mean latency and the limit sank to about 45 for 100 workers (with these settings, the defaults then).
  const workers = 100;
  const r = run({
    baseMs: BASE,
    phases: [{ fromMs: 0, workers }],
    loadFactor: 3,
    durationMs: 30_000,
    jitter: 0.5,
    limiter: { smoothing: 0.2, probeSamples: 25 },
  });
  const limits = steady(r, 12_000, 30_000).map((t) => t.limit);
  assert.ok(
    limits.every((l) => Math.abs(l - workers) <= 0.3 * workers),
    `limits ${Math.min(...limits)}–${Math.max(...limits)}`,
  );
  assert.ok(goodput(r, 12_000, 29_000) >= 0.9 * ((workers / BASE) * 1000));
});

test('a run is deterministic: the same seed gives the same limits', () => {
  const once = () => run({ baseMs: BASE, phases: [{ fromMs: 0, workers: 20 }], loadFactor: 3, durationMs: 5_000 }).trace;
  assert.deepEqual(once(), once());
});
