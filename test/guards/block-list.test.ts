// The in-memory block list under a flood of distinct refused keys: its collection of expired entries runs at most once a second, not once per insert.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BlockList } from '../../src/guards/block-list.js';

test('regression: a flood of distinct blocked keys does not scan the whole list on every insert (O(keys) per refusal)', () => {
  const list = new BlockList({ maxKeys: 10_000 });
  let scans = 0;
  const collect = list.collect.bind(list);
  list.collect = (now: number) => {
    scans++;
    collect(now);
  };
  // An hour-long block per key: nothing expires, so every collection finds nothing to drop.
  for (let i = 0; i < 50_000; i++) list.add(`flood-${i}`, 3_600_000, 1_000_000 + Math.floor(i / 20_000) * 1000);
  assert.ok(scans <= 3, `${scans} scans of the list for 50 000 inserts over 3 s`);
  assert.equal(list.size, 10_000, 'still bounded by maxKeys');
  assert.ok(list.blockedFor('flood-49999', 1_003_000) > 0, 'the newest block is kept');
});
