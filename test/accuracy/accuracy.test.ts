// Accuracy suite: every algorithm × traffic pattern through RateLimiter, checked against the exact reference in reference.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ALGORITHMS, applyOperation, type Algorithm, type KeyState, type Policy } from '../../src/index.js';
import { drive, startOf, type Answered, type RunPolicy } from './drive.js';
import { checkGcra, ExactGcra, ExactSlidingLog, maxInInterval, meanOvershoot, tokenBucketBound } from './reference.js';
import { generate, PATTERNS, type Pattern } from './traffic.js';

/**
 * Policies with different ratios: the common case, odd numbers that make
 * every division inexact, and a limit above the window in ms (several units
 * per ms), where rounding in the sliding window and GCRA matters most.
 */
const POLICIES: RunPolicy[] = [
  { limit: 20, windowMs: 1000 },
  { limit: 7, windowMs: 333 },
  { limit: 50, windowMs: 20 },
];
const WINDOWS = 40;
const SEEDS = [1, 2, 3];

/** The most units any window-length interval may hold, per algorithm (derivations in docs/algorithms.md). */
function windowBound(algorithm: Algorithm, { limit: L, windowMs: W }: RunPolicy): number {
  switch (algorithm) {
    // Windows open at a key's first consume, so the unit that opened one sits
    // at its very start: an interval reaching into the next window misses it.
    case 'fixed-window':
      return 2 * L - 1;
    // Tail of window A (≤ p units) plus the head of B up to e ≤ W−1 ms in,
    // where B admits at most L − p·(W−e)/W: ⌊L + p·e/W⌋ ≤ 2L − ⌈L/W⌉.
    case 'sliding-window':
      return 2 * L - Math.ceil(L / W);
    case 'sliding-log':
      return L;
    case 'token-bucket':
      return tokenBucketBound(L, W, W);
  }
}

/** An independent decider for the algorithms that have an exact definition. */
function referenceFor(algorithm: Algorithm, { limit, windowMs }: RunPolicy): ExactSlidingLog | ExactGcra | undefined {
  if (algorithm === 'sliding-log') return new ExactSlidingLog(limit, windowMs);
  if (algorithm === 'token-bucket') return new ExactGcra(limit, windowMs);
  return undefined;
}

/**
 * Follows the run with the pure algorithm (applyOperation, as the memory store
 * applies it) to check that every refusal's retryAfterMs is exact: the same
 * consume fits at now + retryAfterMs and not one ms earlier.
 */
class RetryChecker {
  private state: KeyState | undefined;
  private expiresAt = 0;
  private readonly policy: Policy;
  private readonly t0: number;

  constructor(algorithm: Algorithm, run: RunPolicy) {
    this.policy = { algorithm, limit: run.limit, windowMs: run.windowMs, blockMs: 0 };
    this.t0 = startOf(run.windowMs);
  }

  private at(now: number): KeyState | undefined {
    // As the memory store does: state past its expiry is no state.
    return this.state && this.expiresAt > now ? this.state : undefined;
  }

  private fits(now: number, cost: number): boolean {
    return applyOperation(this.at(now), 'consume', cost, this.policy, now).outcome.allowed;
  }

  /** Returns a failure message, or undefined. */
  follow(answer: Answered): string | undefined {
    const now = this.t0 + answer.t;
    const applied = applyOperation(this.at(now), 'consume', answer.cost, this.policy, now);
    if (applied.outcome.allowed !== answer.allowed) return 'the pure algorithm and the limiter disagree';
    if (answer.allowed) {
      this.state = applied.state;
      this.expiresAt = applied.expiresAt;
      return undefined;
    }
    const retry = answer.retryAfterMs;
    if (!(retry > 0)) return `refused with retryAfterMs ${retry}`;
    if (!this.fits(now + retry, answer.cost)) return `still refused at now + retryAfterMs (${retry})`;
    if (this.fits(now + retry - 1, answer.cost)) return `already admitted at now + retryAfterMs − 1 (${retry - 1})`;
    return undefined;
  }
}

