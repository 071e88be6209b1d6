// Composite (all-or-nothing) consumes on the cluster store with real node:cluster workers and worker threads: exact under leases when several workers hammer overlapping keys, decided in the worker when its leases cover every part, and a typed rejection when the primary goes away mid-composite.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { after, test } from 'node:test';
import { MessageChannel, Worker } from 'node:worker_threads';
import { consumeAll, ErrorCode, RateLimiter, type Decision, type Operation } from '../../src/index.js';
import { ClusterStore, ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { PROTOCOL_VERSION } from '../../src/stores/cluster/protocol.js';
import { code } from './support/in-process.js';
import { forkWorker, killAll, startThread } from './support/remote.js';

// One primary per process: it serves the node:cluster workers, and the threads it attaches.
const primary = new ClusterStorePrimary();
after(() => primary.close());

interface Hammered {
  admitted: Record<string, number>;
  total: number;
  sync: number;
}

type Composite = { allowed: boolean; parts: (Decision | null)[] };

/** Blocks this process's event loop, as a primary stuck in synchronous work would be. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

test('leases on, three workers hammering composites of per-user keys under one per-org key: no key over its limit, and admitted + leased = what the primary counted, exactly', async () => {
  const remotes = await Promise.all([1, 2, 3].map(() => forkWorker({ leaseMs: 100, timeoutMs: 10_000 })));
  try {
    const tag = `h${process.pid}`;
    const users = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (const r of remotes) {
      await r.call('limiter', 'user', { limit: 40, window: '1m', prefix: `${tag}u` });
      await r.call('limiter', 'org', { limit: 150, window: '1m', prefix: `${tag}o` });
      // Never leased, never refused: its consumes always travel to the primary (see heldAfterRoundTrip).
      await r.call('limiter', 'roundTrip', { limit: 1_000_000, window: '1m', algorithm: 'sliding-window', prefix: `${tag}r` });
    }
    const keys = [...users.map((user) => `${tag}u:${user}`), `${tag}o:acme`];
    // A hammer answers while the top-ups its last lease spends queued are still on their way to the primary,
    // which counts their units when it grants them. Read as they land (the primary before, a worker after) they
    // show units leased that the primary did not count yet; so every worker's top-ups are answered first.
    const heldNow = async () => {
      const held = await Promise.all(remotes.map((r) => r.call<Record<string, number>>('heldAfterRoundTrip', 'roundTrip', keys)));
      return (key: string) => held.reduce((sum, h) => sum + h[key]!, 0);
    };
    const admittedOf: Record<string, number> = {};
    let total = 0;
    let sync = 0;
    // First with the org limit far off (leases held everywhere), then until it is exhausted.
    for (const n of [24, 240]) {
      const results = await Promise.all(remotes.map((r, w) => r.call<Hammered>('hammer', 'user', 'org', users, 'acme', n, w * 2)));
      for (const r of results) {
        total += r.total;
        sync += r.sync;
        for (const [user, admitted] of Object.entries(r.admitted)) admittedOf[user] = (admittedOf[user] ?? 0) + admitted;
      }
      const heldOf = await heldNow();
      let users_ = 0;
      for (const user of users) {
        const admitted = admittedOf[user] ?? 0;
        users_ += admitted;
        assert.ok(admitted <= 40, `${user}: ${admitted} admitted over a limit of 40`);
        const counted = 40 - (await remotes[0]!.call<Decision>('peek', 'user', user)).remaining;
        assert.equal(admitted + heldOf(`${tag}u:${user}`), counted, `${user}: admitted + leased = counted by the primary`);
      }
      assert.equal(users_, total);
      assert.ok(total <= 150, `org: ${total} admitted over a limit of 150`);
      const orgCounted = 150 - (await remotes[0]!.call<Decision>('peek', 'org', 'acme')).remaining;
      assert.equal(total + heldOf(`${tag}o:acme`), orgCounted, 'org: admitted + leased = counted by the primary');
    }
    assert.ok(total >= 100, `admitted ${total} of 150: leases must not strand most of the quota`);
    assert.ok(sync > 0, 'some composites were decided in the workers, from their leases');
  } finally {
    await killAll(remotes);
  }
});

test('a composite whose parts are all leased is decided in the worker thread, synchronously, with no message; a known-refused part refuses it there, spending nothing', async () => {
  const thread = await startThread({ leaseMs: 100 });
  const detach = primary.attach(thread.worker);
  try {
    const tag = `l${process.pid}`;
    await thread.call('limiter', 'user', { limit: 10_000, window: '1m', prefix: `${tag}u` });
    await thread.call('limiter', 'org', { limit: 10_000, window: '1m', prefix: `${tag}o` });
    await thread.call('limiter', 'strict', { limit: 3, window: '1m', algorithm: 'sliding-window', prefix: `${tag}s` });
    // Single consumes make the leases hot.
    await thread.call('sequence', 'user', 'x', 300);
    await thread.call('sequence', 'org', 'acme', 300);
    const before = primary.stats();
    const now = await thread.call<Composite | null>('consumeAllNow', [
      ['user', 'x', 1],
      ['org', 'acme', 2],
    ]);
    assert.ok(now !== null, 'decided synchronously');
    assert.equal(now.allowed, true);
    assert.deepEqual(
      now.parts.map((p) => p?.allowed),
      [true, true],
    );
    const held = [await thread.call<number>('held', `${tag}u:x`), await thread.call<number>('held', `${tag}o:acme`)];
    // Nothing reached the primary for it (a top-up may follow in the background, but never a composite).
    assert.ok(primary.stats().operations - before.operations <= 2, JSON.stringify([before, primary.stats()]));

    // A part the worker knows refused (sliding window, so never leased) refuses the composite in the worker.
    for (let i = 0; i < 3; i++) await thread.call('consume', 'strict', 'x');
    assert.equal((await thread.call<Decision>('consume', 'strict', 'x')).allowed, false);
    const ops = primary.stats().operations;
    const refused = await thread.call<Composite | null>('consumeAllNow', [
      ['user', 'x', 1],
      ['strict', 'x', 1],
    ]);
    assert.ok(refused !== null, 'refused synchronously');
    assert.equal(refused.allowed, false);
    assert.deepEqual(
      refused.parts.map((p) => p?.allowed),
      [true, false],
    );
    assert.equal(primary.stats().operations, ops);
    assert.equal(await thread.call<number>('held', `${tag}u:x`), held[0], 'the leased part spent nothing');
  } finally {
    detach();
    await thread.kill();
  }
});

test('a primary thread terminated mid-composite: the composite rejects with STORE_ERROR at once, no hang, nothing unhandled', async () => {
  const { port1, port2 } = new MessageChannel();
  const host = new Worker(new URL('./fixtures/primary-thread.mjs', import.meta.url), {
    workerData: { port: port1 },
    transferList: [port1],
  });
  host.on('error', () => {});
  await once(host, 'message');
  const store = new ClusterStore({ transport: port2, timeoutMs: 10_000 });
  try {
    const a = new RateLimiter({ limit: 5, window: '1m', store, prefix: 'ta' });
    const b = new RateLimiter({ limit: 5, window: '1m', algorithm: 'token-bucket', store, prefix: 'tb' });
    assert.equal(
      (
        await consumeAll([
          { limiter: a, key: 'k' },
          { limiter: b, key: 'k' },
        ])
      ).allowed,
      true,
    );
    host.postMessage({ stall: 5000 });
    await delay(50);
    const started = Date.now();
    const pending = consumeAll([
      { limiter: a, key: 'k' },
      { limiter: b, key: 'k' },
    ]);
    const raw = store.consumeAll([{ kind: 'consume', key: 'raw', amount: 1, policy: a.policy } as Operation]);
    // Handled from now on: an unhandled rejection fails the test.
    const rejected = Promise.all([assert.rejects(pending, code(ErrorCode.STORE_ERROR)), assert.rejects(raw, code(ErrorCode.STORE_ERROR))]);
    await delay(100);
    await host.terminate();
    await rejected;
    assert.ok(Date.now() - started < 5000, 'rejected when the primary went, not at the timeout');
  } finally {
    await store.close();
    port2.close();
  }
});

test('a node:cluster primary stuck mid-composite: the composite rejects with STORE_TIMEOUT; closing the store mid-composite rejects with CLOSED', async () => {
  const [w] = await Promise.all([forkWorker({ timeoutMs: 400 })]);
  try {
    await w!.call('limiter', 'a', { limit: 5, window: '1m', prefix: `s${process.pid}a`, breaker: false });
    await w!.call('limiter', 'b', { limit: 5, window: '1m', prefix: `s${process.pid}b`, breaker: false });
    const parts = [
      ['a', 'k', 1],
      ['b', 'k', 1],
    ];
    assert.equal((await w!.call<Composite>('consumeAllParts', parts)).allowed, true);
    const stuck = w!.call<Composite>('consumeAllParts', parts);
    stall(1200);
    await assert.rejects(stuck, code(ErrorCode.STORE_TIMEOUT));
    // Answering again: the worker handshakes anew and decides.
    assert.equal((await w!.call<Composite>('consumeAllParts', parts)).allowed, true);
  } finally {
    await killAll([w!]);
  }
  // Closed with the composite in flight (the primary here has not run yet): CLOSED, not a hang.
  const { port1, port2 } = new MessageChannel();
  const detach = primary.attach(port1);
  const store = new ClusterStore({ transport: port2 });
  const l = new RateLimiter({ limit: 5, window: '1m', store, prefix: `c${process.pid}` });
  const m = new RateLimiter({ limit: 5, window: '1m', store, prefix: `d${process.pid}` });
  const pending = consumeAll([
    { limiter: l, key: 'k' },
    { limiter: m, key: 'k' },
  ]);
  await store.close();
  await assert.rejects(pending, code(ErrorCode.CLOSED));
  detach();
  port2.close();
});

test('a malformed composite fails every part and spends nothing; a primary never decides its parts one by one', async () => {
  const { port1, port2 } = new MessageChannel();
  const detach = primary.attach(port1);
  const replies: { data: Record<string, unknown> }[] = [];
  port2.on('message', (m) => replies.push(m));
  await delay(10);
  replies.length = 0; // the greeting sent on attach
  const [k, x, y, z] = ['k', 'x', 'y', 'z'].map((name) => `m${process.pid}${name}`);
  port2.postMessage({
    type: 'process:msg',
    data: {
      floodgate: PROTOCOL_VERSION,
      t: 'batch',
      id: 9,
      p: [[0, 5, 60_000, 0]],
      // A part with no `a` pair; two parts naming one key; a count past the end; a good composite; a peek.
      o: [65, 0, k, 1, 65, 0, x, 1, 65, 0, x, 1, 65, 0, y, 1, 65, 0, k, 2, 65, 0, z, 1, 2, 0, k, 0],
      a: [1, 2, 3, 5, 4, 2],
    },
  });
  await delay(50);
  const result = replies.map((r) => r.data).find((d) => d.t === 'result' && d.id === 9)!;
  assert.deepEqual(
    (result.e as unknown[][]).map((e) => [e[0], e[1]]),
    [0, 1, 2, 3].map((i) => [i, ErrorCode.STORE_ERROR]),
  );
  const r = result.r as number[];
  assert.deepEqual(
    [r.slice(20, 22), r.slice(25, 27), r.slice(30, 32)],
    [
      [1, 3],
      [1, 4],
      [1, 3],
    ],
  );
  // A part whose key another policy holds: every part fails with the conflict, and the other key is left as it was.
  const w = `m${process.pid}w`;
  port2.postMessage({
    type: 'process:msg',
    data: {
      floodgate: PROTOCOL_VERSION,
      t: 'batch',
      id: 10,
      p: [
        [0, 5, 60_000, 0],
        [0, 6, 60_000, 0],
      ],
      o: [65, 0, w, 1, 65, 1, k, 1, 2, 0, w, 0],
      a: [0, 2],
    },
  });
  await delay(50);
  const conflict = replies.map((reply) => reply.data).find((d) => d.t === 'result' && d.id === 10)!;
  assert.deepEqual(
    (conflict.e as unknown[][]).map((e) => [e[0], e[1]]),
    [0, 1].map((i) => [i, ErrorCode.CONFLICTING_OPTIONS]),
  );
  assert.deepEqual((conflict.r as number[]).slice(10, 12), [1, 5]);
  detach();
  port2.close();
});
