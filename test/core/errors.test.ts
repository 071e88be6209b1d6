// Table-driven checks that every invalid option or argument throws a FloodgateError with its stable code.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, FloodgateError, MemoryStore, RateLimiter, parseDuration, type ErrorCodeValue } from '../../src/index.js';

const store = new MemoryStore({ sweepIntervalMs: 0 });
const base = { limit: 10, window: '1s', store };
const make = (extra: Record<string, unknown>) => () => new RateLimiter({ ...base, ...extra } as never);
const limiter = new RateLimiter(base);
const other = new RateLimiter({ limit: 5, window: '1s' });

const constructorCases: [string, () => unknown, ErrorCodeValue][] = [
  ['options not an object', () => new RateLimiter(undefined as never), ErrorCode.INVALID_OPTIONS],
  ['options an array', () => new RateLimiter([] as never), ErrorCode.INVALID_OPTIONS],
  ['unknown option (typo)', make({ limt: 5 }), ErrorCode.UNKNOWN_OPTION],
  ['unknown option', make({ points: 5 }), ErrorCode.UNKNOWN_OPTION],
  ['limit missing', () => new RateLimiter({ window: '1s' } as never), ErrorCode.INVALID_LIMIT],
  ['limit zero', make({ limit: 0 }), ErrorCode.INVALID_LIMIT],
  ['limit negative', make({ limit: -1 }), ErrorCode.INVALID_LIMIT],
  ['limit fractional', make({ limit: 1.5 }), ErrorCode.INVALID_LIMIT],
  ['limit NaN', make({ limit: NaN }), ErrorCode.INVALID_LIMIT],
  ['limit Infinity', make({ limit: Infinity }), ErrorCode.INVALID_LIMIT],
  ['limit string', make({ limit: '10' }), ErrorCode.INVALID_LIMIT],
  ['window missing', () => new RateLimiter({ limit: 1 } as never), ErrorCode.INVALID_WINDOW],
  ['window zero', make({ window: 0 }), ErrorCode.INVALID_WINDOW],
  ['window negative', make({ window: -1000 }), ErrorCode.INVALID_WINDOW],
  ['window fractional ms', make({ window: 0.5 }), ErrorCode.INVALID_WINDOW],
  ['window NaN', make({ window: NaN }), ErrorCode.INVALID_WINDOW],
  ['window Infinity', make({ window: Infinity }), ErrorCode.INVALID_WINDOW],
  ['window unknown unit', make({ window: '5 parsecs' }), ErrorCode.INVALID_WINDOW],
  ['window empty string', make({ window: '' }), ErrorCode.INVALID_WINDOW],
  ['window "0s"', make({ window: '0s' }), ErrorCode.INVALID_WINDOW],
  ['window sub-millisecond string', make({ window: '0.5ms' }), ErrorCode.INVALID_WINDOW],
  ['window object', make({ window: {} }), ErrorCode.INVALID_WINDOW],
  ['limit × window too large', make({ limit: 2 ** 40, window: '1d' }), ErrorCode.LIMIT_TOO_LARGE],
  ['algorithm unknown', make({ algorithm: 'leaky' }), ErrorCode.INVALID_ALGORITHM],
  ['blockDuration negative', make({ blockDuration: -5 }), ErrorCode.INVALID_DURATION],
  ['blockDuration garbage', make({ blockDuration: 'soon' }), ErrorCode.INVALID_DURATION],
  ['store not a store', make({ store: {} }), ErrorCode.INVALID_STORE],
  ['store a function', make({ store: () => 1 }), ErrorCode.INVALID_STORE],
  ['prefix empty', make({ prefix: '' }), ErrorCode.INVALID_OPTIONS],
  ['prefix not a string', make({ prefix: 3 }), ErrorCode.INVALID_OPTIONS],
  ['clock not a function', make({ clock: 5 }), ErrorCode.INVALID_OPTIONS],
  ['inMemoryBlock unknown option', make({ inMemoryBlock: { after: 3 } }), ErrorCode.UNKNOWN_OPTION],
  ['inMemoryBlock.onConsumed above limit', make({ inMemoryBlock: { onConsumed: 11 } }), ErrorCode.CONFLICTING_OPTIONS],
  ['inMemoryBlock.onConsumed zero', make({ inMemoryBlock: { onConsumed: 0 } }), ErrorCode.INVALID_OPTIONS],
  ['inMemoryBlock.duration bad', make({ inMemoryBlock: { duration: 'x' } }), ErrorCode.INVALID_DURATION],
  ['inMemoryBlock.maxKeys zero', make({ inMemoryBlock: { maxKeys: 0 } }), ErrorCode.INVALID_OPTIONS],
  ['insurance not a limiter', make({ insurance: {} }), ErrorCode.INVALID_OPTIONS],
  ['insurance on the same store', make({ insurance: limiter }), ErrorCode.CONFLICTING_OPTIONS],
  ['insurance with fail-open', make({ insurance: other, onStoreFailure: 'fail-open' }), ErrorCode.CONFLICTING_OPTIONS],
  ['onStoreFailure unknown', make({ onStoreFailure: 'ignore' }), ErrorCode.INVALID_OPTIONS],
  ['breaker unknown option', make({ breaker: { threshold: 2 } }), ErrorCode.UNKNOWN_OPTION],
  ['breaker threshold zero', make({ breaker: { failureThreshold: 0 } }), ErrorCode.INVALID_OPTIONS],
  ['breaker cooldown bad', make({ breaker: { cooldown: -1 } }), ErrorCode.INVALID_DURATION],
  ['MemoryStore maxKeys zero', () => new MemoryStore({ maxKeys: 0 }), ErrorCode.INVALID_OPTIONS],
  ['MemoryStore unknown option', () => new MemoryStore({ max: 3 } as never), ErrorCode.UNKNOWN_OPTION],
  ['parseDuration of null', () => parseDuration(null, 'x'), ErrorCode.INVALID_DURATION],
];

