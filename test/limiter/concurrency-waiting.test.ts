// ConcurrencyLimiter's wait option on the memory store: a waiting acquire gets the slot a local release frees at once, in arrival order, and never after its timeout; a full line refuses at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConcurrencyLimiter, ErrorCode, MemoryStore, isFloodgateError, type Slot } from '../../src/index.js';
import { SLOT_POLL_MS } from '../../src/limiter/concurrency-waiting.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A memory store counting its acquireSlot calls. */
function countingStore(): { store: MemoryStore; calls: () => number } {
  const store = new MemoryStore();
  let calls = 0;
  const acquire = store.acquireSlot!.bind(store);
  store.acquireSlot = (...args) => {
    calls++;
    return acquire(...args);
  };
  return { store, calls: () => calls };
}

test('ConcurrencyLimiter wait is checked like RateLimiter wait', () => {
  assert.throws(
    () => new ConcurrencyLimiter({ limit: 1, wait: true as never }),
    (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_OPTIONS) && /wait takes options, not true/.test(e.message),
  );
  assert.throws(
    () => new ConcurrencyLimiter({ limit: 1, wait: { timeout: '1s', max: 3 } as never }),
    (e: unknown) => isFloodgateError(e, ErrorCode.UNKNOWN_OPTION),
  );
});

test('a release in this process lets the first waiting acquire in at once; the store is asked only every 25 ms meanwhile', async () => {
  const { store, calls } = countingStore();
  const limiter = new ConcurrencyLimiter({ store, limit: 1, wait: { timeout: '2s' } });
  const held = await limiter.acquire('k');
  assert.equal(held.waitedMs, 0);
  const waiting = limiter.acquire('k');
  await sleep(200);
  const asked = calls();
  // One acquire for the holder, one for the waiter's first try, then about one per 25 ms.
  assert.ok(asked >= 5 && asked <= 12, `${asked} store calls while waiting 200 ms`);
  const released = Date.now();
  await held.release();
  const slot = await waiting;
  const after = Date.now() - released;
  assert.equal(slot.allowed, true);
  assert.ok(after < 15, `admitted ${after} ms after the release`);
  assert.ok(slot.waitedMs! >= 195, `waitedMs ${slot.waitedMs}`);
  await slot.release();
});

test('waiting acquires get slots in arrival order; one whose timeout passes is refused then, not later', async () => {
  const limiter = new ConcurrencyLimiter({ limit: 1, wait: { timeout: '300ms' } });
  const first = await limiter.acquire('k');
  const order: string[] = [];
  const take = (name: string): Promise<Slot> =>
    limiter.acquire('k').then((slot) => {
      order.push(slot.allowed ? name : `${name} refused`);
      return slot;
    });
  const started = Date.now();
  const [b, c] = [take('b'), take('c')];
  await sleep(50);
  await first.release();
  const slotB = await b;
  await sleep(50);
  await slotB.release();
  const slotC = await c;
  assert.deepEqual(order, ['b', 'c']);
  // d waits for a slot nobody frees: refused at its timeout.
  const d = await limiter.acquire('k');
  const took = Date.now() - started;
  assert.equal(d.allowed, false);
  // Refused once its next ask (every SLOT_POLL_MS) would answer after the timeout: within one poll of it, never past it.
  assert.ok(d.waitedMs! >= 300 - SLOT_POLL_MS - 5 && d.waitedMs! <= 310, `d waited ${d.waitedMs} ms`);
  assert.ok(took < 600, `${took} ms in all`);
  await slotC.release();
});

test('a full line refuses an acquire at once', async () => {
  const limiter = new ConcurrencyLimiter({ limit: 1, wait: { timeout: '1s', maxQueue: 1 } });
  const held = await limiter.acquire('k');
  const waiting = limiter.acquire('k');
  await sleep(5);
  const started = Date.now();
  const refused = await limiter.acquire('k');
  assert.equal(refused.allowed, false);
  assert.equal(refused.waitedMs, 0);
  assert.ok(Date.now() - started < 20);
  assert.equal(await refused.release(), false);
  await held.release();
  const slot = await waiting;
  assert.equal(slot.allowed, true);
  await slot.release();
});
