// The likeliest slips in giving a Redis store its client: a client where the options belong, no client, an ioredis 4 or node-redis 3 client; each gets a message saying what to write.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { ErrorCode, isFloodgateError, type ErrorCodeValue } from '../../src/index.js';
import { LocalFirstStore, RedisStore } from '../../src/stores/redis/index.js';

/** Asserts `fn` throws a FloodgateError with `code` and a message containing `text`. */
function throwsWith(fn: () => unknown, code: ErrorCodeValue, text: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(isFloodgateError(e, code), `expected ${code}, got ${String(e)}`);
    assert.ok(e.message.includes(text), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(text)}`);
    return true;
  });
}

/** An object shaped like an ioredis 4 `Redis`: the commands and a status on an EventEmitter (ioredis 5 and later extend their own Commander). */
function ioredis4Like(): object {
  class Redis extends EventEmitter {
    readonly status = 'wait';
    readonly options = {};
    evalsha(): Promise<unknown> {
      return Promise.resolve(null);
    }
    eval(): Promise<unknown> {
      return Promise.resolve(null);
    }
    pipeline(): object {
      return {};
    }
    duplicate(): object {
      return new Redis();
    }
  }
  return new Redis();
}

/** An object shaped like a node-redis 3 client: callback commands in snake_case, no connect(). */
function nodeRedis3Like(): object {
  class RedisClient {
    readonly connected = false;
    send_command(): boolean {
      return true;
    }
    evalsha(): boolean {
      return true;
    }
  }
  return new RedisClient();
}

test('new RedisStore(client) instead of { client }: INVALID_OPTIONS saying to write new RedisStore({ client })', () => {
  const io = new Redis({ lazyConnect: true });
  const nr = createClient();
  for (const client of [io, nr]) {
    throwsWith(
      () => new RedisStore(client as never),
      ErrorCode.INVALID_OPTIONS,
      'RedisStore takes options: write new RedisStore({ client })',
    );
  }
  io.disconnect();
});

test('new LocalFirstStore(client) instead of { client }: INVALID_OPTIONS saying to write new LocalFirstStore({ client })', () => {
  const io = new Redis({ lazyConnect: true });
  const nr = createClient();
  for (const client of [io, nr]) {
    throwsWith(
      () => new LocalFirstStore(client as never),
      ErrorCode.INVALID_OPTIONS,
      'LocalFirstStore takes options: write new LocalFirstStore({ client })',
    );
  }
  io.disconnect();
});

test('no client: both stores say the same thing, naming the supported clients', () => {
  throwsWith(
    () => new RedisStore({} as never),
    ErrorCode.INVALID_OPTIONS,
    'RedisStore needs a client: write new RedisStore({ client }) with an ioredis Redis or Cluster (ioredis 5 or later',
  );
  throwsWith(
    () => new LocalFirstStore({} as never),
    ErrorCode.INVALID_OPTIONS,
    'LocalFirstStore needs a client: write new LocalFirstStore({ client }) with an ioredis Redis or Cluster (ioredis 5 or later',
  );
});

test('an ioredis 4 client: INVALID_CLIENT naming the version found and the one needed', () => {
  throwsWith(
    () => new RedisStore({ client: ioredis4Like() }),
    ErrorCode.INVALID_CLIENT,
    'ioredis 4 is not supported: use ioredis 5 or later',
  );
  throwsWith(
    () => new LocalFirstStore({ client: ioredis4Like() }),
    ErrorCode.INVALID_CLIENT,
    'ioredis 4 is not supported: use ioredis 5 or later',
  );
  // Passed where the options belong, the placement is the first thing to fix.
  throwsWith(() => new RedisStore(ioredis4Like() as never), ErrorCode.INVALID_OPTIONS, 'write new RedisStore({ client })');
});

test('a node-redis 3 client: INVALID_CLIENT saying to use node-redis 4 or later', () => {
  throwsWith(
    () => new RedisStore({ client: nodeRedis3Like() }),
    ErrorCode.INVALID_CLIENT,
    'node-redis 3 is not supported: use node-redis 4 or later',
  );
});

test('the current clients are not mistaken for old ones', () => {
  const io = new Redis({ lazyConnect: true });
  assert.equal(new RedisStore({ client: io }).clientKind, 'ioredis');
  assert.equal(new RedisStore({ client: createClient() }).clientKind, 'node-redis');
  io.disconnect();
});
