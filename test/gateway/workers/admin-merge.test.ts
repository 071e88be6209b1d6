// How the primary puts the workers' admin answers together under --workers: limited keys as a union with refusals summed,
// in-memory blocks as the longest, dashboard numbers summed as /metrics sums them (end to end in admin-workers.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DashboardStats } from '../../../src/gateway/admin/dashboard-stats.js';
import { mergeKeyState, mergeLimited, mergeStats } from '../../../src/gateway/workers/admin-merge.js';

const limited = (tracked: number, keys: Array<[string, string, number]>) => ({
  minutes: 5,
  tracked,
  rules: [{ rule: 'api', keys: keys.map(([policy, key, refusals]) => ({ policy, key, refusals })) }],
});

describe('--workers: admin answers put together', () => {
  it('/admin/limited: a key refused in two workers is listed once with both counts, ties by policy then key, cut to top', () => {
    const merged = mergeLimited(
      [
        limited(3, [
          ['burst', 'a', 4],
          ['burst', 'b', 2],
          ['daily', 'a', 1],
        ]),
        limited(2, [
          ['burst', 'b', 3],
          ['burst', 'c', 5],
        ]),
      ],
      3,
    );
    assert.deepEqual(merged, {
      minutes: 5,
      tracked: 5,
      rules: [
        {
          rule: 'api',
          keys: [
            { policy: 'burst', key: 'b', refusals: 5 },
            { policy: 'burst', key: 'c', refusals: 5 },
            { policy: 'burst', key: 'a', refusals: 4 },
          ],
        },
      ],
    });
  });

  it("a key's state: the lead's counts, each policy's in-memory block the longest any worker holds", () => {
    const state = (burstBlock: number, dailyBlock: number, remaining: number) => ({
      rule: 'api',
      key: 'k',
      policies: [
        { policy: 'burst', remaining, memoryBlockMs: burstBlock },
        { policy: 'daily', remaining: 90, memoryBlockMs: dailyBlock },
      ],
    });
    assert.deepEqual(
      mergeKeyState(state(0, 500, 1), [state(900, 0, 0), { policies: [{ policy: 'other', memoryBlockMs: 5000 }] }]),
      state(900, 500, 1),
    );
    assert.deepEqual(mergeKeyState({ error: 'no rule' }, [state(1, 1, 1)]), { error: 'no rule' }, 'an error answer is left as it is');
  });

  it('dashboard: decisions and store latency summed, connected only when every worker is, the worst breaker, limited keys as a union', () => {
    const stats = (allowed: number, breaker: 'closed' | 'open', connected: boolean, key: string): DashboardStats => ({
      at: 1,
      decisions: [
        { rule: 'api', outcome: 'allowed', count: allowed },
        { rule: 'api', outcome: 'limited', count: 1 },
      ],
      store: {
        description: 'cluster',
        connected,
        latency: [
          {
            store: 'cluster',
            result: 'ok',
            count: 2,
            sumSeconds: 0.5,
            buckets: [
              { le: 0.001, count: 1 },
              { le: 0.01, count: 2 },
            ],
          },
        ],
      },
      rules: [
        {
          rule: 'api',
          shadow: false,
          policies: [
            { policy: 'burst', breaker, retryInMs: breaker === 'open' ? 700 : 0, fallback: 'insurance', fallbackInUse: breaker === 'open' },
          ],
        },
      ],
      limited: { minutes: 5, rules: [{ rule: 'api', keys: [{ policy: 'burst', key, refusals: 1 }] }] },
    });
    const merged = mergeStats([stats(3, 'closed', true, 'a'), stats(4, 'open', false, 'a')], 42);
    assert.equal(merged.at, 42);
    assert.deepEqual(merged.decisions, [
      { rule: 'api', outcome: 'allowed', count: 7 },
      { rule: 'api', outcome: 'limited', count: 2 },
    ]);
    assert.deepEqual(merged.store, {
      description: 'cluster',
      connected: false,
      latency: [
        {
          store: 'cluster',
          result: 'ok',
          count: 4,
          sumSeconds: 1,
          buckets: [
            { le: 0.001, count: 2 },
            { le: 0.01, count: 4 },
          ],
        },
      ],
    });
    assert.deepEqual(merged.rules[0]!.policies, [
      { policy: 'burst', breaker: 'open', retryInMs: 700, fallback: 'insurance', fallbackInUse: true },
    ]);
    assert.deepEqual(merged.limited, { minutes: 5, rules: [{ rule: 'api', keys: [{ policy: 'burst', key: 'a', refusals: 2 }] }] });
  });
});
