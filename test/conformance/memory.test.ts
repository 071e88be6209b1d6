// Runs the conformance suite against the MemoryStore.
import { MemoryStore } from '../../src/index.js';
import { runConformance } from './suite.js';

runConformance('memory', async (clock) => {
  const store = new MemoryStore({ clock });
  // One process's memory: it fails as one.
  return { store, failureScope: { kind: 'absent' }, teardown: () => store.close() };
});
