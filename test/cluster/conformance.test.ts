// The shared conformance suite and vectors through real node:cluster workers: two forked processes, round-robin, one ClusterStorePrimary here; once as simulations run it, once with known refusals on.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { runConformance } from '../conformance/suite.js';
import { runVectors } from '../vectors/format.js';
import { forkWorker, remoteTarget } from './support/remote.js';

// Workers send the suite's ManualClock time with every operation; a sweep on
// the primary's real clock would see that time as long past.
const primary = new ClusterStorePrimary({ sweepIntervalMs: 0 });
after(() => primary.close());

const factory = async (clock: () => number) => {
  const remotes = await Promise.all([forkWorker({ clock: true }), forkWorker({ clock: true })]);
  return remoteTarget(remotes, clock);
};

runConformance('cluster store, 2 node:cluster workers', factory);
runVectors('cluster store, 2 node:cluster workers', factory);

// With a clock, a store keeps no known refusals by default; turned on, each
// worker refuses what it learned on the suite's clock, and the primary's
// invalidations reach it before the test's next call (same channel), so the
// suite must hold unchanged.
const remembering = async (clock: () => number) => {
  const remotes = await Promise.all([
    forkWorker({ clock: true, knownRefusals: 10_000 }),
    forkWorker({ clock: true, knownRefusals: 10_000 }),
  ]);
  return remoteTarget(remotes, clock);
};

runConformance('cluster store with known refusals, 2 node:cluster workers', remembering);
runVectors('cluster store with known refusals, 2 node:cluster workers', remembering);

test('every operation above went through the primary, in fewer messages than operations', () => {
  const { batches, operations } = primary.stats();
  assert.ok(operations > 500, `operations: ${operations}`);
  assert.ok(batches < operations, `batches ${batches} vs operations ${operations}`);
});

test('the run with known refusals used them: the primary hinted keys and invalidated some', () => {
  const { refused, invalidations } = primary.stats();
  assert.ok(refused > 0 || invalidations > 0, `refused ${refused}, invalidations ${invalidations}`);
  assert.ok(invalidations > 0, `invalidations ${invalidations}`);
});
