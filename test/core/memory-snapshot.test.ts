// MemoryStore snapshots: a restored store decides as the one it was taken from (every algorithm, blocks, calendar quotas, the overflow sketch), drops what expired, and refuses a snapshot it cannot read with a typed error.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeSnapshot,
  encodeSnapshot,
  ErrorCode,
  ManualClock,
  MemoryStore,
  RateLimiter,
  type Algorithm,
  type MemorySnapshot,
  type RateLimiterOptions,
} from '../../src/index.js';

const T0 = 1_700_006_400_000;
const ALGORITHMS: Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'];

/** Takes `store`'s snapshot through its text form, as a file would hold it. */
const throughText = (store: MemoryStore): MemorySnapshot => decodeSnapshot(encodeSnapshot(store.snapshot()), 'test');

/** A limiter on `store` with `options` and a fixed prefix, so the same keys are found again in a restored store. */
const on = (store: MemoryStore, clock: ManualClock, options: Omit<RateLimiterOptions, 'store' | 'clock'>) =>
  new RateLimiter({ prefix: 'snap', clock: clock.now, ...options, store });

/** Each decision's allowed/remaining over `n` consumes of `key`. */
async function run(limiter: RateLimiter, key: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const d = await limiter.consume(key);
    out.push(`${d.allowed}/${d.remaining}/${d.retryAfterMs}`);
  }
  return out;
}

