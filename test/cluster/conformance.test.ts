// The shared conformance suite and vectors through real node:cluster workers: two forked processes, round-robin, one ClusterStorePrimary here.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { runConformance } from '../conformance/suite.js';
import { runVectors } from '../vectors/format.js';
import { forkWorker, killAll, RemoteStore } from './support/remote.js';

// Workers send the suite's ManualClock time with every operation; a sweep on
// the primary's real clock would see that time as long past.
const primary = new ClusterStorePrimary({ sweepIntervalMs: 0 });
after(() => primary.close());

const factory = async (clock: () => number) => {
  const remotes = await Promise.all([forkWorker({ clock: true }), forkWorker({ clock: true })]);
  return { store: new RemoteStore(remotes, clock), teardown: () => killAll(remotes) };
};

runConformance('cluster store, 2 node:cluster workers', factory);
runVectors('cluster store, 2 node:cluster workers', factory);

test('every operation above went through the primary, in fewer messages than operations', () => {
  const { batches, operations } = primary.stats();
  assert.ok(operations > 500, `operations: ${operations}`);
  assert.ok(batches < operations, `batches ${batches} vs operations ${operations}`);
});