/** Drives one run and checks each decision as it comes; returns the admissions. */
async function checkedRun(algorithm: Algorithm, pattern: Pattern, policy: RunPolicy, seed: number) {
  const requests = generate(pattern, { ...policy, windows: WINDOWS, seed });
  const reference = referenceFor(algorithm, policy);
  const retries = new RetryChecker(algorithm, policy);
  const where = `${algorithm}, ${pattern}, limit ${policy.limit}/${policy.windowMs} ms, seed ${seed}`;
  const run = await drive(algorithm, requests, policy, (answer) => {
    const at = `${where}: consume(${answer.cost}) at t=${answer.t}`;
    if (reference) {
      assert.equal(answer.allowed, reference.fits(answer.t, answer.cost), `${at}: the exact reference decides otherwise`);
      if (answer.allowed) reference.admit(answer.t, answer.cost);
      else assert.equal(answer.t + answer.retryAfterMs, reference.earliest(answer.t, answer.cost), `${at}: retryAfterMs is not exact`);
    }
    const failure = retries.follow(answer);
    assert.equal(failure, undefined, `${at}: ${failure}`);
  });
  return { ...run, where };
}

describe('accuracy: the reference itself, on hand-checked cases', () => {
  const adm = (...pairs: [number, number][]) => pairs.map(([t, cost]) => ({ t, cost }));

  test('interval counts are half-open: [t, t+d) holds t … t+d−1', () => {
    assert.deepEqual(maxInInterval(adm([0, 1], [999, 1], [1000, 1]), 1000), { units: 2, start: 0 });
    assert.deepEqual(maxInInterval(adm([0, 1], [1000, 2], [1999, 1]), 1000), { units: 3, start: 1000 });
    assert.equal(maxInInterval(adm([0, 1], [1000, 1]), 1001).units, 2);
  });

  test('the GCRA bound: limit at once, then limit per window', () => {
    assert.equal(tokenBucketBound(20, 1000, 1000), 39);
    assert.equal(tokenBucketBound(2, 1000, 500), 2);
    assert.equal(tokenBucketBound(2, 1000, 501), 3);
    // Two units at 0 then one more: fine after 500 ms (half a window refills one of two), not at 499.
    assert.ok(checkGcra(adm([0, 2], [500, 1]), 2, 1000).excess <= 0);
    assert.deepEqual(checkGcra(adm([0, 2], [499, 1]), 2, 1000), { excess: 2, from: 0, to: 1 });
  });

  test('the exact deciders admit, refuse and name the retry time from their definitions', () => {
    const log = new ExactSlidingLog(2, 1000);
    log.admit(0, 1);
    log.admit(400, 1);
    assert.equal(log.fits(999, 1), false);
    assert.equal(log.earliest(999, 1), 1000);
    assert.equal(log.earliest(999, 2), 1400);
    assert.equal(log.fits(1000, 1), true);

    const gcra = new ExactGcra(2, 1000);
    gcra.admit(0, 2);
    assert.equal(gcra.fits(499, 1), false);
    assert.equal(gcra.earliest(0, 1), 500);
    assert.equal(gcra.earliest(0, 2), 1000);
    assert.equal(gcra.fits(500, 1), true);
  });

  test('average over-admission counts every window-length interval', () => {
    // 3 units at 0, limit 2, window 10, run of 20 ms: [0, 10) is 1 unit over; the ten others, [1, 11) … [10, 20), hold none.
    assert.equal(meanOvershoot(adm([0, 3]), 2, 10, 20), 1 / 11 / 2);
  });
});

