// The shared vectors against the MemoryStore (the Redis and cluster stores run the same file's cases).
import { MemoryStore } from '../../src/index.js';
import { runVectors } from './format.js';

runVectors('memory', async (clock) => {
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  return { store, teardown: () => store.close() };
});
