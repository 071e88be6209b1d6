// LocalFirstStore.consumeAll on a real Redis: decided from the leases without Redis when every part is covered, else one composite call, counted once.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { ManualClock, RateLimiter, consumeAll, type Operation, type Policy } from '../../src/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { untilLive } from '../support/local-first.js';

let server: RedisServer;
let admin: Redis;
before(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: server.host });
});
after(async () => {
  admin?.disconnect();
  await server?.stop();
});

const fixed: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, blockMs: 0 });
const sliding: Policy = Object.freeze({ algorithm: 'sliding-window', limit: 100, windowMs: 60_000, blockMs: 0 });
const consume = (key: string, policy: Policy, amount = 1): Operation => ({ kind: 'consume', key, amount, policy });

async function scriptCalls(): Promise<number> {
  const info = await admin.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  return n;
}

async function newStore(clock: ManualClock): Promise<{ store: LocalFirstStore; close(): Promise<void> }> {
  const client = new Redis({ port: server.port, host: server.host });
  const store = new LocalFirstStore({ client, clock: clock.now, channel: `lf-composite-${process.pid}-${Math.random()}` });
  await untilLive(store);
  return { store, close: async () => (await store.close(), client.disconnect()) };
}

test('a composite every lease covers is decided in memory: no Redis call, every lease spends', async () => {
  const clock = new ManualClock(5_000_000);
  const { store, close } = await newStore(clock);
  const a = `lf:{c1}:a:${process.pid}`;
  const b = `lf:{c1}:b:${process.pid}`;
  // Warm both keys up until each holds a lease of a few units.
  for (let i = 0; i < 5; i++) await Promise.all([store.apply(consume(a, fixed)), store.apply(consume(b, fixed))]);
  const ops = [consume(a, fixed), consume(b, fixed, 2)];
  assert.notEqual(store.consumeAllNow([consume(a, fixed, 0), consume(b, fixed, 0)]), undefined, 'both keys hold a lease');
  await admin.config('RESETSTAT');
  const before = store.stats().localDecisions;
  const outcomes = await store.consumeAll(ops);
  assert.deepEqual(
    outcomes.map((o) => o.allowed),
    [true, true],
  );
  assert.equal(await scriptCalls(), 0);
  assert.equal(store.stats().localDecisions, before + 2);
  await close();
  // Accuracy: after the leases went back, Redis counts exactly what was admitted (5 + 1 and 5 + 2).
  const { store: check, close: closeCheck } = await newStore(clock);
  assert.equal((await check.apply({ kind: 'peek', key: a, amount: 1, policy: fixed })).remaining, 94);
  assert.equal((await check.apply({ kind: 'peek', key: b, amount: 1, policy: fixed })).remaining, 93);
  await closeCheck();
});

test('a composite memory cannot decide goes to Redis as one script call', async () => {
  const clock = new ManualClock(6_000_000);
  const { store, close } = await newStore(clock);
  const ops = [consume(`lf:{c2}:new:${process.pid}`, fixed), consume(`lf:{c2}:org:${process.pid}`, sliding)];
  assert.equal(store.consumeAllNow(ops), undefined);
  // Loads the composite script, so the count below is not a NOSCRIPT and its EVAL.
  await store.consumeAll([consume(`lf:{c2}:warm:${process.pid}`, sliding)]);
  await admin.config('RESETSTAT');
  const outcomes = await store.consumeAll(ops);
  assert.deepEqual(
    outcomes.map((o) => [o.allowed, o.remaining]),
    [
      [true, 99],
      [true, 99],
    ],
  );
  assert.equal(await scriptCalls(), 1);
  await close();
});

test('a leased key in a composite sent to Redis: its lease goes back first, so each unit is counted once', async () => {
  const clock = new ManualClock(7_000_000);
  const { store, close } = await newStore(clock);
  const a = `lf:{c3}:a:${process.pid}`;
  const org = `lf:{c3}:org:${process.pid}`;
  for (let i = 0; i < 5; i++) await store.apply(consume(a, fixed));
  assert.notEqual(store.consumeAllNow([consume(a, fixed, 0)]), undefined, 'the key holds a lease');
  const outcomes = await store.consumeAll([consume(a, fixed, 3), consume(org, sliding)]);
  // 5 consumed before, 3 now: Redis says 92 left, not 92 minus the lease it had granted.
  assert.deepEqual(
    outcomes.map((o) => [o.allowed, o.remaining]),
    [
      [true, 92],
      [true, 99],
    ],
  );
  // The next consume on the key finds no units here, so it asks Redis: nothing is admitted past what Redis said.
  assert.equal(store.consumeAllNow([consume(a, fixed)]), undefined);
  assert.equal((await store.apply({ kind: 'peek', key: a, amount: 1, policy: fixed })).remaining, 92);
  await close();
});

