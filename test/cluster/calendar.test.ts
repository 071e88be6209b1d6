// Calendar windows on the cluster store with leases (leaseMs): the primary opens the window at the period's end on its own clock, and a worker's lease reports and keeps that end.
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { periodBounds, RateLimiter } from '../../src/index.js';
import { ClusterStore } from '../../src/stores/cluster/index.js';
import { cleanup, primaryOf, useCleanup } from './support/in-process.js';

useCleanup();

test('leased consumes of a daily calendar window report the time to midnight in the zone, and never more than the limit', async (t) => {
  const primary = primaryOf();
  const { port1, port2 } = new MessageChannel();
  primary.attach(port1);
  const store = new ClusterStore({ transport: port2, leaseMs: 100 });
  cleanup.push(async () => {
    await store.close();
    port1.close();
  });
  const period = { unit: 'day', timeZone: 'Pacific/Chatham' } as const;
  const l = new RateLimiter({ limit: 300, window: { calendar: 'day', timeZone: period.timeZone }, store });
  const before = Date.now();
  const decisions = [];
  for (let i = 0; i < 400; i++) decisions.push(l.consumeNow('k') ?? (await l.consume('k')));
  const after = Date.now();
  const end = periodBounds(period, before).end;
  if (end !== periodBounds(period, after).end) return t.skip('the day ended during the test');
  assert.equal(decisions.filter((d) => d.allowed).length, 300);
  assert.ok(primary.stats().leaseCalls > 0, 'the worker leased');
  // A lease's end is the primary's window end seen from the worker: reply time + ms left, so it may lie later by at
  // most the round trip, which the test's own span bounds.
  const span = after - before;
  for (const d of decisions) {
    assert.ok(
      d.resetMs >= end - after - 1 && d.resetMs <= end - before + span + 1,
      `resetMs ${d.resetMs}, to the end ${end - after}…${end - before}`,
    );
  }
});
