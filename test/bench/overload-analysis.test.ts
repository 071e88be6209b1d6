/** The overload scenario's figures: counts by outcome, max-min fair shares, Jain's index, the limit's settling time. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { count, jain, maxMinFair, percentile, perSecond, settleTime, type GaugeSample } from '../../bench/overload/analysis.js';
import type { Outcome } from '../../bench/overload/load.js';

function outcome(at: number, status: number, latencyMs: number, extra: Partial<Outcome> = {}): Outcome {
  return { at, status, latencyMs, tenant: 't', cls: 'default', reason: undefined, error: false, ...extra };
}

describe('overload bench analysis', () => {
  it('a late 200 is admitted but not goodput; a 503 without Floodgate-Overload is not a refusal of the gate', () => {
    const counts = count(
      [
        outcome(0, 200, 60),
        outcome(1, 200, 2500),
        outcome(2, 503, 1, { reason: 'timeout' }),
        outcome(3, 503, 1, { reason: 'shed' }),
        outcome(4, 503, 10_000),
        outcome(5, 0, 2000),
        outcome(6, 0, 3, { error: true }),
      ],
      2000,
    );
    assert.deepEqual(counts, {
      offered: 7,
      admitted: 2,
      good: 1,
      refused: 2,
      refusedBy: { timeout: 1, shed: 1 },
      deadline: 1,
      other: 2,
    });
  });

  it('max-min fair shares give quiet tenants what they ask and split the rest', () => {
    const shares = maxMinFair({ noisy: 923, q1: 92.3, q2: 92.3, q3: 92.3 }, 400);
    assert.equal(shares.q1, 92.3);
    assert.ok(Math.abs(shares.noisy! - (400 - 3 * 92.3)) < 1e-9);
    assert.deepEqual(maxMinFair({ a: 300, b: 300 }, 400), { a: 200, b: 200 });
  });

  it("Jain's index is 1 for equal shares and 1/n when one takes everything", () => {
    assert.equal(jain([0.9, 0.9, 0.9]), 1);
    assert.ok(Math.abs(jain([1, 0, 0])! - 1 / 3) < 1e-12);
    assert.equal(jain([]), null);
  });

  it('the settling time is when the limit entered ±30 % of its settled value for good', () => {
    const samples: GaugeSample[] = [];
    // 24 until 7 s, then down by 2 a sample to 12, where it stays.
    for (let at = 0; at < 14_000; at += 100) {
      const limit = at < 7000 ? 24 : Math.max(12, 24 - 2 * ((at - 7000) / 100 + 1));
      samples.push({ at, limit, inFlight: null, queued: null });
    }
    const { seconds, settled } = settleTime(samples, 7000, 14_000, 0.3, 3000);
    assert.equal(settled, 12);
    // 24 − 2k ≤ 15.6 first at k = 5 (14): the sample at 7.4 s.
    assert.ok(Math.abs(seconds! - 0.4) < 1e-9);
  });

  it('percentiles are nearest-rank; per-second buckets go by when each request was due', () => {
    assert.equal(percentile([5, 1, 3, 2, 4], 0.5), 3);
    assert.equal(percentile([], 0.99), null);
    const seconds = perSecond([outcome(10, 200, 1), outcome(999, 200, 1), outcome(1000, 200, 1)], 2, (s) => s.length);
    assert.deepEqual(seconds, [2, 1]);
  });
});