test('a composite refused by a part whose window is exhausted here is refused in memory, spending nothing', async () => {
  const clock = new ManualClock(8_000_000);
  const { store, close } = await newStore(clock);
  const small: Policy = Object.freeze({ ...fixed, limit: 2 });
  const a = `lf:{c4}:a:${process.pid}`;
  const u = `lf:{c4}:u:${process.pid}`;
  for (let i = 0; i < 3; i++) await store.apply(consume(a, small));
  for (let i = 0; i < 5; i++) await store.apply(consume(u, fixed));
  await admin.config('RESETSTAT');
  const outcomes = store.consumeAllNow([consume(u, fixed), consume(a, small)]);
  assert.ok(outcomes !== undefined, 'decided in memory');
  assert.deepEqual(
    outcomes.map((o) => o.allowed),
    [true, false],
  );
  assert.equal(await scriptCalls(), 0);
  await close();
  const { store: check, close: closeCheck } = await newStore(clock);
  assert.equal((await check.apply({ kind: 'peek', key: u, amount: 1, policy: fixed })).remaining, 95);
  await closeCheck();
});

test('regression: keys used only in composites were never leased, so every composite went to Redis whole', async () => {
  const clock = new ManualClock(9_000_000);
  const { store, close } = await newStore(clock);
  const org = `lf:{c5}:org:${process.pid}`;
  const user = `lf:{c5}:user:${process.pid}`;
  const ops = [consume(org, fixed), consume(user, fixed)];
  const calls: number[] = [];
  for (let i = 0; i < 30; i++) {
    const before = await scriptCalls();
    const outcomes = await store.consumeAll(ops);
    assert.deepEqual(
      outcomes.map((o) => o.allowed),
      [true, true],
    );
    calls.push((await scriptCalls()) - before);
    // Time for a lease reply to land, as between a busy service's requests.
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // Before: one script call per composite. Now Redis admits the first, each key then leases, and the
  // composites that follow are decided from the leases (a top-up now and then).
  const late = calls.slice(10).reduce((a, b) => a + b, 0);
  assert.ok(late <= 5, `script calls per composite ${JSON.stringify(calls)}`);
  assert.ok(store.stats().localDecisions >= 2 * 15, `${store.stats().localDecisions} parts decided in memory`);
  await close();
  // Exact: after the leases went back, Redis counts the 30 admitted on each key.
  const { store: check, close: closeCheck } = await newStore(clock);
  assert.equal((await check.apply({ kind: 'peek', key: org, amount: 1, policy: fixed })).remaining, 70);
  assert.equal((await check.apply({ kind: 'peek', key: user, amount: 1, policy: fixed })).remaining, 70);
  await closeCheck();
});

test('a composite that one part’s in-memory block refuses calls no Redis command, and leaves the other parts out even with their leases in hand, as every store does', async () => {
  const clock = new ManualClock(10_000_000);
  const { store, close } = await newStore(clock);
  const org = new RateLimiter({ store, limit: 1000, window: '1m', prefix: `lf-c6-org-${process.pid}`, clock: clock.now });
  const user = new RateLimiter({
    store,
    limit: 2,
    window: '1m',
    prefix: `lf-c6-user-${process.pid}`,
    clock: clock.now,
    inMemoryBlock: true,
  });
  const parts = [
    { limiter: org, key: '{t}acme' },
    { limiter: user, key: '{t}ana' },
  ];
  const bob = [
    { limiter: org, key: '{t}acme' },
    { limiter: user, key: '{t}bob' },
  ];
  for (let i = 0; i < 6; i++) {
    await consumeAll(parts);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // Another user of the org is admitted: the org holds a lease again.
  for (let i = 0; i < 2; i++) {
    assert.equal((await consumeAll(bob)).allowed, true);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // Ana is refused by the in-memory block now; the org holds a lease from Bob's composites.
  await admin.config('RESETSTAT');
  const d = await consumeAll(parts);
  assert.equal(d.allowed, false);
  assert.equal(d.source, 'memory-block');
  // Not consulted: a lease could tell, Redis could not, and a route's refusal must read the same on every store.
  assert.equal(d.parts[0], undefined);
  const info = await admin.info('commandstats');
  assert.doesNotMatch(info, /cmdstat_(evalsha|eval|hmget):/);
  await close();
});
