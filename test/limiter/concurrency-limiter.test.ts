/** ConcurrencyLimiter in one process: option errors, the one-time ttl warnings, the heartbeat on real time, failure modes, and a full slot table. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ConcurrencyLimiter, FloodgateError, ManualClock, MemoryStore, type Operation, type Outcome, type Store } from '../../src/index.js';
import { forgetWarnings } from '../../src/core/warnings.js';
import { captureWarnings } from '../http/support/warnings.js';

const code = (c: string) => (error: unknown) => error instanceof FloodgateError && error.code === c;

test('bad options throw typed errors that say what to write', () => {
  assert.throws(() => new ConcurrencyLimiter({ limit: 0 }), {
    code: 'FLOODGATE_INVALID_LIMIT',
    message: 'ConcurrencyLimiter limit must be a positive whole number; got 0.',
  });
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, ttl: 'soon' }), code('FLOODGATE_INVALID_DURATION'));
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, ttl: '30d' }), code('FLOODGATE_INVALID_DURATION'));
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, max: 3 } as never), code('FLOODGATE_UNKNOWN_OPTION'));
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, heartbeat: 'yes' as never }), {
    code: 'FLOODGATE_INVALID_OPTIONS',
    message: 'ConcurrencyLimiter heartbeat must be true or false; got "yes".',
  });
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, onStoreFailure: 'open' as never }), code('FLOODGATE_INVALID_OPTIONS'));
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, prefix: '' }), code('FLOODGATE_INVALID_OPTIONS'));
});

test('a store without concurrency slots: a clear error at construction, not a failure per call', () => {
  const counterOnly: Store = { name: 'counters', apply: () => Promise.reject(new Error('unused')) };
  assert.throws(() => new ConcurrencyLimiter({ limit: 2, store: counterOnly }), {
    code: 'FLOODGATE_INVALID_STORE',
    message:
      'ConcurrencyLimiter store must support concurrency slots (acquireSlot, releaseSlot and renewSlot), as MemoryStore, RedisStore and ClusterStore do; the counters store does not.',
  });
});

test('acquire of an empty key rejects with INVALID_KEY', async () => {
  await assert.rejects(new ConcurrencyLimiter({ limit: 1 }).acquire(''), code('FLOODGATE_INVALID_KEY'));
});

test('ttl: 500 (meant as seconds): one warning that it is 500 ms and what a short ttl does', async () => {
  forgetWarnings();
  const warnings = captureWarnings();
  new ConcurrencyLimiter({ limit: 2, ttl: 500 });
  new ConcurrencyLimiter({ limit: 3, ttl: 500 });
  new ConcurrencyLimiter({ limit: 2, ttl: '2s' });
  assert.deepEqual(await warnings.stop(), [
    {
      code: 'FLOODGATE_SLOT_TTL_SHORT',
      message:
        "ConcurrencyLimiter ttl is 500 ms (a bare number counts milliseconds: for 500 seconds write ttl: '500s'). A holder that pauses longer than that (a GC pause, a slow store call, a busy event loop) loses its slot while still working, and another caller takes it, so more than limit run at once. Use a ttl of a few seconds or more; the heartbeat keeps live slots held.",
    },
  ]);
});

test('heartbeat: false with a ttl of hours: one warning that a crashed holder keeps its slot that long', async () => {
  forgetWarnings();
  const warnings = captureWarnings();
  new ConcurrencyLimiter({ limit: 2, ttl: '2h', heartbeat: false });
  new ConcurrencyLimiter({ limit: 2, ttl: '2h' });
  new ConcurrencyLimiter({ limit: 2, ttl: '5m', heartbeat: false });
  assert.deepEqual(await warnings.stop(), [
    {
      code: 'FLOODGATE_HEARTBEAT_OFF_LONG_TTL',
      message:
        "ConcurrencyLimiter has heartbeat: false and ttl 7200000 ms: a holder that crashes keeps its slot taken for up to 120 minutes. Leave heartbeat on (the default) with a short ttl such as '30s', which brings a crashed holder's slot back within 40 s and keeps live ones held.",
    },
  ]);
});

test('the heartbeat keeps a slot held past its ttl on real time; without it the slot lapses at the ttl', async () => {
  const store = new MemoryStore();
  const beating = new ConcurrencyLimiter({ limit: 1, ttl: '1s', store, prefix: 'beat' });
  const held = await beating.acquire('k');
  assert.equal(held.allowed, true);
  await sleep(1600);
  assert.equal((await beating.acquire('k')).allowed, false, 'renewed every ttl/3, so still held after 1.6 ttl');
  assert.equal(await held.release(), true);
  assert.equal((await beating.acquire('k')).allowed, true);

  const silent = new ConcurrencyLimiter({ limit: 1, ttl: '1s', store, prefix: 'silent', heartbeat: false });
  const lapsing = await silent.acquire('k');
  await sleep(1100);
  assert.equal((await silent.acquire('k')).allowed, true, 'no renewal: the slot came back at its ttl');
  assert.equal(await lapsing.release(), false);
  await store.close();
});

/** A store whose slot calls fail as an unreachable Redis's would. */
class DownStore implements Store {
  readonly name = 'down';
  private fail(): Promise<never> {
    return Promise.reject(new FloodgateError('FLOODGATE_STORE_ERROR', 'down store failed: connection refused'));
  }
  apply(_operation: Operation): Promise<Outcome> {
    return this.fail();
  }
  acquireSlot(): Promise<never> {
    return this.fail();
  }
  releaseSlot(): Promise<never> {
    return this.fail();
  }
  renewSlot(): Promise<never> {
    return this.fail();
  }
}

