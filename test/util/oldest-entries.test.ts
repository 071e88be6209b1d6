// OldestEntries against the obvious scan (map.entries().next()): the same oldest entry under random writes, deletes, moves, shifts and clears.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OldestEntries } from '../../src/util/oldest-entries.js';
import { BoundedMap } from '../../src/util/bounded-map.js';

function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

for (const seed of [1, 2, 3]) {
  test(`the oldest entry is the scan's, through writes, moves, deletes, shifts and clears (seed ${seed})`, () => {
    const rnd = random(seed);
    const map = new Map<number, { v: number }>();
    const oldest = new OldestEntries(map);
    for (let i = 0; i < 20_000; i++) {
      const r = rnd();
      const key = Math.floor(rnd() * 300);
      if (r < 0.45) {
        // A write always stores a new value; a present key moves to the young end, as MemoryStore writes do.
        map.delete(key);
        map.set(key, { v: i });
      } else if (r < 0.6) map.delete(key);
      else if (r < 0.8) {
        const expected = map.entries().next();
        const got = oldest.shift();
        if (expected.done === true) assert.equal(got, undefined);
        else assert.deepEqual(got, expected.value);
        if (got !== undefined) assert.equal(map.has(got[0]), false);
      } else if (r < 0.9995) {
        const expected = map.entries().next();
        assert.deepEqual(oldest.peek(), expected.done === true ? undefined : expected.value, `step ${i}`);
      } else map.clear();
    }
  });
}

test('BoundedMap drops its oldest keys in insertion order, touched keys last, through many drops', () => {
  const dropped: number[] = [];
  const m = new BoundedMap<number, number>(3, (key) => dropped.push(key));
  for (let i = 0; i < 6; i++) m.set(i, i);
  assert.deepEqual(dropped, [0, 1, 2]);
  m.touch(3);
  m.set(6, 6);
  assert.deepEqual(dropped, [0, 1, 2, 4]);
  assert.deepEqual([...m.keys()], [5, 3, 6]);
  m.clear();
  m.set(7, 7);
  assert.equal(m.dropOldest(), 7);
  assert.equal(m.dropOldest(), undefined);
});
