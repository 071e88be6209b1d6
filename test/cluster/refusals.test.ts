// Known refusals of the cluster store: refused without IPC, answered synchronously, never past what the primary would say, bounded, and invalidated on every worker (real forked workers and worker threads).
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { MessageChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { ErrorCode, ManualClock, RateLimiter, type Decision } from '../../src/index.js';
import { cleanup, code, primaryOf, useCleanup } from './support/in-process.js';
import { ClusterStore, ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { forkWorker, killAll, startThread, type Remote } from './support/remote.js';

useCleanup();

/** A primary (new, or the one given) and a store joined by a MessageChannel, counting the messages each way. */
function channelPair(
  primaryOptions: ConstructorParameters<typeof ClusterStorePrimary>[0] | ClusterStorePrimary = {},
  storeOptions: ConstructorParameters<typeof ClusterStore>[0] = {},
) {
  const primary = primaryOptions instanceof ClusterStorePrimary ? primaryOptions : primaryOf(primaryOptions);
  const { port1, port2 } = new MessageChannel();
  const counts = { toPrimary: 0, toWorker: 0 };
  port1.on('message', () => counts.toPrimary++);
  port2.on('message', () => counts.toWorker++);
  primary.attach(port1);
  const store = new ClusterStore({ transport: port2, ...storeOptions });
  cleanup.push(async () => {
    await store.close();
    port1.close();
  });
  return { primary, store, counts, port2 };
}

test('an exhausted key is refused without IPC, with the numbers the primary would give, until its window ends', async () => {
  const { primary, store, counts } = channelPair();
  const l = new RateLimiter({ limit: 2, window: 500, store });
  assert.equal((await l.consume('k')).remaining, 1);
  const last = await l.consume('k');
  assert.deepEqual([last.allowed, last.remaining], [true, 0]);
  const sent = counts.toPrimary;
  const ops = primary.stats().operations;
  assert.equal(primary.stats().refused, 1, 'the primary remembers what it told');

  const refused = await l.consume('k');
  assert.equal(refused.allowed, false);
  assert.equal(refused.remaining, 0);
  assert.equal(refused.source, 'store');
  assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 500, `retryAfterMs ${refused.retryAfterMs}`);
  assert.equal(refused.resetMs, refused.retryAfterMs);
  assert.equal((await l.peek('k')).allowed, false);
  // A cost above 1 of a fixed window is refused until the same end.
  assert.equal((await l.consume('k', 2)).allowed, false);
  assert.equal(counts.toPrimary, sent, 'no message left the worker');
  assert.equal(primary.stats().operations, ops);

  // consumeNow decides without a promise; the store answers applyNow synchronously.
  const now = l.consumeNow('k');
  assert.ok(now !== undefined && !now.allowed);
  assert.equal(
    store.applyNow({ kind: 'consume', key: `${l.prefix}:other`, amount: 1, policy: l.policy }),
    undefined,
    'an unknown key: the primary decides',
  );
  assert.equal(l.consumeNow('other'), undefined);

  // Never longer than the primary: the worker counted from before the primary's decision, so by
  // then the primary decides again; the window ends at most a batch's trip later, and it admits.
  await delay(refused.retryAfterMs);
  const again = await l.consume('k');
  assert.equal(primary.stats().operations, ops + 1);
  if (!again.allowed) {
    assert.ok(again.retryAfterMs <= 50, `the primary's window ended ${again.retryAfterMs} ms later`);
    await delay(again.retryAfterMs);
  }
  assert.equal((await l.consume('k')).allowed, true);
});

test('with blockDuration, the consume that goes over still reaches the primary (it sets the block); the block is then refused locally', async () => {
  const { primary, store } = channelPair();
  const l = new RateLimiter({ limit: 2, window: '1s', blockDuration: '10s', store });
  await l.consume('k');
  await l.consume('k'); // allowed, nothing left, but not blocked yet
  const before = primary.stats().operations;
  const over = await l.consume('k');
  assert.equal(over.allowed, false);
  assert.equal(over.retryAfterMs, 10_000, 'the block was set by the primary');
  assert.equal(primary.stats().operations, before + 1);
  const blocked = await l.consume('k');
  assert.equal(blocked.allowed, false);
  assert.ok(blocked.retryAfterMs > 9_900 && blocked.retryAfterMs <= 10_000, `retryAfterMs ${blocked.retryAfterMs}`);
  assert.equal(primary.stats().operations, before + 1, 'refused locally');
});

test("this process's own reward, reset or block is seen by its next consume, even before it is answered", async () => {
  const { store } = channelPair();
  const l = new RateLimiter({ limit: 1, window: '1m', store });
  await l.consume('k');
  assert.equal((await l.consume('k')).allowed, false);
  // No await between them: the consume must not be refused from what was known before the reward.
  const [, after] = await Promise.all([l.reward('k'), l.consume('k')]);
  assert.equal(after.allowed, true);
  assert.equal((await l.consume('k')).allowed, false);
  const [, afterReset] = await Promise.all([l.reset('k'), l.consume('k')]);
  assert.equal(afterReset.allowed, true);
  // A block forever, then one of 20 ms: the shorter block replaces it.
  assert.equal((await l.block('k', 'forever')).retryAfterMs, Infinity);
  assert.equal((await l.consume('k')).retryAfterMs, Infinity);
  await l.block('k', 20);
  await delay(30);
  await l.reset('k');
  assert.equal((await l.consume('k')).allowed, true);
});

test('a call under another policy still reaches the primary and fails with CONFLICTING_OPTIONS', async () => {
  const { store } = channelPair();
  const five = new RateLimiter({ limit: 1, window: '1m', store, prefix: 'p' });
  const ten = new RateLimiter({ limit: 10, window: '1m', store, prefix: 'p' });
  await five.consume('k');
  assert.equal((await five.consume('k')).allowed, false);
  assert.equal(five.consumeNow('k')?.allowed, false);
  await assert.rejects(ten.consume('k'), code(ErrorCode.CONFLICTING_OPTIONS));
  assert.equal(ten.consumeNow('k'), undefined);
});

test('knownRefusals bounds the memory (least recently learned first out); 0 turns it off', async () => {
  assert.throws(() => new ClusterStore({ transport: 'local', knownRefusals: -1 }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStore({ transport: 'local', knownRefusals: 1.5 }), code(ErrorCode.INVALID_OPTIONS));
  const { primary, store } = channelPair({}, { knownRefusals: 3 });
  const l = new RateLimiter({ limit: 1, window: '1m', store });
  for (let i = 0; i < 10; i++) {
    await l.consume(`u${i}`);
    assert.equal((await l.consume(`u${i}`)).allowed, false);
  }
  let ops = primary.stats().operations;
  for (const i of [7, 8, 9]) assert.equal((await l.consume(`u${i}`)).allowed, false);
  assert.equal(primary.stats().operations, ops, 'the last 3 keys are known');
  assert.equal((await l.consume('u0')).allowed, false);
  assert.equal(primary.stats().operations, ops + 1, 'the first was forgotten: the primary decided');
  ops = primary.stats().operations;

  const { store: off } = channelPair(primary, { knownRefusals: 0 });
  const plain = new RateLimiter({ limit: 1, window: '1m', store: off, prefix: 'off' });
  await plain.consume('k');
  const refused = primary.stats().refused;
  assert.equal((await plain.consume('k')).allowed, false);
  assert.equal((await plain.consume('k')).allowed, false);
  assert.equal(primary.stats().operations, ops + 3);
  assert.equal(plain.consumeNow('k'), undefined);
  assert.equal(primary.stats().refused, refused, 'nothing hinted to a store that keeps nothing');
});

test("when the primary's store is full it may forget a key without saying which: every worker forgets everything", async () => {
  const { primary, store } = channelPair({ maxKeys: 5 });
  const l = new RateLimiter({ limit: 1, window: '1m', store });
  for (let i = 0; i < 3; i++) {
    await l.consume(`u${i}`);
    assert.equal((await l.consume(`u${i}`)).allowed, false);
  }
  assert.equal(primary.stats().refused, 3);
  await l.consume('u3');
  await l.consume('u4'); // the store is full now
  const ops = primary.stats().operations;
  assert.equal((await l.consume('u0')).allowed, false);
  assert.equal(primary.stats().operations, ops, 'still known');
  const invalidations = primary.stats().invalidations;
  // A sixth key: the MemoryStore evicts its least recently written key (u0).
  await l.consume('u5');
  assert.equal(primary.stats().invalidations, invalidations + 1);
  assert.equal(primary.stats().refused, 0);
  // The invalidation came on the same port, before the answer about u5.
  assert.equal((await l.consume('u0')).allowed, true, 'forgotten by the primary, so admitted again');
  assert.equal(primary.stats().refused, 0, 'nothing is hinted while the store is full');
});

test('a store with a clock keeps nothing unless asked; asked, it reads its refusals on that clock', async () => {
  const primary = primaryOf({ sweepIntervalMs: 0 });
  const clock = new ManualClock(5_000);
  const silent = new ClusterStore({ transport: 'local', clock: clock.now });
  const keeping = new ClusterStore({ transport: 'local', clock: clock.now, knownRefusals: 100 });
  cleanup.push(
    () => silent.close(),
    () => keeping.close(),
  );
  const a = new RateLimiter({ limit: 1, window: '1s', store: silent, prefix: 'a' });
  const b = new RateLimiter({ limit: 1, window: '1s', store: keeping, prefix: 'b' });
  for (const l of [a, b]) {
    await l.consume('k');
    await l.consume('k');
  }
  const ops = primary.stats().operations;
  assert.equal((await a.consume('k')).allowed, false);
  assert.equal(primary.stats().operations, ops + 1);
  clock.advance(400);
  const known = await b.consume('k');
  assert.deepEqual([known.allowed, known.retryAfterMs, known.resetMs], [false, 600, 600]);
  assert.equal(primary.stats().operations, ops + 1, 'refused on the store clock, without IPC');
  clock.advance(600);
  assert.equal((await b.consume('k')).allowed, true);
});

test('every worker forgets what it stopped hearing about: an idle store keeps nothing', async () => {
  const { primary, store } = channelPair();
  const l = new RateLimiter({ limit: 1, window: '1m', store });
  await l.consume('k');
  await l.consume('k');
  const ops = primary.stats().operations;
  await l.consume('k');
  assert.equal(primary.stats().operations, ops);
  await delay(1200); // the store stops listening: it could miss an invalidation
  assert.equal((await l.consume('k')).allowed, false);
  assert.equal(primary.stats().operations, ops + 1);
});

// ---------------------------------------------------------------------------
// Real node:cluster workers (and a worker thread on its parentPort): each
// invalidation must reach every worker. The test process is the primary, and
// its calls to a worker travel on the same channel after the invalidation.

async function withWorkers(body: (remotes: Remote[], primary: ClusterStorePrimary) => Promise<void>): Promise<void> {
  const primary = new ClusterStorePrimary();
  const remotes = await Promise.all([forkWorker({ timeoutMs: 5000 }), forkWorker({ timeoutMs: 5000 })]);
  try {
    await body(remotes, primary);
  } finally {
    await killAll(remotes);
    await primary.close();
  }
}

/** Exhausts `key` from both workers so that each knows it refused; returns the primary's operation count then. */
async function exhaust(remotes: Remote[], primary: ClusterStorePrimary, key: string): Promise<number> {
  for (const w of remotes) await w.call('consume', 'l', key);
  for (const w of remotes) assert.equal((await w.call<Decision>('consume', 'l', key)).allowed, false);
  const ops = primary.stats().operations;
  for (const w of remotes) {
    assert.equal((await w.call<Decision>('consume', 'l', key)).allowed, false);
    const now = await w.call<Decision | null>('consumeNow', 'l', key);
    assert.ok(now !== null && !now.allowed, 'consumeNow refuses synchronously');
  }
  assert.equal(primary.stats().operations, ops, 'both workers refuse without IPC');
  return ops;
}

test('real workers: a reward, a reset, a penalty or a block from another worker invalidates the key on every worker', async () => {
  await withWorkers(async ([a, b], primary) => {
    for (const w of [a!, b!]) await w.call('limiter', 'l', { limit: 2, window: '1m', prefix: 'inv' });

    await exhaust([a!, b!], primary, 'reward');
    await b!.call('reward', 'l', 'reward');
    assert.equal((await a!.call<Decision>('consume', 'l', 'reward')).allowed, true, 'the other worker admits the rewarded unit at once');
    assert.equal((await b!.call<Decision>('consume', 'l', 'reward')).allowed, false);

    await exhaust([a!, b!], primary, 'reset');
    await a!.call('reset', 'l', 'reset');
    assert.equal((await b!.call<Decision>('consume', 'l', 'reset')).remaining, 1);

    // Forever-blocked on both, then the block is replaced by a 30 ms one: both admit once it ends.
    await a!.call('block', 'l', 'block', 'forever');
    for (const w of [a!, b!]) assert.equal((await w.call<Decision>('consume', 'l', 'block')).allowed, false);
    const ops = primary.stats().operations;
    for (const w of [a!, b!]) assert.equal((await w.call<Decision>('consume', 'l', 'block')).allowed, false);
    assert.equal(primary.stats().operations, ops);
    await b!.call('block', 'l', 'block', 30);
    await delay(40);
    assert.equal((await a!.call<Decision>('consume', 'l', 'block')).allowed, true);
    assert.equal((await b!.call<Decision>('consume', 'l', 'block')).allowed, true);

    // A penalty never admits earlier, but the numbers change: the key is asked again.
    await exhaust([a!, b!], primary, 'penalty');
    const before = primary.stats().operations;
    await b!.call('penalty', 'l', 'penalty', 5);
    assert.equal((await a!.call<Decision>('consume', 'l', 'penalty')).allowed, false);
    assert.equal(primary.stats().operations, before + 2, 'the penalty and the next consume reached the primary');
  });
});

test('real workers and a worker thread: a reset from a process invalidates the key in the thread too', async () => {
  const primary = new ClusterStorePrimary();
  const worker = await forkWorker({ timeoutMs: 5000 });
  const thread = await startThread({ timeoutMs: 5000 });
  try {
    primary.attach(thread.worker);
    for (const w of [worker, thread]) await w.call('limiter', 'l', { limit: 1, window: '1m', prefix: 'mixed' });
    await exhaust([worker, thread], primary, 'k');
    await worker.call('reset', 'l', 'k');
    assert.equal((await thread.call<Decision>('consume', 'l', 'k')).allowed, true);
    assert.equal((await worker.call<Decision>('consume', 'l', 'k')).allowed, false);
  } finally {
    await killAll([worker, thread]);
    await primary.close();
  }
});

test('real workers under load: never more than the limit admitted, and most refusals spare the primary', async () => {
  await withWorkers(async ([a, b], primary) => {
    for (const w of [a!, b!]) await w.call('limiter', 'l', { limit: 50, window: '1m', prefix: 'load' });
    const before = primary.stats().operations;
    let admitted = 0;
    let total = 0;
    for (let round = 0; round < 10; round++) {
      const decisions = (await Promise.all([a!, b!].map((w) => w.call<Decision[]>('burst', 'l', 'k', 40)))).flat();
      admitted += decisions.filter((d) => d.allowed).length;
      total += decisions.length;
      // A reward from one worker mid-run: exactly one more unit, on whichever worker.
      if (round === 5) await a!.call('reward', 'l', 'k');
    }
    assert.equal(admitted, 51);
    const reached = primary.stats().operations - before;
    assert.ok(reached < total / 2, `${reached} of ${total} operations reached the primary`);
  });
});
