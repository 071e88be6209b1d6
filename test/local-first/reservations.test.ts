// Reservations on LocalFirstStore over a real Redis: give-backs and excesses settled in the lease in hand make no Redis call and keep Redis's count exact; a lease whose window ended never takes a give-back.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { ManualClock, RateLimiter } from '../../src/index.js';
import { LocalFirstStore, redisKeys } from '../../src/stores/redis/index.js';
import { commandCount, openLiveStore, sleep } from '../support/local-first.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';

let server: RedisServer;
let admin: Redis;
const redis = redisFixture((open, started) => {
  server = started;
  admin = open();
});

let unique = 0;
/** A live store on its own ioredis client; closed after the file (closing it earlier is fine: close is idempotent). */
function store(options: Partial<ConstructorParameters<typeof LocalFirstStore>[0]> = {}): Promise<LocalFirstStore> {
  return openLiveStore(server.url, `rsv-${process.pid}`, options, redis.cleanup);
}

/** Redis's count of `key` under limiter `l` in its current window. */
async function redisCount(l: RateLimiter, key: string): Promise<number> {
  return Number((await admin.hget(redisKeys(`${l.prefix}:${key}`).state, 'c')) ?? 0);
}

test('a reservation settled within the lease makes no Redis call (give-back spendable here, excess spent from the lease); an excess the lease cannot cover goes to Redis, and takes the lease back when it goes past the limit', async () => {
  const s = await store();
  const l = new RateLimiter({ store: s, limit: 1000, window: '30s', prefix: `in-lease${++unique}` });
  // A lease for the window, then 100 units in it: a reserve's lease call, and its cancel, given back into the lease.
  assert.equal((await l.consume('k')).allowed, true);
  const big = await l.reserve('k', 100);
  assert.deepEqual(await big.cancel(), { status: 'settled', charged: 0 });
  await sleep(20); // nothing left in flight
  const leaseCalls = s.stats().leaseCalls;
  await admin.config('RESETSTAT');
  const before = await commandCount(admin);

  const below = await l.reserve('k', 3);
  assert.equal(below.decision.source, 'store');
  assert.deepEqual(await below.commit(1), { status: 'settled', charged: 1 });
  const above = await l.reserve('k', 3);
  const over = await above.commit(5);
  assert.deepEqual(over, { status: 'settled', charged: 5 });
  const cancelled = await l.reserve('k', 2);
  assert.deepEqual(await cancelled.cancel(), { status: 'settled', charged: 0 });
  // The give-backs are spendable here at once, without a lease call.
  assert.ok(l.consumeNow('k', 2)?.allowed, 'the lease holds the units given back');

  await sleep(20);
  assert.equal((await commandCount(admin)) - before, 0, 'no Redis command for the reserves, commits and cancel');
  assert.equal(s.stats().leaseCalls, leaseCalls);

  // An excess the lease cannot cover goes to Redis; while Redis has room for it, the lease stays in hand.
  // (A consume from the lease tells what it holds: its remaining is the lease's units plus Redis's.)
  const held = l.consumeNow('k')!.remaining - (1000 - (await redisCount(l, 'k')));
  const beyond = await l.reserve('k', 3);
  assert.deepEqual(await beyond.commit(3 + held + 10), { status: 'settled', charged: held + 13 });
  assert.ok((await commandCount(admin)) - before > 0, 'the excess went to Redis');
  assert.ok(l.consumeNow('k')?.allowed, 'the lease is still spent from');

  // One past the limit, unconditionally: the lease goes back with it, so this process is refused too
  // rather than spending what it leased before.
  const huge = await l.reserve('k', 3);
  assert.deepEqual(await huge.commit(2000), { status: 'settled', charged: 2000 });
  assert.equal((await l.consume('k')).allowed, false, 'over the limit: later consumes are refused');

  // Exact once the lease is given back: 1 (consume) + 1 + 5 + 2 + 1 (the consumes from the lease) + held + 13 + 1 + 2000.
  await s.close();
  assert.equal(await redisCount(l, 'k'), 2024 + held);
});

test('a lease whose window ended never takes a give-back: it goes to Redis, and the next window keeps its whole limit', async () => {
  const storeClock = new ManualClock();
  // The limiter's clock stands still, so the reservation's own rule never drops the give-back: only the store's rule is left.
  const limiterClock = new ManualClock();
  const s = await store({ clock: storeClock.now });
  const l = new RateLimiter({ store: s, clock: limiterClock.now, limit: 10, window: 1000, prefix: `ended${++unique}` });
  const r = await l.reserve('k', 6, { ttl: '1m' });
  assert.equal(r.allowed, true);
  const operation = { kind: 'reward' as const, key: `${l.prefix}:k`, amount: 1, policy: l.policy };

  storeClock.advance(1000); // the lease's window has ended
  assert.equal(s.settleNow(operation), undefined, 'a lease past its deadline takes no give-back');
  assert.equal(s.settleNow({ ...operation, kind: 'penalty' }), undefined, 'nor an excess');
  await admin.config('RESETSTAT');
  const before = await commandCount(admin);
  assert.deepEqual(await r.commit(1), { status: 'settled', charged: 1 });
  assert.ok((await commandCount(admin)) - before > 0, 'the give-back went to Redis (whose window ended too: it drops it)');

  let admitted = 0;
  for (let i = 0; i < 15; i++) if ((await l.consume('k')).allowed) admitted++;
  assert.equal(admitted, 10, 'the next window admits its limit, nothing more');
});
