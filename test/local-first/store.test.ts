// LocalFirstStore on a real Redis: options, broadcast between processes' stores, decisions without Redis behind a 20 ms proxy, Redis commands per request, bounded memory.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { ErrorCode, RateLimiter, isFloodgateError } from '../../src/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';
import { startDelayProxy, type DelayProxy } from '../support/delay-proxy.js';
import { commandCount, sleep, until, untilLive } from '../support/local-first.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';

let server: RedisServer;
let admin: Redis;
const cleanups: (() => unknown)[] = [];
before(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: server.host });
});
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  admin.disconnect();
  await server.stop();
});

let unique = 0;
/** A store on its own ioredis client; closed after the file. */
async function store(options: Partial<ConstructorParameters<typeof LocalFirstStore>[0]> = {}, url = server.url): Promise<LocalFirstStore> {
  const client = new Redis(url);
  client.on('error', () => {});
  const s = new LocalFirstStore({ client, channel: `t-${process.pid}`, ...options });
  cleanups.push(async () => {
    await s.close();
    client.disconnect();
  });
  await untilLive(s);
  return s;
}

describe('options', () => {
  test('unknown options and bad values throw typed errors', () => {
    const client = new Redis({ port: server.port, lazyConnect: true });
    const code = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        assert.ok(isFloodgateError(error));
        return error.code;
      }
      return 'no error';
    };
    assert.equal(code(() => new LocalFirstStore({ client, ttl: 1 } as never)), ErrorCode.UNKNOWN_OPTION);
    assert.equal(code(() => new LocalFirstStore({} as never)), ErrorCode.INVALID_OPTIONS);
    assert.equal(code(() => new LocalFirstStore({ client: {} })), ErrorCode.INVALID_CLIENT);
    assert.equal(code(() => new LocalFirstStore({ client, timeoutMs: 0 })), ErrorCode.INVALID_DURATION);
    assert.equal(code(() => new LocalFirstStore({ client, leaseMs: 1.5 })), ErrorCode.INVALID_DURATION);
    assert.equal(code(() => new LocalFirstStore({ client, maxKeys: -1 })), ErrorCode.INVALID_OPTIONS);
    assert.equal(code(() => new LocalFirstStore({ client, maxShare: 0 })), ErrorCode.INVALID_OPTIONS);
    assert.equal(code(() => new LocalFirstStore({ client, channel: '' })), ErrorCode.INVALID_OPTIONS);
    assert.equal(code(() => new LocalFirstStore({ client, clock: 5 as never })), ErrorCode.INVALID_OPTIONS);
    assert.equal(code(() => new LocalFirstStore({ client, subscriber: 'x' as never })), ErrorCode.INVALID_CLIENT);
    client.disconnect();
  });

  test('a closed store rejects with CLOSED', async () => {
    const s = await store();
    await s.close();
    const l = new RateLimiter({ store: s, limit: 5, window: '1s' });
    await assert.rejects(l.consume('k'), (e) => isFloodgateError(e, ErrorCode.CLOSED));
  });
});

describe('broadcast', () => {
  test('exhaustion, blocks, reset and reward reach the other stores, which then answer from memory', async () => {
    const [a, b] = [await store(), await store()];
    const prefix = `bc${++unique}`;
    const la = new RateLimiter({ store: a, limit: 10, window: '10s', prefix });
    const lb = new RateLimiter({ store: b, limit: 10, window: '10s', prefix });
    for (let i = 0; i < 10; i++) assert.equal((await la.consume('k')).allowed, true);
    // B never asked about k, yet hears it is exhausted and refuses without Redis.
    await until('B hears k is exhausted', async () => {
      const before = b.stats().leaseCalls;
      const d = await lb.consume('k');
      return !d.allowed && b.stats().leaseCalls === before;
    });
    assert.ok((await lb.consume('k')).retryAfterMs > 9000);

    await la.reward('k', 2);
    await until('B hears the reward', async () => (await lb.consume('k')).allowed);

    await la.block('k', '5s');
    await until('B hears the block', async () => {
      const d = await lb.consume('k');
      return !d.allowed && d.retryAfterMs > 4000 && d.retryAfterMs <= 5000;
    });
    const calls = b.stats().leaseCalls;
    for (let i = 0; i < 100; i++) assert.equal((await lb.consume('k')).allowed, false);
    assert.equal(b.stats().leaseCalls, calls, 'a blocked key costs B no Redis call');

    await la.reset('k');
    await until('B hears the reset', async () => (await lb.consume('k')).allowed);
  });

  test('blockDuration: the refused consume blocks the key in Redis and every store hears it', async () => {
    const [a, b] = [await store(), await store()];
    const prefix = `bd${++unique}`;
    const la = new RateLimiter({ store: a, limit: 3, window: '200ms', blockDuration: '2s', prefix });
    const lb = new RateLimiter({ store: b, limit: 3, window: '200ms', blockDuration: '2s', prefix });
    for (let i = 0; i < 3; i++) assert.equal((await la.consume('k')).allowed, true);
    const over = await la.consume('k');
    assert.equal(over.allowed, false);
    assert.ok(over.retryAfterMs > 1900);
    await sleep(300); // the window is over, the block is not
    await until('B hears the block', async () => {
      const d = await lb.consume('k');
      return !d.allowed && d.retryAfterMs > 1000;
    });
    assert.equal((await la.consume('k')).allowed, false);
  });
});

