// RedisStore and LocalFirstStore on a single Redis through valkey-glide: parity, coalescing, NOSCRIPT, glide's timeout, and the subscriber rules and recovery of its pub/sub.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { GlideClient, GlideClientConfiguration } from '@valkey/valkey-glide';
import { ErrorCode, RateLimiter, isFloodgateError, type Policy } from '../../src/index.js';
import { LocalFirstStore, RedisStore } from '../../src/stores/redis/index.js';
import { until, untilHeardExhausted, untilLive } from '../support/local-first.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { checkScriptFlushRecovery, consumeTwoKeysInOneTick, differential, smokeAllOperations } from './helpers.js';

let server: RedisServer;
let client: GlideClient;
const opened: GlideClient[] = [];

/** A GlideClient on the test server, closed after the file. */
async function glide(extra: Partial<GlideClientConfiguration> = {}): Promise<GlideClient> {
  const c = await GlideClient.createClient({ addresses: [{ host: server.host, port: server.port }], requestTimeout: 2000, ...extra });
  opened.push(c);
  return c;
}

before(async () => {
  server = await startRedis();
  client = await glide();
});
after(async () => {
  for (const c of opened) c.close();
  await server.stop();
});

const policy = (algorithm: Policy['algorithm'], limit: number, windowMs: number): Policy =>
  Object.freeze({ algorithm, limit, windowMs, blockMs: 0 });

describe('RedisStore on valkey-glide', () => {
  test('the store reports its client', () => {
    assert.equal(new RedisStore({ client }).clientKind, 'glide');
  });

  test('a glide client where the options belong: INVALID_OPTIONS saying to write new RedisStore({ client })', () => {
    assert.throws(
      () => new RedisStore(client as never),
      (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_OPTIONS) && e.message.includes('new RedisStore({ client })'),
    );
  });

  test('Lua decides exactly as applyOperation', async () => {
    const checked = await differential({
      makeStore: (clock) => new RedisStore({ client, clock }),
      seed: 13,
      policies: 16,
      ticks: 30,
      prefix: 'diff-gl',
    });
    assert.ok(checked > 1000);
  });

  test('every operation and algorithm on Redis time, with a sub-second window', async () => {
    await smokeAllOperations(new RedisStore({ client }), `smoke-gl-${Date.now()}`);
  });

  test('one script call per key per tick, in arrival order, across keys', async () => {
    const key = `coalesce-gl-${Date.now()}`;
    const { remaining, info } = await consumeTwoKeysInOneTick(new RedisStore({ client }), (args) => client.customCommand(args), key);
    // A new store sends a script by text the first time (EVAL), by SHA after.
    const calls = [...info.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+),/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    assert.equal(calls, 2);
    assert.deepEqual(remaining, [3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0]);
  });

  test('calls on one key apply in the order they were made, though glide may reorder requests in flight together', async () => {
    const store = new RedisStore({ client });
    const p = policy('fixed-window', 1000, 60_000);
    const key = `order-gl-${Date.now()}`;
    const pending: Promise<number>[] = [];
    // In one turn: a composite between every two consumes ends the key's batch, so the flush holds 300 calls on the key.
    for (let i = 0; i < 150; i++) {
      pending.push(store.apply({ kind: 'consume', key, amount: 1, policy: p }).then((o) => o.remaining));
      pending.push(store.consumeAll([{ kind: 'consume', key, amount: 1, policy: p }]).then(([o]) => o!.remaining));
    }
    const remaining = await Promise.all(pending);
    assert.deepEqual(
      remaining,
      remaining.map((_, i) => 999 - i),
    );
  });

  test('SCRIPT FLUSH is recovered transparently', async () => {
    await checkScriptFlushRecovery(new RedisStore({ client }), (args) => client.customCommand(args), `noscript-gl-${Date.now()}`);
  });

  test("glide's own request timeout rejects with STORE_TIMEOUT, as the store's does", async () => {
    const quick = await glide({ requestTimeout: 100 });
    const store = new RedisStore({ client: quick, timeoutMs: 60_000 });
    server.pause();
    try {
      await assert.rejects(
        store.apply({ kind: 'consume', key: 'paused', amount: 1, policy: policy('fixed-window', 5, 60_000) }),
        (e: unknown) => isFloodgateError(e, ErrorCode.STORE_TIMEOUT) && e.message.includes('requestTimeout'),
      );
    } finally {
      server.resume();
    }
  });
});

