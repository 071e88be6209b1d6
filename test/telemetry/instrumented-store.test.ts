// InstrumentedStore and instrumentLimiter with the real OpenTelemetry SDK: spans and metrics around a MemoryStore and a real Redis, a Redis that stops answering as error spans, and keys kept out unless hashed on request.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import {
  ErrorCode,
  FloodgateError,
  InstrumentedStore,
  instrumentLimiter,
  MemoryStore,
  RateLimiter,
  type Operation,
  type Store,
} from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { otelSdk, seriesOf, valueWhere, type OtelSdk } from '../support/otel.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';

const SPAN_ERROR = 2;
let sdk: OtelSdk;

before(() => {
  sdk = otelSdk();
});
after(() => sdk.shutdown());

/** Every attribute value of every span, as text: a key must not be among them. */
function spanText(): string {
  return JSON.stringify(sdk.spans().map((s) => s.attributes));
}

describe('InstrumentedStore on a MemoryStore', () => {
  test('apply: one span per call with store, operation, algorithm and allowed; durations by result; the key recorded nowhere', async () => {
    sdk.resetSpans();
    const limiter = new RateLimiter({ limit: 2, window: '1m', prefix: 'mem-apply' });
    const store = new InstrumentedStore(new MemoryStore(), { tracer: sdk.tracer, meter: sdk.meter });
    const op: Operation = { kind: 'consume', key: 'mem-apply:alice@example.com', amount: 1, policy: limiter.policy };
    const allowed = [];
    for (let i = 0; i < 3; i++) allowed.push((await store.apply(op)).allowed);
    await store.apply({ ...op, kind: 'peek', amount: 0 });
    assert.deepEqual(allowed, [true, true, false]);
    const spans = sdk.spans();
    assert.deepEqual(
      spans.map((s) => [s.name, s.attributes['floodgate.operation'], s.attributes['floodgate.allowed']]),
      [
        ['floodgate.store.apply', 'consume', true],
        ['floodgate.store.apply', 'consume', true],
        ['floodgate.store.apply', 'consume', false],
        ['floodgate.store.apply', 'peek', false],
      ],
    );
    for (const span of spans) {
      assert.equal(span.attributes['floodgate.store.name'], 'memory');
      assert.equal(span.attributes['floodgate.algorithm'], 'fixed-window');
      assert.equal(span.status.code, 0);
    }
    assert.doesNotMatch(spanText(), /alice/);
    const metrics = await sdk.metrics();
    const duration = metrics.get('floodgate.store.duration');
    assert.equal(duration?.descriptor.unit, 's');
    const consumes = valueWhere(duration, { 'floodgate.store.name': 'memory', 'floodgate.operation': 'consume', 'floodgate.result': 'ok' });
    assert.equal(typeof consumes === 'object' ? consumes.count : undefined, 3);
    assert.doesNotMatch(JSON.stringify(seriesOf(duration).map((s) => s.attributes)), /alice/);
  });

  test("recordKey: 'sha256' records a salted hash of the store key, never the key", async () => {
    sdk.resetSpans();
    const limiter = new RateLimiter({ limit: 5, window: '1m', prefix: 'mem-hash' });
    const store = new InstrumentedStore(new MemoryStore(), { tracer: sdk.tracer, recordKey: 'sha256', keySalt: 's3cret' });
    const key = 'mem-hash:203.0.113.9';
    await store.apply({ kind: 'consume', key, amount: 1, policy: limiter.policy });
    const [span] = sdk.spans();
    const expected = createHash('sha256').update(`s3cret${key}`).digest('hex').slice(0, 16);
    assert.equal(span?.attributes['floodgate.key.hash'], expected);
    assert.doesNotMatch(spanText(), /203\.0\.113\.9/);
  });

  test('composites and concurrency slots: their own spans, admission included; a composite hashes its keys together', async () => {
    sdk.resetSpans();
    const a = new RateLimiter({ limit: 1, window: '1m', prefix: 'mem-comp-a' });
    const b = new RateLimiter({ limit: 5, window: '1s', algorithm: 'sliding-window', prefix: 'mem-comp-b' });
    const store = new InstrumentedStore(new MemoryStore(), { tracer: sdk.tracer, recordKey: 'sha256' });
    const ops: Operation[] = [
      { kind: 'consume', key: 'mem-comp-a:erin', amount: 1, policy: a.policy },
      { kind: 'consume', key: 'mem-comp-b:erin', amount: 1, policy: b.policy },
    ];
    assert.deepEqual(
      (await store.consumeAll!(ops)).map((o) => o.allowed),
      [true, true],
    );
    assert.equal(
      (await store.consumeAll!(ops)).some((o) => !o.allowed),
      true,
    );
    assert.equal((await store.acquireSlot!('slots:erin', 1, 'owner-1', 10_000)).admitted, true);
    assert.equal((await store.acquireSlot!('slots:erin', 1, 'owner-2', 10_000)).admitted, false);
    assert.equal(await store.renewSlot!('slots:erin', 'owner-1', 10_000), true);
    assert.equal(await store.releaseSlot!('slots:erin', 'owner-1'), true);
    const spans = sdk.spans();
    assert.deepEqual(
      spans.map((s) => [s.name, s.attributes['floodgate.operation'], s.attributes['floodgate.allowed']]),
      [
        ['floodgate.store.consume_all', 'consume_all', true],
        ['floodgate.store.consume_all', 'consume_all', false],
        ['floodgate.store.acquire_slot', 'acquire_slot', true],
        ['floodgate.store.acquire_slot', 'acquire_slot', false],
        ['floodgate.store.renew_slot', 'renew_slot', undefined],
        ['floodgate.store.release_slot', 'release_slot', undefined],
      ],
    );
    assert.equal(spans[0]!.attributes['floodgate.parts'], 2);
    // The parts' algorithms differ, so none is named.
    assert.equal(spans[0]!.attributes['floodgate.algorithm'], undefined);
    assert.equal(
      spans[0]!.attributes['floodgate.key.hash'],
      createHash('sha256').update('mem-comp-a:erin\0mem-comp-b:erin').digest('hex').slice(0, 16),
    );
    assert.doesNotMatch(spanText(), /erin/);
  });

  test('the wrapper has exactly the capabilities of the store it wraps, and bad options are refused', () => {
    const memory = new InstrumentedStore(new MemoryStore(), {});
    for (const method of ['applyNow', 'settleNow', 'consumeAll', 'consumeAllNow', 'acquireSlot', 'releaseSlot', 'renewSlot'] as const) {
      assert.equal(typeof memory[method], typeof (new MemoryStore() as Store)[method], method);
    }
    const bare = new InstrumentedStore({ name: 'bare', apply: () => Promise.reject(new Error('unused')) });
    for (const method of ['applyNow', 'settleNow', 'consumeAll', 'consumeAllNow', 'acquireSlot'] as const)
      assert.equal(method in bare, false);
    assert.throws(
      () => new InstrumentedStore(new MemoryStore(), { recordKey: 'md5' as 'sha256' }),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS,
    );
    assert.throws(
      () => new InstrumentedStore(new MemoryStore(), { trace: sdk.tracer } as never),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.UNKNOWN_OPTION,
    );
    const limiter = new RateLimiter({ limit: 1, window: '1s' });
    assert.throws(
      () => instrumentLimiter(limiter, {} as never),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.INVALID_OPTIONS,
    );
    assert.throws(
      () => instrumentLimiter(limiter, { meter: sdk.meter, tracer: sdk.tracer } as never),
      (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.UNKNOWN_OPTION,
    );
  });

  test('a limiter on it: synchronous answers counted, not traced; decisions by outcome and source', async () => {
    sdk.resetSpans();
    const store = new InstrumentedStore(new MemoryStore(), { tracer: sdk.tracer, meter: sdk.meter });
    const limiter = new RateLimiter({ limit: 2, window: '1m', store, prefix: 'mem-limiter', inMemoryBlock: true });
    const undo = instrumentLimiter(limiter, { meter: sdk.meter, name: 'login' });
    for (let i = 0; i < 3; i++) await limiter.consume('bob');
    assert.equal(limiter.consumeNow('bob')?.allowed, false);
    assert.equal(sdk.spans().length, 0);
    const metrics = await sdk.metrics();
    const decisions = metrics.get('floodgate.decisions');
    assert.equal(
      valueWhere(decisions, { 'floodgate.limiter': 'login', 'floodgate.outcome': 'allowed', 'floodgate.decision.source': 'store' }),
      2,
    );
    // The second admission used the last unit, which taught the in-memory block: the next two never reached the store.
    assert.equal(
      valueWhere(decisions, { 'floodgate.limiter': 'login', 'floodgate.outcome': 'limited', 'floodgate.decision.source': 'memory-block' }),
      2,
    );
    assert.equal(
      valueWhere(decisions, { 'floodgate.limiter': 'login', 'floodgate.outcome': 'limited', 'floodgate.decision.source': 'store' }),
      undefined,
    );
    assert.equal(valueWhere(metrics.get('floodgate.store.sync_answers'), { 'floodgate.store.name': 'memory' }), 2);
    assert.equal(valueWhere(metrics.get('floodgate.breaker.state'), { 'floodgate.limiter': 'login' }), 0);
    undo();
    await limiter.consume('bob');
    const again = await sdk.metrics();
    assert.equal(
      valueWhere(again.get('floodgate.decisions'), {
        'floodgate.limiter': 'login',
        'floodgate.outcome': 'limited',
        'floodgate.decision.source': 'memory-block',
      }),
      2,
    );
  });
});

describe('InstrumentedStore on a real Redis', () => {
  let server: RedisServer;
  let client: Redis;
  redisFixture((open, started) => {
    server = started;
    client = open();
  });

  test('consumes traced as redis calls; a Redis that stops answering gives error spans, error durations, fail-open decisions and an open breaker', async () => {
    sdk.resetSpans();
    const store = new InstrumentedStore(new RedisStore({ client, timeoutMs: 300 }), { tracer: sdk.tracer, meter: sdk.meter });
    assert.equal('applyNow' in store, false);
    const limiter = new RateLimiter({
      limit: 1,
      window: '1m',
      store,
      prefix: `otel-redis-${process.pid}`,
      inMemoryBlock: false,
      onStoreFailure: 'fail-open',
      breaker: { failureThreshold: 2, cooldown: '1h' },
    });
    instrumentLimiter(limiter, { meter: sdk.meter, name: 'api' });
    assert.equal((await limiter.consume('carol')).allowed, true);
    assert.equal((await limiter.consume('carol')).allowed, false);
    const ok = sdk.spans();
    assert.deepEqual(
      ok.map((s) => [s.name, s.attributes['floodgate.store.name'], s.attributes['floodgate.allowed'], s.status.code]),
      [
        ['floodgate.store.apply', 'redis', true, 0],
        ['floodgate.store.apply', 'redis', false, 0],
      ],
    );
    sdk.resetSpans();
    server.pause();
    try {
      for (let i = 0; i < 3; i++) assert.equal((await limiter.consume('carol')).source, 'fail-open');
    } finally {
      server.resume();
    }
    // Two failures opened the breaker; the third call never reached the store.
    const failed = sdk.spans();
    assert.equal(failed.length, 2);
    for (const span of failed) {
      assert.equal(span.status.code, SPAN_ERROR);
      assert.equal(span.attributes['error.type'], ErrorCode.STORE_TIMEOUT);
      assert.equal(span.events.filter((e) => e.name === 'exception').length, 1);
    }
    assert.doesNotMatch(spanText(), /carol/);
    const metrics = await sdk.metrics();
    const errors = valueWhere(metrics.get('floodgate.store.duration'), {
      'floodgate.store.name': 'redis',
      'floodgate.result': 'error',
      'error.type': ErrorCode.STORE_TIMEOUT,
    });
    assert.equal(typeof errors === 'object' ? errors.count : undefined, 2);
    assert.equal(
      valueWhere(metrics.get('floodgate.decisions'), { 'floodgate.limiter': 'api', 'floodgate.decision.source': 'fail-open' }),
      3,
    );
    assert.equal(valueWhere(metrics.get('floodgate.breaker.state'), { 'floodgate.limiter': 'api' }), 1);
  });

  test('a limiter that rejects on store failure counts the decision as an error', async () => {
    const store = new InstrumentedStore(new RedisStore({ client, timeoutMs: 300 }), { meter: sdk.meter });
    const limiter = new RateLimiter({ limit: 5, window: '1m', store, prefix: `otel-reject-${process.pid}`, breaker: false });
    instrumentLimiter(limiter, { meter: sdk.meter, name: 'strict' });
    server.pause();
    try {
      await assert.rejects(limiter.consume('dave'), (e: unknown) => e instanceof FloodgateError && e.code === ErrorCode.STORE_TIMEOUT);
    } finally {
      server.resume();
    }
    const metrics = await sdk.metrics();
    assert.equal(valueWhere(metrics.get('floodgate.decisions'), { 'floodgate.limiter': 'strict', 'floodgate.outcome': 'error' }), 1);
  });
});