describe('remote Redis (20 ms each way)', () => {
  let proxy: DelayProxy;
  before(async () => {
    proxy = await startDelayProxy({ targetPort: server.port, delayMs: 20 });
  });
  after(async () => {
    await proxy.stop();
  });

  test('with a lease in hand, decisions do not wait for Redis', async () => {
    const s = await store({}, proxy.url);
    const l = new RateLimiter({ store: s, limit: 1_000_000, window: '10s', prefix: `rm${++unique}` });
    const t0 = performance.now();
    await l.consume('k');
    const rtt = performance.now() - t0;
    assert.ok(rtt >= 40, `the first consume leases through the proxy: ${rtt.toFixed(1)} ms`);

    // Demand of ~2 000/s for a while grows the slices; then measure.
    const latencies: number[] = [];
    const deadline = performance.now() + 1500;
    while (performance.now() < deadline) {
      const batch = Array.from({ length: 20 }, async () => {
        const t = performance.now();
        const d = await l.consume('k');
        assert.equal(d.allowed, true);
        latencies.push(performance.now() - t);
      });
      await Promise.all(batch);
      await sleep(10);
    }
    const last = latencies.slice(-1000).sort((x, y) => x - y);
    const p90 = last[Math.floor(last.length * 0.9)]!;
    const under5 = last.filter((ms) => ms < 5).length / last.length;
    console.log(
      `remote: RTT ${rtt.toFixed(1)} ms; last ${last.length} consumes: p50 ${last[Math.floor(last.length / 2)]!.toFixed(3)} ms, p90 ${p90.toFixed(3)} ms, ${(under5 * 100).toFixed(1)} % under 5 ms; ${JSON.stringify(s.stats())}`,
    );
    assert.ok(under5 >= 0.9, `${(under5 * 100).toFixed(1)} % of consumes under 5 ms`);
  });
});

test('Redis commands per request stay under 0.05 at a steady high rate on one key', async () => {
  const s = await store();
  const l = new RateLimiter({ store: s, limit: 10_000_000, window: '10s', prefix: `cmd${++unique}` });
  await l.consume('hot');
  await admin.config('RESETSTAT');
  const before = await commandCount(admin);
  let requests = 0;
  const deadline = performance.now() + 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      for (let i = 0; i < 50; i++) {
        await l.consume('hot');
        requests++;
      }
      await new Promise((r) => setImmediate(r));
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  const commands = (await commandCount(admin)) - before;
  const perRequest = commands / requests;
  console.log(`cmds/request: ${commands} commands / ${requests} requests = ${perRequest.toFixed(5)}; ${JSON.stringify(s.stats())}`);
  assert.ok(requests > 10_000, `${requests} requests`);
  assert.ok(perRequest <= 0.05, `${perRequest} commands per request`);
});

test('a flood of distinct keys keeps at most maxKeys in memory', async () => {
  const s = await store({ maxKeys: 500 });
  const l = new RateLimiter({ store: s, limit: 5, window: '5s', prefix: `mem${++unique}` });
  for (let i = 0; i < 5000; i += 250) {
    await Promise.all(Array.from({ length: 250 }, (_, j) => l.consume(`key-${i + j}`)));
    assert.ok(s.stats().keys <= 500, `${s.stats().keys} keys`);
  }
  // Broadcasts about unknown keys are bounded too.
  const other = await store();
  const lo = new RateLimiter({ store: other, limit: 1, window: '5s', prefix: l.prefix });
  await Promise.all(Array.from({ length: 2000 }, (_, i) => lo.consume(`flood-${i}`)));
  await sleep(200);
  assert.ok(s.stats().keys <= 500, `${s.stats().keys} keys after broadcasts`);
});
