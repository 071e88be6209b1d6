// RedisStore without a server: strict options, client detection, key encoding, and the generated scripts matching their .lua sources.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { ALGORITHMS, ErrorCode, isFloodgateError, type ErrorCodeValue, type Policy } from '../../src/index.js';
import { RedisStore, redisKeys } from '../../src/stores/redis/index.js';
import { hashTag } from '../../src/stores/redis/key-names.js';
import { LUA_SCRIPTS } from '../../src/stores/redis/lua/scripts.generated.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const io = new Redis({ lazyConnect: true });

const throwsCode = (fn: () => unknown, code: ErrorCodeValue) =>
  assert.throws(fn, (e: unknown) => {
    assert.ok(isFloodgateError(e, code), `expected ${code}, got ${String(e)}`);
    return true;
  });

test('options are checked strictly', () => {
  throwsCode(() => new RedisStore(undefined as never), ErrorCode.INVALID_OPTIONS);
  throwsCode(() => new RedisStore({} as never), ErrorCode.INVALID_OPTIONS);
  throwsCode(() => new RedisStore({ client: io, timeout: 5 } as never), ErrorCode.UNKNOWN_OPTION);
  throwsCode(() => new RedisStore({ client: io, timeoutMs: 0 }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new RedisStore({ client: io, timeoutMs: 1.5 }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new RedisStore({ client: io, timeoutMs: '1s' as never }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new RedisStore({ client: io, timeoutMs: 2 ** 31 }), ErrorCode.INVALID_DURATION);
  throwsCode(() => new RedisStore({ client: io, clock: 5 as never }), ErrorCode.INVALID_OPTIONS);
  assert.equal(new RedisStore({ client: io }).timeoutMs, 500);
});

test('an unrecognised client throws INVALID_CLIENT saying what is accepted', () => {
  for (const client of ['redis://localhost:6379', 6379, {}, { host: 'localhost', port: 6379 }, [], () => 1, new Map()]) {
    assert.throws(
      () => new RedisStore({ client: client as never }),
      (e: unknown) =>
        isFloodgateError(e, ErrorCode.INVALID_CLIENT) && /ioredis Redis or Cluster/.test(e.message) && /createClient/.test(e.message),
    );
  }
});

test('every supported client is recognised without connecting', () => {
  const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
  const nr = createClient();
  const nrc = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] });
  assert.equal(new RedisStore({ client: io }).clientKind, 'ioredis');
  assert.equal(new RedisStore({ client: cluster }).clientKind, 'ioredis-cluster');
  assert.equal(new RedisStore({ client: nr }).clientKind, 'node-redis');
  assert.equal(new RedisStore({ client: nrc }).clientKind, 'node-redis-cluster');
});

test('apply rejects an unknown operation or algorithm instead of sending it', async () => {
  const store = new RedisStore({ client: io });
  const policy: Policy = { algorithm: 'fixed-window', limit: 1, windowMs: 1000, blockMs: 0 };
  await assert.rejects(store.apply({ kind: 'toString' as never, key: 'k', amount: 0, policy }), (e: unknown) =>
    isFloodgateError(e, ErrorCode.INVALID_OPTIONS),
  );
  await assert.rejects(
    store.apply({ kind: 'consume', key: 'k', amount: 1, policy: { ...policy, algorithm: 'leaky' as never } }),
    (e: unknown) => isFloodgateError(e, ErrorCode.INVALID_ALGORITHM),
  );
});

test('hash tags: plain keys as they are, anything that could break or fake a tag encoded, all distinct', () => {
  assert.equal(hashTag('fg:fixed-window:10:1000:0:alice'), 'fg:fixed-window:10:1000:0:alice');
  assert.equal(hashTag('ünïcödé 👍'), 'ünïcödé 👍');
  assert.equal(hashTag('a{b}'), `~${Buffer.from('a{b}').toString('base64url')}`);
  assert.equal(hashTag(''), '~');
  const tricky = [
    '',
    '~',
    '~~',
    '{',
    '}',
    '{}',
    'a{b}c',
    'a}b{c',
    '~abc',
    `~${Buffer.from('a{b}').toString('base64url')}`,
    '\uD800',
    '\uDC00',
    '\uDBFF',
    '\uFFFD',
    'x\uD83D',
    '\uD83D\uDC4D',
  ];
  const tags = tricky.map(hashTag);
  assert.equal(new Set(tags).size, tricky.length);
  for (const tag of tags) {
    assert.ok(tag.length > 0 && !/[{}]/.test(tag), JSON.stringify(tag));
  }
  assert.deepEqual(redisKeys('k'), { state: '{k}', log: '{k}:l', slots: '{k}:s' });
  assert.deepEqual(redisKeys('a:{t}:b'), { state: '{t}#a:{t}:b', log: '{t}l#a:{t}:b', slots: '{t}s#a:{t}:b' });
});

test('the generated scripts match their .lua sources (run node scripts/gen-lua.mjs after editing them)', () => {
  // Throws (exit status 1) when the committed file differs from what the generator would write.
  execFileSync(process.execPath, ['scripts/gen-lua.mjs', '--check'], { cwd: root, stdio: 'pipe' });
  for (const algorithm of ALGORITHMS) {
    const script = LUA_SCRIPTS[algorithm];
    assert.equal(createHash('sha1').update(script.text).digest('hex'), script.sha);
    assert.ok(script.text.startsWith(`-- floodgate ${algorithm}\n`));
  }
});

test('a clock that throws rejects that call with STORE_ERROR and leaves the others alone', async () => {
  let calls = 0;
  const store = new RedisStore({
    client: io,
    clock: () => {
      if (++calls === 1) throw new Error('clock broke');
      return 1;
    },
  });
  const policy: Policy = { algorithm: 'fixed-window', limit: 1, windowMs: 1000, blockMs: 0 };
  await assert.rejects(store.apply({ kind: 'peek', key: 'k', amount: 0, policy }), (e: unknown) =>
    isFloodgateError(e, ErrorCode.STORE_ERROR),
  );
  await store.close();
});