const callCases: [string, () => Promise<unknown>, ErrorCodeValue][] = [
  ['cost zero', () => limiter.consume('k', 0), ErrorCode.INVALID_COST],
  ['cost negative', () => limiter.consume('k', -1), ErrorCode.INVALID_COST],
  ['cost NaN', () => limiter.consume('k', NaN), ErrorCode.INVALID_COST],
  ['cost Infinity', () => limiter.consume('k', Infinity), ErrorCode.INVALID_COST],
  ['cost fractional', () => limiter.consume('k', 1.5), ErrorCode.INVALID_COST],
  ['cost string', () => limiter.consume('k', '2' as never), ErrorCode.INVALID_COST],
  ['cost above limit', () => limiter.consume('k', 11), ErrorCode.COST_EXCEEDS_LIMIT],
  ['key empty', () => limiter.consume(''), ErrorCode.INVALID_KEY],
  ['key number', () => limiter.consume(5 as never), ErrorCode.INVALID_KEY],
  ['key undefined', () => limiter.consume(undefined as never), ErrorCode.INVALID_KEY],
  ['key object', () => limiter.consume({} as never), ErrorCode.INVALID_KEY],
  ['peek key empty', () => limiter.peek(''), ErrorCode.INVALID_KEY],
  ['reward zero', () => limiter.reward('k', 0), ErrorCode.INVALID_COST],
  ['reward fractional', () => limiter.reward('k', 0.1), ErrorCode.INVALID_COST],
  ['penalty negative', () => limiter.penalty('k', -2), ErrorCode.INVALID_COST],
  ['block duration zero', () => limiter.block('k', 0), ErrorCode.INVALID_DURATION],
  ['block duration Infinity', () => limiter.block('k', Infinity), ErrorCode.INVALID_DURATION],
  ['block duration garbage', () => limiter.block('k', 'later'), ErrorCode.INVALID_DURATION],
  ['reset key empty', () => limiter.reset(''), ErrorCode.INVALID_KEY],
];

for (const [name, fn, code] of constructorCases) {
  test(`throws ${code}: ${name}`, () => {
    assert.throws(fn, (error: unknown) => {
      assert.ok(error instanceof FloodgateError, `not a FloodgateError: ${String(error)}`);
      assert.equal(error.code, code, error.message);
      assert.ok(error.message.length > 20);
      return true;
    });
  });
}

for (const [name, fn, code] of callCases) {
  test(`rejects ${code}: ${name}`, async () => {
    await assert.rejects(fn(), (error: unknown) => {
      assert.ok(error instanceof FloodgateError, `not a FloodgateError: ${String(error)}`);
      assert.equal(error.code, code, error.message);
      return true;
    });
  });
}

test('the table covers at least 30 invalid inputs', () => {
  assert.ok(constructorCases.length + callCases.length >= 30);
});

test('valid durations parse exactly', () => {
  assert.equal(parseDuration('500ms', 'w'), 500);
  assert.equal(parseDuration('1.5s', 'w'), 1500);
  assert.equal(parseDuration('5m', 'w'), 300_000);
  assert.equal(parseDuration('1h', 'w'), 3_600_000);
  assert.equal(parseDuration('1d', 'w'), 86_400_000);
  assert.equal(parseDuration(250, 'w'), 250);
});

test('null options are refused, not read as the default; timer options stay within what node can time', () => {
  assert.throws(() => new RateLimiter({ limit: 5, window: '1s', store: null as never }), {
    code: ErrorCode.INVALID_OPTIONS,
    message: /store is null/,
  });
  assert.throws(() => new MemoryStore({ maxKeys: null as never }), { code: ErrorCode.INVALID_OPTIONS });
  assert.throws(() => new MemoryStore({ sweepIntervalMs: 3e9 }), { code: ErrorCode.INVALID_DURATION, message: /2147483647/ });
});

test('error messages describe values without looking valid', () => {
  assert.throws(() => parseDuration(0), { message: /^duration must be/ });
  assert.throws(() => new RateLimiter({ limit: 5, window: '1s' }).consumeNow('k', 1n as never), {
    code: ErrorCode.INVALID_COST,
    message: /got 1n \(a bigint\)/,
  });
  assert.throws(() => new RateLimiter({ limit: 5, window: '1s' }).consumeNow({} as never), {
    code: ErrorCode.INVALID_KEY,
    message: /got an object/,
  });
});