test('a failing store: reject by default, admit with fail-open, refuse with fail-closed', async () => {
  const store = new DownStore();
  await assert.rejects(new ConcurrencyLimiter({ limit: 1, store }).acquire('k'), code('FLOODGATE_STORE_ERROR'));
  const open = await new ConcurrencyLimiter({ limit: 1, store, onStoreFailure: 'fail-open' }).acquire('k');
  assert.deepEqual([open.allowed, open.source, open.inFlight, await open.release()], [true, 'fail-open', 0, false]);
  const closed = await new ConcurrencyLimiter({ limit: 1, store, onStoreFailure: 'fail-closed' }).acquire('k');
  assert.deepEqual([closed.allowed, closed.source, closed.retryAfterMs], [false, 'fail-closed', 1000]);
});

test('a full slot table refuses a new key instead of forgetting slots that are held', async () => {
  const clock = new ManualClock();
  const store = new MemoryStore({ maxKeys: 2, clock: clock.now, sweepIntervalMs: 0 });
  const l = new ConcurrencyLimiter({ limit: 1, ttl: '10s', store, heartbeat: false });
  assert.equal((await l.acquire('a')).allowed, true);
  clock.advance(1000);
  assert.equal((await l.acquire('b')).allowed, true);
  const refused = await l.acquire('c');
  assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 9000]);
  assert.equal((await l.acquire('a')).allowed, false, "a's slot is still held");
  clock.advance(9000);
  assert.equal((await l.acquire('c')).allowed, true, "a's slot expired, so its place went to c");
  assert.equal(store.slots.size, 2);
  await store.close();
});

test('a key whose slots are all released is deleted from the table', async () => {
  const store = new MemoryStore();
  const l = new ConcurrencyLimiter({ limit: 2, store });
  const a = await l.acquire('k');
  const b = await l.acquire('k');
  assert.equal(store.slots.size, 1);
  await a.release();
  await b.release();
  assert.equal(store.slots.size, 0);
  await store.close();
});

/** A MemoryStore whose renewals take `renewMs` or fail, as a slow or lost Redis's would. */
class SlowRenewals extends MemoryStore {
  renewals = 0;
  failing = false;
  constructor(private readonly renewMs: number) {
    super();
  }
  override async renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    this.renewals++;
    await sleep(this.renewMs);
    if (this.failing) throw new FloodgateError('FLOODGATE_STORE_ERROR', 'slow store failed: connection lost');
    return super.renewSlot(key, owner, ttlMs);
  }
}

test('a slow store: the heartbeat waits for its renewal instead of stacking more', async () => {
  const store = new SlowRenewals(800);
  const slot = await new ConcurrencyLimiter({ limit: 1, ttl: '1s', store }).acquire('k');
  await sleep(1500);
  // Beats every 333 ms, each renewal 800 ms: a beat during a renewal skips.
  assert.ok(store.renewals >= 1 && store.renewals <= 2, `${store.renewals} renewals in 1.5 s`);
  await slot.release();
  await store.close();
});

test('renewals failing while held: no unhandled rejection, renew() reports the failure, and the slot can still be released', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const store = new SlowRenewals(0);
  store.failing = true;
  const slot = await new ConcurrencyLimiter({ limit: 1, ttl: '3s', store }).acquire('k');
  // Beats every second; the slot, never renewed, lives until 3 s.
  await sleep(2200);
  assert.ok(store.renewals >= 2, `${store.renewals} renewals`);
  assert.equal(await slot.renew().catch((error: FloodgateError) => error.code), 'FLOODGATE_STORE_ERROR');
  process.off('unhandledRejection', onUnhandled);
  assert.deepEqual(unhandled, []);
  assert.equal(await slot.release(), true, 'not expired yet, so still held: released');
  await store.close();
});
