/** What a memory store snapshot costs: ms of the event loop to take and encode one, bytes per key, ms to restore, for N keys (default 100 000). */
import { decodeSnapshot, encodeSnapshot, MemoryStore, RateLimiter } from '../src/index.js';

const keys = Number(process.argv[2] ?? 100_000);
const store = new MemoryStore({ maxKeys: keys * 2 });
// A gateway rule's prefix and client addresses: keys the size the gateway writes.
const limiter = new RateLimiter({ store, limit: 100, window: '1h', prefix: 'fg:gw:api:p:fixed-window:100:3600000:0' });
for (let i = 0; i < keys; i++) limiter.consumeNow(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);

const time = <T>(run: () => T): [T, number] => {
  const started = performance.now();
  const value = run();
  return [value, performance.now() - started];
};
const [snapshot, takeMs] = time(() => store.snapshot());
const [text, encodeMs] = time(() => encodeSnapshot(snapshot));
const [restored, restoreMs] = time(() => MemoryStore.restore(decodeSnapshot(text), { maxKeys: keys * 2 }));
console.log(
  `${keys} keys: take ${takeMs.toFixed(1)} ms + encode ${encodeMs.toFixed(1)} ms of the event loop, ` +
    `${Math.round(text.length / keys)} bytes per key; decode + restore ${restoreMs.toFixed(1)} ms (${restored.size} keys)`,
);