describe('LocalFirstStore on valkey-glide', () => {
  test('without a subscriber: INVALID_CLIENT naming what to pass', () => {
    assert.throws(
      () => new LocalFirstStore({ client }),
      (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_CLIENT) && e.message.includes('GlideClient.createClient'),
    );
  });

  test('the client itself as subscriber: CONFLICTING_OPTIONS', () => {
    assert.throws(
      () => new LocalFirstStore({ client, subscriber: client }),
      (e: unknown) => isFloodgateError(e, ErrorCode.CONFLICTING_OPTIONS),
    );
  });

  test('a subscriber created with a pub/sub callback: INVALID_CLIENT, since the callback takes every message', async () => {
    const subscriber = await glide({ pubsubSubscriptions: { channelsAndPatterns: {}, callback: () => {} } });
    assert.throws(
      () => new LocalFirstStore({ client, subscriber }),
      (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_CLIENT) && e.message.includes('callback'),
    );
  });

  test('two stores on different channels share one subscriber and each hears its own channel', async () => {
    const subscriber = await glide();
    const stores = [0, 1, 2, 3].map((i) => new LocalFirstStore({ client, subscriber, channel: `gl-shared-${i % 2}-${process.pid}` }));
    try {
      for (const s of stores) await untilLive(s);
      // Stores 0 and 2 share channel 0, stores 1 and 3 channel 1: an exhaustion through 0 reaches 2, through 1 reaches 3.
      for (const [from, to] of [
        [0, 2],
        [1, 3],
      ] as const) {
        const prefix = `gl-shared-${from}-${Date.now()}`;
        const la = new RateLimiter({ store: stores[from]!, limit: 20, window: '10s', prefix });
        const lb = new RateLimiter({ store: stores[to]!, limit: 20, window: '10s', prefix });
        for (let i = 0; i < 20; i++) assert.equal((await la.consume('k')).allowed, true);
        await untilHeardExhausted(`store ${to} hears the exhaustion`, stores[to]!, lb);
      }
    } finally {
      for (const s of stores) await s.close();
    }
  });

  test('CLIENT KILL TYPE pubsub (glide reconnects within milliseconds): the store notices, gives back its lease, resubscribes and hears broadcasts again', async () => {
    const [sa, sb] = [await glide(), await glide()];
    const channel = `gl-kill-${process.pid}`;
    // B's sweeper waits a minute, so only the store noticing the reconnection gives B's lease back.
    const a = new LocalFirstStore({ client, subscriber: sa, channel });
    const b = new LocalFirstStore({ client, subscriber: sb, channel, leaseMs: 60_000 });
    try {
      await untilLive(a);
      await untilLive(b);
      const prefix = `gl-kill-${Date.now()}`;
      const la = new RateLimiter({ store: a, limit: 1000, window: '10s', prefix });
      const lb = new RateLimiter({ store: b, limit: 1000, window: '10s', prefix });
      for (let i = 0; i < 200; i++) await lb.consume('k');
      const returnsBefore = b.stats().returnCalls;
      assert.equal(returnsBefore, 0);
      await client.customCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']);
      await until('B resubscribes', () => b.stats().live && b.stats().returnCalls > returnsBefore);
      await untilLive(a);
      for (let i = 0; i < 2000 && (await la.consume('k')).allowed; i++);
      await untilHeardExhausted('B hears the exhaustion', b, lb);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('closing the store unsubscribes the subscriber and leaves it open', async () => {
    const subscriber = await glide();
    const channel = `gl-close-${process.pid}`;
    const store = new LocalFirstStore({ client, subscriber, channel });
    await untilLive(store);
    await store.close();
    await until('the channel is unsubscribed', async () => {
      const state = await subscriber.getSubscriptions();
      return ![...(state.actualSubscriptions[GlideClientConfiguration.PubSubChannelModes.Exact] ?? [])].includes(channel);
    });
    assert.equal(await subscriber.customCommand(['PING']), 'PONG');
  });
});

// Last in the file: it restarts the server every other test shares.
test('Redis SIGKILLed and restarted: RedisStore fails with a store error and the local-first subscription goes down meanwhile; both recover, the scripts re-sent', async () => {
  const subscriber = await glide();
  const store = new RedisStore({ client });
  const local = new LocalFirstStore({ client, subscriber, channel: `gl-restart-${process.pid}` });
  const p = policy('token-bucket', 5, 60_000);
  const key = `restart-gl-${Date.now()}`;
  try {
    await untilLive(local);
    assert.equal((await store.apply({ kind: 'consume', key, amount: 1, policy: p })).remaining, 4);
    await server.kill();
    await until('the local-first store notices', () => !local.stats().live);
    await assert.rejects(
      store.apply({ kind: 'consume', key, amount: 1, policy: p }),
      (e: unknown) => isFloodgateError(e, ErrorCode.STORE_ERROR) || isFloodgateError(e, ErrorCode.STORE_TIMEOUT),
    );
    await server.restart();
    await until('the subscription is back', () => local.stats().live, 10_000);
    // The restarted Redis has no scripts: NOSCRIPT, then EVAL. Each attempt takes a new key: a call that timed out
    // while Redis was down may still be applied once glide reconnects (STORE_TIMEOUT's documented meaning).
    let attempt = 0;
    await until('the store answers again', () =>
      store.apply({ kind: 'consume', key: `${key}:after:${attempt++}`, amount: 1, policy: p }).then(
        (o) => o.remaining === 4,
        () => false,
      ),
    );
  } finally {
    await local.close();
  }
});
