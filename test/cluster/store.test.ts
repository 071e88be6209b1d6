// In-process tests of the cluster store: options, the wire (one message per turn, Infinity, errors), conflicts, timeouts, bounds and close().
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { MessageChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { ErrorCode, ManualClock, RateLimiter } from '../../src/index.js';
import { cleanup, code, primaryOf, useCleanup } from './support/in-process.js';
import { ClusterStore, ClusterStorePrimary, PROTOCOL_VERSION } from '../../src/stores/cluster/index.js';

useCleanup();

function storeOf(options: ConstructorParameters<typeof ClusterStore>[0] = {}): ClusterStore {
  const store = new ClusterStore({ transport: 'local', ...options });
  cleanup.push(() => store.close());
  return store;
}

/** A primary and a store joined by a MessageChannel, with a count of the messages each way. */
function channelPair(options: { timeoutMs?: number } = {}) {
  const primary = primaryOf();
  const { port1, port2 } = new MessageChannel();
  const counts = { toPrimary: 0, toWorker: 0 };
  port1.on('message', () => counts.toPrimary++);
  port2.on('message', () => counts.toWorker++);
  primary.attach(port1);
  const store = new ClusterStore({ transport: port2, ...options });
  cleanup.push(async () => {
    await store.close();
    port1.close();
  });
  return { primary, store, counts, port1, port2 };
}

test('options are checked strictly', () => {
  assert.throws(() => new ClusterStore({ timeout: 5 } as never), code(ErrorCode.UNKNOWN_OPTION));
  assert.throws(() => new ClusterStore({ timeoutMs: 0 }), code(ErrorCode.INVALID_DURATION));
  assert.throws(() => new ClusterStore({ timeoutMs: 1.5 }), code(ErrorCode.INVALID_DURATION));
  assert.throws(() => new ClusterStore({ clock: 5 as never }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStore({ transport: 'redis' as never }), code(ErrorCode.INVALID_OPTIONS));
  // This test process has no IPC channel to a parent.
  if (typeof process.send !== 'function') assert.throws(() => new ClusterStore({ transport: 'process' }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStorePrimary({ maxKeys: 0, cluster: false }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStorePrimary({ cluster: 'yes' as never }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStorePrimary({ max: 1 } as never), code(ErrorCode.UNKNOWN_OPTION));
  // The primary's own name in its messages, though a MemoryStore holds its counters.
  assert.throws(() => new ClusterStorePrimary({ maxKeys: 0, cluster: false }), { message: /^ClusterStorePrimary maxKeys/ });
  // Above 2^31 - 1 ms node's timers fire every millisecond instead.
  assert.throws(() => new ClusterStorePrimary({ sweepIntervalMs: 2 ** 31, cluster: false }), code(ErrorCode.INVALID_DURATION));
  // null is not "the default": only undefined (or leaving it out) is.
  assert.throws(() => new ClusterStore({ timeoutMs: null as never }), code(ErrorCode.INVALID_OPTIONS));
  assert.throws(() => new ClusterStore({ knownRefusals: null as never }), code(ErrorCode.INVALID_OPTIONS));
});

test('one primary per process: a second fails loudly until the first is closed', async () => {
  const first = new ClusterStorePrimary({ cluster: false });
  assert.throws(() => new ClusterStorePrimary({ cluster: false }), code(ErrorCode.CONFLICTING_OPTIONS));
  await first.close();
  await first.close(); // idempotent
  assert.throws(() => first.attach(new MessageChannel().port1), code(ErrorCode.CLOSED));
  await new ClusterStorePrimary({ cluster: false }).close();
  // close() frees the slot at once: no await needed before the next primary.
  const before = new ClusterStorePrimary({ cluster: false });
  const closing = before.close();
  const next = new ClusterStorePrimary({ cluster: false });
  await closing;
  await next.close();
  assert.throws(() => primaryOf().attach({} as never), code(ErrorCode.INVALID_OPTIONS));
});

test('every call of one turn, from several limiters and stores, travels in one message each way', async () => {
  const { primary, store, counts, port2 } = channelPair();
  const second = new ClusterStore({ transport: port2 });
  cleanup.push(() => second.close());
  const a = new RateLimiter({ limit: 30, window: '10s', store, prefix: 'a' });
  const b = new RateLimiter({ limit: 5, window: '10s', store: second, prefix: 'b', algorithm: 'token-bucket' });
  await a.consume('warm'); // the handshake
  const before = { ...counts, batches: primary.stats().batches };
  const decisions = await Promise.all([
    ...Array.from({ length: 40 }, () => a.consume('k')),
    ...Array.from({ length: 10 }, () => b.consume('k')),
  ]);
  assert.equal(decisions.slice(0, 40).filter((d) => d.allowed).length, 30);
  assert.equal(decisions.slice(40).filter((d) => d.allowed).length, 5);
  assert.equal(counts.toPrimary - before.toPrimary, 1);
  assert.equal(counts.toWorker - before.toWorker, 1);
  assert.equal(primary.stats().batches - before.batches, 1);
});

test('a huge turn is split so one message never holds more than 5000 operations', async () => {
  const { primary, store } = channelPair({ timeoutMs: 10_000 });
  const l = new RateLimiter({ limit: 100, window: '10s', store });
  await l.peek('warm');
  const before = primary.stats().batches;
  const decisions = await Promise.all(Array.from({ length: 6000 }, () => l.consume('k')));
  assert.equal(decisions.filter((d) => d.allowed).length, 100);
  assert.equal(primary.stats().batches - before, 2);
});

test('Infinity and blocks survive the wire; the primary clock decides when the store has none', async () => {
  const clock = new ManualClock();
  primaryOf({ clock: clock.now, sweepIntervalMs: 0 });
  const l = new RateLimiter({ limit: 2, window: '1s', store: storeOf(), blockDuration: '5s' });
  const forever = await l.block('x', 'forever');
  assert.equal(forever.retryAfterMs, Infinity);
  assert.equal(forever.resetMs, Infinity);
  await l.consume('k');
  await l.consume('k');
  assert.equal((await l.consume('k')).retryAfterMs, 5000);
  clock.advance(4000);
  assert.equal((await l.consume('k')).retryAfterMs, 1000);
  clock.advance(1000);
  assert.equal((await l.consume('k')).allowed, true);
});

test("a store's clock overrides the primary's", async () => {
  primaryOf({ sweepIntervalMs: 0 });
  const clock = new ManualClock(5_000);
  const l = new RateLimiter({ limit: 1, window: '1s', store: storeOf({ clock: clock.now }) });
  assert.equal((await l.consume('k')).resetMs, 1000);
  clock.advance(999);
  assert.equal((await l.consume('k')).retryAfterMs, 1);
  clock.advance(1);
  assert.equal((await l.consume('k')).allowed, true);
});

test('a key used under two policies is refused with CONFLICTING_OPTIONS while its usage lasts, then may change hands', async () => {
  const clock = new ManualClock();
  primaryOf({ clock: clock.now, sweepIntervalMs: 0 });
  const store = storeOf();
  const five = new RateLimiter({ limit: 5, window: '1s', store, prefix: 'p' });
  const ten = new RateLimiter({ limit: 10, window: '1s', store, prefix: 'p' });
  const sliding = new RateLimiter({ limit: 5, window: '1s', store, prefix: 'p', algorithm: 'sliding-log' });
  await five.consume('k');
  await assert.rejects(ten.consume('k'), code(ErrorCode.CONFLICTING_OPTIONS));
  await assert.rejects(sliding.peek('k'), code(ErrorCode.CONFLICTING_OPTIONS));
  await assert.rejects(ten.reset('k'), code(ErrorCode.CONFLICTING_OPTIONS));
  assert.equal((await five.consume('k')).remaining, 3, 'the refused calls touched nothing');
  // Prefixes that collide ("a" + "b:c" and "a:b" + "c") are caught the same way.
  await new RateLimiter({ limit: 1, window: '1s', store, prefix: 'a' }).consume('b:c');
  await assert.rejects(new RateLimiter({ limit: 2, window: '1s', store, prefix: 'a:b' }).consume('c'), code(ErrorCode.CONFLICTING_OPTIONS));
  // Once the usage has expired, another policy may use the key: nothing is shared any more.
  clock.advance(1000);
  assert.equal((await ten.consume('k')).remaining, 9);
});

test('with insurance, a conflict still rejects: a misconfiguration is not an outage to fall back from', async () => {
  primaryOf({ sweepIntervalMs: 0 });
  const store = storeOf();
  await new RateLimiter({ limit: 5, window: '1m', store, prefix: 'q' }).consume('k');
  const insured = new RateLimiter({ limit: 9, window: '1m', store, prefix: 'q', insurance: new RateLimiter({ limit: 1, window: '1m' }) });
  await assert.rejects(insured.consume('k'), code(ErrorCode.CONFLICTING_OPTIONS));
});

test("the primary's keys and remembered policies are bounded by maxKeys", async () => {
  const primary = primaryOf({ maxKeys: 10 });
  const l = new RateLimiter({ limit: 1, window: '1m', store: storeOf() });
  await Promise.all(Array.from({ length: 100 }, (_, i) => l.consume(`u${i}`)));
  assert.deepEqual({ keys: primary.stats().keys, bindings: primary.stats().bindings }, { keys: 10, bindings: 10 });
});

test('no primary: calls time out with STORE_TIMEOUT after timeoutMs, each from its own start', async () => {
  const l = new RateLimiter({ limit: 1, window: '1s', store: storeOf({ timeoutMs: 150 }) });
  const started = Date.now();
  const first = l.consume('k');
  await delay(60);
  const second = l.consume('k');
  await assert.rejects(first, code(ErrorCode.STORE_TIMEOUT));
  const firstAt = Date.now() - started;
  await assert.rejects(second, code(ErrorCode.STORE_TIMEOUT));
  const secondAt = Date.now() - started;
  assert.ok(firstAt >= 140 && firstAt < 1000, `first after ${firstAt} ms`);
  assert.ok(secondAt >= 200, `second after ${secondAt} ms`);
});

test('a call made before the port is attached waits for it and is sent once', async () => {
  const { port1, port2 } = new MessageChannel();
  const store = new ClusterStore({ transport: port2, timeoutMs: 5000 });
  cleanup.push(async () => {
    await store.close();
    port1.close();
  });
  const l = new RateLimiter({ limit: 2, window: '1s', store });
  const early = l.consume('k');
  await delay(100);
  const primary = primaryOf();
  primary.attach(port1);
  assert.equal((await early).remaining, 1);
  assert.equal(primary.stats().operations, 1);
});

test('a closed port fails pending and later calls at once with STORE_ERROR', async () => {
  const { port1, port2 } = new MessageChannel();
  const store = new ClusterStore({ transport: port2, timeoutMs: 60_000 });
  cleanup.push(() => store.close());
  const l = new RateLimiter({ limit: 2, window: '1s', store });
  const pending = l.consume('k');
  port1.close();
  await assert.rejects(pending, code(ErrorCode.STORE_ERROR));
  await assert.rejects(l.consume('k'), code(ErrorCode.STORE_ERROR));
});

test('the primary answers a protocol mismatch and malformed messages with errors, and keeps serving', async () => {
  const primary = primaryOf();
  const { port1, port2 } = new MessageChannel();
  primary.attach(port1);
  cleanup.push(() => port1.close());
  const replies: unknown[] = [];
  port2.on('message', (m) => replies.push(m));
  await delay(10);
  replies.length = 0; // the greeting sent on attach
  const send = (data: unknown) => port2.postMessage({ type: 'process:msg', data });
  send({ floodgate: PROTOCOL_VERSION + 1, t: 'hello' });
  send({ floodgate: PROTOCOL_VERSION, t: 'batch', id: 7, p: 'x', o: [] });
  send({
    floodgate: PROTOCOL_VERSION,
    t: 'batch',
    id: 8,
    p: [
      [0, 5, 1000, 0],
      [9, 1, 1, 0],
    ],
    o: [1, 0, 'k', -3, 1, 1, 'k', 1, 99, 0, 'k', 1, 'length', 'length', 'k', 1, 1, 0, 'ok', 1],
  });
  send('unrelated traffic');
  send({ floodgate: PROTOCOL_VERSION, t: 'hello' });
  await delay(50);
  const data = replies.map((r) => (r as { data: Record<string, unknown> }).data);
  assert.equal(data[0]!.t, 'error');
  assert.match(String(data[0]!.message), /protocol mismatch/);
  assert.deepEqual([data[1]!.t, data[1]!.id, data[1]!.code], ['error', 7, ErrorCode.STORE_ERROR]);
  assert.equal(data[2]!.t, 'result');
  assert.deepEqual(
    (data[2]!.e as unknown[][]).map((e) => e[0]),
    [0, 1, 2, 3],
  );
  assert.deepEqual((data[2]!.r as number[]).slice(20), [1, 4, 1000, 0, 0]);
  assert.equal(data[3]!.t, 'ready');
  port2.close();
});

test('a primary of another release: its refusal fails waiting calls at once instead of at their timeout', async () => {
  const { port1, port2 } = new MessageChannel();
  port1.on('message', () =>
    port1.postMessage({
      topic: 'floodgate',
      data: { floodgate: 99, t: 'error', code: ErrorCode.STORE_ERROR, message: 'protocol mismatch' },
    }),
  );
  const store = new ClusterStore({ transport: port2, timeoutMs: 60_000 });
  cleanup.push(async () => {
    await store.close();
    port1.close();
  });
  const l = new RateLimiter({ limit: 1, window: '1s', store });
  await assert.rejects(l.consume('k'), code(ErrorCode.STORE_ERROR));
});

test('close(): later calls reject with CLOSED; the last store on a transport fails its pending calls with CLOSED', async () => {
  const store = new ClusterStore({ transport: 'local', timeoutMs: 60_000 });
  const l = new RateLimiter({ limit: 1, window: '1s', store });
  const pending = l.consume('k'); // no primary: waits
  await store.close();
  await store.close();
  await assert.rejects(pending, code(ErrorCode.CLOSED));
  await assert.rejects(l.consume('k'), code(ErrorCode.CLOSED));
});

test('an idle store stops listening, so it never keeps a thread or process alive by itself', async () => {
  const { store, port2 } = channelPair();
  const listeners = port2.listenerCount('message'); // the test's own counter
  await new RateLimiter({ limit: 1, window: '1s', store }).consume('k');
  assert.equal(port2.listenerCount('message'), listeners + 1);
  await delay(1200);
  assert.equal(port2.listenerCount('message'), listeners);
});

test('stores created and closed again and again on one port add no listeners', async () => {
  const primary = primaryOf();
  const { port1, port2 } = new MessageChannel();
  primary.attach(port1);
  cleanup.push(() => port1.close());
  const counts = () => ({ message: port2.listenerCount('message'), close: port2.listenerCount('close') });
  let first: ReturnType<typeof counts> | undefined;
  for (let i = 0; i < 20; i++) {
    // The only store on the port each time: its client is made and closed every round.
    const store = new ClusterStore({ transport: port2 });
    await new RateLimiter({ limit: 1, window: '1s', store }).peek('k');
    await store.close();
    first ??= counts();
  }
  assert.deepEqual(counts(), first);
  assert.equal(first!.message, 0, 'a closed store stops listening');
  port2.close();
});