describe('MemoryStore.snapshot and MemoryStore.restore', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: a restored store goes on exactly where the original would, key by key`, async () => {
      const clock = new ManualClock(T0);
      const original = new MemoryStore({ clock: clock.now });
      const options = { limit: 5, window: 10_000, algorithm };
      await run(on(original, clock, options), 'a', 3);
      clock.advance(2_500);
      await run(on(original, clock, options), 'b', 6);
      clock.advance(1_000);
      const restored = MemoryStore.restore(throughText(original), { clock: clock.now });
      for (const step of [0, 3_000, 4_000]) {
        clock.advance(step);
        for (const key of ['a', 'b', 'c'])
          assert.deepEqual(
            await run(on(restored, clock, options), key, 3),
            await run(on(original, clock, options), key, 3),
            `${key} +${step}`,
          );
      }
    });
  }

  it('a block survives: a key blocked for 1 h is still refused after a restore, and free after its hour', async () => {
    const clock = new ManualClock(T0);
    const original = new MemoryStore({ clock: clock.now });
    const options = { limit: 1, window: 1_000, blockDuration: 3_600_000 };
    assert.deepEqual(await run(on(original, clock, options), 'k', 2), ['true/0/0', 'false/0/3600000']);
    clock.advance(60_000);
    const restored = MemoryStore.restore(throughText(original), { clock: clock.now });
    assert.equal((await on(restored, clock, options).consume('k')).allowed, false);
    clock.advance(3_540_000);
    assert.equal((await on(restored, clock, options).consume('k')).allowed, true);
  });

  it('a calendar quota survives: what was spent this month stays spent, and the next month starts afresh', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 10));
    const options = { limit: 3, window: { calendar: 'month', timeZone: 'UTC' } } as const;
    const original = new MemoryStore({ clock: clock.now });
    await run(on(original, clock, options), 'tenant', 2);
    const restored = MemoryStore.restore(throughText(original), { clock: clock.now });
    assert.deepEqual(await run(on(restored, clock, options), 'tenant', 2), ['true/0/0', `false/0/${Date.UTC(2026, 11, 1) - clock.now()}`]);
    clock.set(Date.UTC(2026, 11, 1));
    assert.equal((await on(restored, clock, options).consume('tenant')).allowed, true);
  });

  it('keys past their expiry are not restored, and the table holds at most maxKeys (the most recently used)', async () => {
    const clock = new ManualClock(T0);
    const original = new MemoryStore({ clock: clock.now });
    await on(original, clock, { limit: 5, window: 1_000 }).consume('short');
    for (const key of ['old', 'mid', 'new']) await on(original, clock, { limit: 5, window: 60_000 }).consume(key);
    const snapshot = original.snapshot();
    clock.advance(2_000);
    assert.equal(MemoryStore.restore(snapshot, { clock: clock.now }).size, 3);
    const small = MemoryStore.restore(snapshot, { clock: clock.now, maxKeys: 2 });
    assert.equal(small.size, 2);
    assert.equal((await on(small, clock, { limit: 5, window: 60_000 }).peek('new')).remaining, 4);
    assert.equal((await on(small, clock, { limit: 5, window: 60_000 }).peek('old')).remaining, 5);
  });

  it('a restored state is not read by a policy of another algorithm: the key starts afresh under it, its block kept', async () => {
    const clock = new ManualClock(T0);
    const original = new MemoryStore({ clock: clock.now });
    await run(on(original, clock, { limit: 2, window: 60_000, algorithm: 'token-bucket' }), 'k', 2);
    await run(on(original, clock, { limit: 1, window: 60_000, blockDuration: 600_000 }), 'blocked', 2);
    const restored = MemoryStore.restore(throughText(original), { clock: clock.now });
    assert.deepEqual(await run(on(restored, clock, { limit: 2, window: 60_000, algorithm: 'fixed-window' }), 'k', 3), [
      'true/1/0',
      'true/0/0',
      'false/0/60000',
    ]);
    assert.equal((await on(restored, clock, { limit: 1, window: 60_000, algorithm: 'sliding-log' }).consume('blocked')).allowed, false);
  });

  it('the overflow sketch survives: a key decided in it while the table was full is not admitted afresh after a restore', async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore({ clock: clock.now, maxKeys: 4, onFull: 'overflow', overflowCells: 64 });
    const options = { limit: 2, window: 60_000 };
    for (const key of ['a', 'b', 'c', 'd']) await on(store, clock, options).consume(key);
    // The sketch's cells count aligned windows: its refusal may wait up to two.
    assert.deepEqual(
      (await run(on(store, clock, options), 'flood', 3)).map((d) => d.split('/')[0]),
      ['true', 'true', 'false'],
    );
    assert.equal(store.overflows, 3);
    const restored = MemoryStore.restore(throughText(store), { clock: clock.now, maxKeys: 4, onFull: 'overflow', overflowCells: 64 });
    assert.equal((await on(restored, clock, options).consume('flood')).allowed, false);
  });

  it('a snapshot is plain data: every key least recently used first, Infinity written as null', () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore({ clock: clock.now });
    const limiter = on(store, clock, { limit: 3, window: 1_000 });
    limiter.consumeNow('x');
    limiter.consumeNow('y');
    const s = store.snapshot();
    assert.equal(s.format, 'floodgate-memory-snapshot');
    assert.equal(s.version, 1);
    assert.deepEqual(
      s.entries.map((e) => [e[0], e[1]]),
      [
        ['snap:x', 'fixed-window'],
        ['snap:y', 'fixed-window'],
      ],
    );
    assert.deepEqual(JSON.parse(encodeSnapshot(s)), JSON.parse(JSON.stringify(s)));
  });
});

describe('a snapshot that cannot be restored is refused with FLOODGATE_INVALID_SNAPSHOT, naming its source', () => {
  const good = (): string => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore({ clock: clock.now });
    on(store, clock, { limit: 3, window: 1_000, algorithm: 'sliding-log' }).consumeNow('k');
    return encodeSnapshot(store.snapshot());
  };
  const refused = (text: string, pattern: RegExp) =>
    assert.throws(
      () => decodeSnapshot(text, '/var/lib/floodgate/state.json'),
      (e: { code?: string; message: string }) =>
        e.code === ErrorCode.INVALID_SNAPSHOT && e.message.startsWith('/var/lib/floodgate/state.json ') && pattern.test(e.message),
    );

  it('cut short at every length', () => {
    const text = good();
    for (let n = 0; n < text.length; n++) refused(text.slice(0, n), /cut short|not a floodgate memory snapshot/);
  });

  it('foreign, from a newer floodgate, or with a field out of range', () => {
    refused('{"hello":"world"}', /not a floodgate memory snapshot/);
    refused('[1,2,3]', /not a floodgate memory snapshot/);
    const s = JSON.parse(good()) as Record<string, unknown> & { entries: unknown[][] };
    refused(JSON.stringify({ ...s, version: 2 }), /written by a newer floodgate \(version 2/);
    refused(
      JSON.stringify({ ...s, entries: [['k', 'fixed-window', { c: 'many', r: 1 }, 0, null]] }),
      /entries\[0\]\.usage is not a fixed-window state/,
    );
    refused(JSON.stringify({ ...s, entries: [['k', 'leaky-bucket', null, 0, null]] }), /entries\[0\] has an unknown shape/);
    refused(JSON.stringify({ ...s, entries: [['k', 'none', null, 'soon', null]] }), /blockedUntil/);
    refused(JSON.stringify({ ...s, entries: [['k', 'sliding-log', { t: [1, null] }, 0, null]] }), /not a sliding log/);
    refused(JSON.stringify({ ...s, sketches: [{ id: 'x', width: 4, seeds: [1], cells: [] }] }), /seeds/);
  });

  it('MemoryStore.restore checks a snapshot given as an object too', () => {
    assert.throws(
      () => MemoryStore.restore({ format: 'floodgate-memory-snapshot', version: 1, takenAt: 0, entries: 'x' } as never),
      (e: { code?: string }) => e.code === ErrorCode.INVALID_SNAPSHOT,
    );
  });
});
