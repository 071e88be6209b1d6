// Leases of the cluster store (leaseMs): fixed-window consumes answered in the worker from quota the primary granted, never more than the limit across workers, revoked by penalty, block and reset (message channels and real forked workers).
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { MessageChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { ErrorCode, ManualClock, RateLimiter } from '../../src/index.js';
import { ClusterStore, ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { cleanup, code, primaryOf, useCleanup } from './support/in-process.js';
import { forkWorker, killAll } from './support/remote.js';

useCleanup();

/** A store ("a worker") joined to `primary` by a MessageChannel, counting its messages to the primary. */
function worker(primary: ClusterStorePrimary, options: ConstructorParameters<typeof ClusterStore>[0] = {}) {
  const { port1, port2 } = new MessageChannel();
  const counts = { toPrimary: 0 };
  port1.on('message', () => counts.toPrimary++);
  primary.attach(port1);
  const store = new ClusterStore({ transport: port2, leaseMs: 100, ...options });
  cleanup.push(async () => {
    await store.close();
    port1.close();
  });
  return { store, counts };
}

test('a hot key is answered from the lease: synchronously, in far fewer messages than consumes, with exact totals', async () => {
  const primary = primaryOf();
  const { store, counts } = worker(primary);
  const l = new RateLimiter({ limit: 10_000, window: '10s', store });
  let admitted = 0;
  let sync = 0;
  for (let i = 0; i < 2000; i++) {
    const now = l.consumeNow('hot');
    if (now !== undefined) sync++;
    const d = now ?? (await l.consume('hot'));
    if (d.allowed) admitted++;
    if (i % 50 === 0) await delay(1);
  }
  assert.equal(admitted, 2000);
  assert.ok(sync > 1500, `answered synchronously: ${sync} of 2000`);
  assert.ok(counts.toPrimary < 200, `messages to the primary: ${counts.toPrimary}`);
  const stats = primary.stats();
  assert.ok(stats.leaseCalls > 0 && stats.unitsLeased > 0, JSON.stringify(stats));
  // The primary counted every leased unit as consumed: what it has left plus what the worker holds is the rest of the limit.
  const peek = await l.peek('hot');
  const held = l.consumeNow('hot');
  assert.ok(peek.remaining <= 10_000 - 2000, `primary's remaining ${peek.remaining}`);
  assert.ok(held === undefined || held.remaining <= 10_000 - 2001);
});

test('two workers never admit more than the limit between them, and spend it all when both keep asking', async () => {
  const primary = primaryOf();
  const a = new RateLimiter({ limit: 500, window: '30s', store: worker(primary).store });
  const b = new RateLimiter({ limit: 500, window: '30s', store: worker(primary).store });
  const run = async (l: RateLimiter): Promise<number> => {
    let admitted = 0;
    for (let i = 0; i < 800; i++) {
      // A few concurrent consumes per turn, as a busy server makes them.
      const ds = await Promise.all([l.consume('shared'), l.consume('shared'), l.consume('shared')]);
      admitted += ds.filter((d) => d.allowed).length;
      if (ds.every((d) => !d.allowed) && i > 10) break;
    }
    return admitted;
  };
  const [na, nb] = await Promise.all([run(a), run(b)]);
  assert.equal(na + nb, 500, `admitted ${na} + ${nb}`);
  assert.ok(na > 0 && nb > 0, `both workers got a share: ${na}, ${nb}`);
  assert.equal((await a.peek('shared')).remaining, 0);
});

test('penalty, block and reset on one worker revoke the other worker\'s lease', async () => {
  const primary = primaryOf();
  const a = new RateLimiter({ limit: 1000, window: '30s', store: worker(primary).store });
  const b = new RateLimiter({ limit: 1000, window: '30s', store: worker(primary).store });
  const warm = async (key: string): Promise<void> => {
    for (let i = 0; i < 200; i++) await a.consume(key);
    assert.ok(a.consumeNow(key)?.allowed, `${key}: worker a holds a lease`);
  };

  await warm('blocked');
  await b.block('blocked', '10s');
  await delay(5); // the revocation travels on a's channel
  assert.equal(a.consumeNow('blocked'), undefined, 'no lease left to spend');
  assert.equal((await a.consume('blocked')).allowed, false);

  await warm('penalised');
  await b.penalty('penalised', 5000);
  await delay(5);
  assert.equal((await a.consume('penalised')).allowed, false);

  await warm('reset');
  const before = primary.stats().leaseCalls;
  await b.reset('reset');
  await delay(5);
  const after = await a.consume('reset');
  assert.ok(after.allowed);
  assert.ok(primary.stats().leaseCalls > before, 'the next consume asked the primary: the old lease is gone');
  assert.ok(primary.stats().invalidations >= 3);

  // A worker's own block stops its own lease at once, with no round trip to wait for.
  await warm('own');
  const blocking = a.block('own', '10s');
  assert.equal(a.consumeNow('own'), undefined);
  assert.equal((await blocking).allowed, false);
});

test('a reward keeps the leases; other algorithms and peeks go to the primary', async () => {
  const primary = primaryOf();
  const { store } = worker(primary);
  const l = new RateLimiter({ limit: 1000, window: '30s', store });
  for (let i = 0; i < 200; i++) await l.consume('k');
  await l.reward('k', 3);
  assert.ok(l.consumeNow('k')?.allowed, 'still spending the lease');

  const before = primary.stats().leaseCalls;
  const sliding = new RateLimiter({ limit: 1000, window: '30s', algorithm: 'sliding-window', store, prefix: 'sw' });
  for (let i = 0; i < 20; i++) assert.ok((await sliding.consume('k')).allowed);
  assert.equal(sliding.consumeNow('k'), undefined);
  assert.equal(primary.stats().leaseCalls, before, 'no lease for a sliding window');
});

test('small limits stay exact: a lease takes at most a quarter of what remains beyond its need', async () => {
  const primary = primaryOf();
  const a = new RateLimiter({ limit: 3, window: '30s', store: worker(primary).store });
  const b = new RateLimiter({ limit: 3, window: '30s', store: worker(primary).store });
  // With 3 left a quarter rounds down to nothing, so no worker strands a unit the other needs.
  const order = [a, b, a, b, b];
  const allowed = [];
  for (const l of order) allowed.push((await l.consume('small')).allowed);
  assert.deepEqual(allowed, [true, true, true, false, false]);
});

test('a primary that goes away drops the leases with the known refusals', async () => {
  const primary = new ClusterStorePrimary({ cluster: false });
  const { store } = worker(primary, { timeoutMs: 200 });
  const l = new RateLimiter({ limit: 1000, window: '30s', store });
  for (let i = 0; i < 200; i++) await l.consume('k');
  assert.ok(l.consumeNow('k')?.allowed);
  await primary.close();
  // Spent down to a top-up, which times out: then nothing the primary granted is trusted any more.
  let answered = 0;
  const deadline = Date.now() + 3000;
  while (Date.now() < deadline) {
    const now = l.consumeNow('k');
    if (now === undefined) break;
    answered++;
    if (answered % 10 === 0) await delay(5);
  }
  await delay(300);
  assert.equal(l.consumeNow('k'), undefined, `still answering from a lease after ${answered} consumes`);
  await assert.rejects(l.consume('k'), code(ErrorCode.STORE_TIMEOUT));
});

test('leaseMs is checked: a whole number of ms, and not with a clock', () => {
  for (const bad of [-1, 1.5, 60_001, '100' as never]) {
    assert.throws(() => new ClusterStore({ transport: 'local', leaseMs: bad }), code(ErrorCode.INVALID_DURATION), String(bad));
  }
  assert.throws(() => new ClusterStore({ transport: 'local', leaseMs: null as never }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStore({ transport: 'local', leaseMs: 100, clock: new ManualClock().now }), code(ErrorCode.CONFLICTING_OPTIONS));
  new ClusterStore({ transport: 'local', leaseMs: 0, clock: new ManualClock().now }).close();
});

test('real node:cluster workers with leases never admit more than their shared limit, and answer most consumes synchronously', async () => {
  const primary = primaryOf({ cluster: true });
  const remotes = await Promise.all([forkWorker({ leaseMs: 100 }), forkWorker({ leaseMs: 100 })]);
  try {
    for (const r of remotes) await r.call('limiter', 'l', { limit: 3000, window: '30s' });
    const results = await Promise.all(remotes.map((r) => r.call<{ admitted: number; sync: number }>('sequence', 'l', 'k', 4000)));
    const admitted = results.reduce((sum, r) => sum + r.admitted, 0);
    const sync = results.reduce((sum, r) => sum + r.sync, 0);
    // Never above the limit; below it only by what a worker leased on its last consumes and had no consume left to spend.
    assert.ok(admitted <= 3000 && admitted >= 2500, JSON.stringify(results));
    assert.ok(sync > 2000, `synchronous answers: ${JSON.stringify(results)}`);
    assert.ok(primary.stats().leaseCalls < 1000, JSON.stringify(primary.stats()));
  } finally {
    await killAll(remotes);
  }
});