describe('accuracy: admissions against the exact reference', () => {
  for (const algorithm of ALGORITHMS) {
    test(`${algorithm}: every pattern stays within its bound; decisions and retryAfterMs are exact`, async () => {
      for (const policy of POLICIES) {
        const bound = windowBound(algorithm, policy);
        for (const pattern of PATTERNS) {
          for (const seed of SEEDS) {
            const { admitted, where } = await checkedRun(algorithm, pattern, policy, seed);
            const peak = maxInInterval(admitted, policy.windowMs);
            assert.ok(
              peak.units <= bound,
              `${where}: ${peak.units} units in [${peak.start}, ${peak.start + policy.windowMs}), bound ${bound}`,
            );
            if (algorithm === 'token-bucket') {
              const gcra = checkGcra(admitted, policy.limit, policy.windowMs);
              assert.ok(
                gcra.excess <= 0,
                `${where}: admissions ${gcra.from}…${gcra.to} break the GCRA bound by ${gcra.excess}/${policy.windowMs} units`,
              );
              for (const d of [1, Math.ceil(policy.windowMs / 7), 3 * policy.windowMs]) {
                const p = maxInInterval(admitted, d);
                assert.ok(
                  p.units <= tokenBucketBound(policy.limit, policy.windowMs, d),
                  `${where}: ${p.units} units in ${d} ms from t=${p.start}`,
                );
              }
            }
          }
        }
      }
    });
  }
});

describe('accuracy: the documented worst cases are reached', () => {
  const policy: RunPolicy = { limit: 20, windowMs: 1000 };
  const peakOf = async (algorithm: Algorithm, pattern: Pattern) =>
    maxInInterval((await drive(algorithm, generate(pattern, { ...policy, windows: 12, seed: 1 }), policy)).admitted, policy.windowMs).units;

  test('fixed window: a burst either side of its edge admits 2·limit − 1 within one window length', async () => {
    assert.equal(await peakOf('fixed-window', 'edge-burst'), 2 * policy.limit - 1);
  });

  test('sliding window and token bucket: an edge burst then a flood admit 2·limit − ⌈limit/window⌉', async () => {
    const worst = 2 * policy.limit - Math.ceil(policy.limit / policy.windowMs);
    assert.equal(await peakOf('sliding-window', 'edge-burst-flood'), worst);
    assert.equal(await peakOf('token-bucket', 'edge-burst-flood'), worst);
  });

  test('sliding log: no pattern takes it past the limit', async () => {
    for (const pattern of PATTERNS) assert.equal(await peakOf('sliding-log', pattern), policy.limit, pattern);
  });
});

describe('accuracy: steady traffic at 2× the limit rate', () => {
  const policy: RunPolicy = { limit: 20, windowMs: 1000 };
  const windows = 100;
  const perWindow = async (algorithm: Algorithm) => {
    const { admitted } = await drive(algorithm, generate('steady', { ...policy, windows, seed: 3 }), policy);
    const units = new Array<number>(windows).fill(0);
    for (const a of admitted) units[Math.floor(a.t / policy.windowMs)]! += a.cost;
    return { units, peak: maxInInterval(admitted, policy.windowMs).units };
  };

  test('every algorithm admits at least 0.9·limit in every aligned window', async () => {
    for (const algorithm of ALGORITHMS) {
      const { units } = await perWindow(algorithm);
      const least = Math.min(...units);
      assert.ok(least >= 0.9 * policy.limit, `${algorithm}: only ${least} units in some window`);
    }
  });

  test('only the token bucket goes past the limit, and only while spending its initial burst', async () => {
    for (const algorithm of ALGORITHMS) {
      const { units, peak } = await perWindow(algorithm);
      if (algorithm === 'token-bucket') {
        assert.equal(peak, tokenBucketBound(policy.limit, policy.windowMs, policy.windowMs));
        // Once the burst is spent, the refill rate is the limit per window.
        assert.ok(
          units.slice(2).every((u) => u === policy.limit),
          `token-bucket: ${units.join(',')}`,
        );
      } else {
        assert.ok(peak <= policy.limit, `${algorithm}: ${peak} units in one window length`);
      }
    }
  });
});
