// The shared conformance suite and vectors through real worker threads: one on its parentPort, one on its own MessageChannel, round-robin.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { runConformance } from '../conformance/suite.js';
import { runVectors } from '../vectors/format.js';
import { remoteTarget, startThread } from './support/remote.js';

const primary = new ClusterStorePrimary({ sweepIntervalMs: 0, cluster: false });
after(() => primary.close());

const factory = async (clock: () => number) => {
  const [onParent, onPort] = await Promise.all([startThread({ clock: true }), startThread({ clock: true }, true)]);
  primary.attach(onParent.worker);
  primary.attach(onPort.port!);
  const remotes = [onParent, onPort];
  return remoteTarget(remotes, clock);
};

runConformance('cluster store, 2 worker threads', factory);
runVectors('cluster store, 2 worker threads', factory);

test('every operation went through the primary, and exited threads were detached', async () => {
  // A MessagePort reports 'close' on a later turn than its thread's exit.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const { operations, attached } = primary.stats();
  assert.ok(operations > 500, `operations: ${operations}`);
  assert.equal(attached, 0);
});
