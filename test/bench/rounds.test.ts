/** The bench harness's --rounds arithmetic: medians of paired ratios, summed counts, failures kept visible. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Row } from '../../bench/lib/report.js';
import { combineRounds, median, roundOrder } from '../../bench/lib/rounds.js';

function row(variant: string, rps: number, ratio: number, extra: Partial<Row> = {}): Row {
  return {
    scenario: 's',
    variant,
    rps,
    p50Ms: rps / 1000,
    p99Ms: rps / 100,
    redisCmdsPerReq: 0,
    ratio,
    serverCpuUsPerReq: 10,
    requests: rps * 10,
    p90Ms: 1,
    maxMs: rps / 10,
    status: { '2xx': 1, '429': rps, other: 0 },
    socketErrors: { connect: 0, read: 1, write: 0, timeout: 0 },
    redisCommands: { evalsha: 2 },
    durationS: 10,
    connections: 100,
    ...extra,
  };
}

describe('bench rounds', () => {
  it('median takes the middle value, or the mean of the middle two', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([]), null);
  });

  it('roundOrder rotates by one per round', () => {
    assert.deepEqual(roundOrder(['a', 'b', 'c'], 0), ['a', 'b', 'c']);
    assert.deepEqual(roundOrder(['a', 'b', 'c'], 1), ['b', 'c', 'a']);
    assert.deepEqual(roundOrder(['a', 'b', 'c'], 4), ['b', 'c', 'a']);
  });

  it('one round is returned as it is', () => {
    const only = row('v', 100, 1);
    assert.equal(combineRounds([only]), only);
  });

  it('takes medians of rates, latencies and ratios, sums counts, and keeps the rounds', () => {
    const rounds = [row('v', 100, 0.9), row('v', 300, 0.97), row('v', 200, 1.02)];
    const combined = combineRounds(rounds);
    assert.equal(combined.rps, 200);
    assert.equal(combined.ratio, 0.97); // the median of the paired ratios, not a ratio of medians
    assert.equal(combined.p99Ms, 2);
    assert.equal(combined.maxMs, 30); // the worst round's
    assert.equal(combined.requests, 6000);
    assert.deepEqual(combined.status, { '2xx': 3, '429': 600, other: 0 });
    assert.deepEqual(combined.socketErrors, { connect: 0, read: 3, write: 0, timeout: 0 });
    assert.deepEqual(combined.redisCommands, { evalsha: 6 });
    assert.deepEqual(combined.rounds, rounds);
  });

  it('combines the fixed-rate runs too', () => {
    const rate = (p99Ms: number, errors: number) => ({
      targetRps: 2000,
      achievedRps: 2000,
      requests: 20000,
      p50Ms: 1,
      p99Ms,
      maxMs: p99Ms * 2,
      errors,
    });
    const combined = combineRounds([
      row('v', 1, 1, { fixedRate: rate(3, 0) }),
      row('v', 1, 1, { fixedRate: rate(2.5, 1) }),
      row('v', 1, 1, { fixedRate: rate(9, 0) }),
    ]);
    assert.equal(combined.fixedRate?.p99Ms, 3);
    assert.equal(combined.fixedRate?.maxMs, 18);
    assert.equal(combined.fixedRate?.errors, 1);
    assert.equal(combined.fixedRate?.requests, 60000);
  });

  it('combines open-loop runs per point, a share and a rate kept apart', () => {
    const run = (point: { share: number } | { rate: number }, p99Ms: number) => ({
      ...point,
      targetRps: 'rate' in point ? point.rate : 10000,
      achievedRps: 1000,
      p50Ms: 1,
      p99Ms,
      errors: 1,
    });
    const combined = combineRounds([
      row('v', 1, 1, { openLoop: [run({ share: 0.8 }, 5), run({ rate: 8000 }, 2)] }),
      row('v', 1, 1, { openLoop: [run({ rate: 8000 }, 4), run({ share: 0.8 }, 7)] }),
      row('v', 1, 1, { openLoop: [run({ share: 0.8 }, 6), run({ rate: 8000 }, 3)] }),
    ]);
    assert.deepEqual(combined.openLoop, [
      { share: 0.8, targetRps: 10000, achievedRps: 1000, p50Ms: 1, p99Ms: 6, errors: 3 },
      { rate: 8000, targetRps: 8000, achievedRps: 1000, p50Ms: 1, p99Ms: 3, errors: 3 },
    ]);
  });

  it('a variant that failed in any round is reported failed, naming the round', () => {
    const failed = { ...row('v', 0, 0), rps: null, ratio: null, error: 'server died' };
    const combined = combineRounds([row('v', 100, 1), failed, row('v', 100, 1)]);
    assert.equal(combined.error, 'round 2: server died');
    assert.equal(combined.rounds?.length, 3);
  });
});
