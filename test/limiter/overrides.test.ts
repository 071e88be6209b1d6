// PolicyOverrides: which entry decides a key (exact, then the most specific pattern, the same on every host), live changes, and the typed errors of bad entries.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, ManualClock, MemoryStore, PolicyOverrides, RateLimiter } from '../../src/index.js';

test('an exact key beats every pattern; among patterns the most literal characters win, then the smaller pattern', () => {
  const o = new PolicyOverrides({
    '*': { limit: 1 },
    'acme-*': { limit: 2 },
    'acme-*-eu': { limit: 3 },
    'acme-42': { limit: 4 },
    '*-eu': { limit: 5 },
  });
  assert.equal(o.match('acme-42')?.pattern, 'acme-42');
  assert.equal(o.match('acme-7-eu')?.pattern, 'acme-*-eu', '8 literal characters beat 5');
  assert.equal(o.match('acme-7')?.pattern, 'acme-*');
  assert.equal(o.match('other-eu')?.pattern, '*-eu');
  assert.equal(o.match('x')?.pattern, '*');
  // Equal specificity: 'ab*' and '*ab' both have 2 literal characters; '*ab' < 'ab*' in code-unit order.
  const tie = new PolicyOverrides({ 'ab*': { limit: 1 }, '*ab': { limit: 2 } });
  assert.equal(tie.match('abab')?.pattern, '*ab');
  const reversed = new PolicyOverrides([
    ['*ab', { limit: 2 }],
    ['ab*', { limit: 1 }],
  ]);
  assert.equal(reversed.match('abab')?.pattern, '*ab', 'the order entries were added in does not matter');
});

test('patterns are literal apart from *: regular-expression characters match themselves', () => {
  const o = new PolicyOverrides({ 'a.b*': { limit: 1 }, '(x)+*[y]': { limit: 2 } });
  assert.equal(o.match('a.bc')?.pattern, 'a.b*');
  assert.equal(o.match('axbc'), undefined);
  assert.equal(o.match('(x)+zz[y]')?.pattern, '(x)+*[y]');
  assert.equal(o.match('xx[y]'), undefined);
});

test('set, delete and clear take effect at the next decision; deleting one kind of pattern leaves the others', async () => {
  const o = new PolicyOverrides();
  const changes: string[] = [];
  o.onChange((p) => changes.push(p));
  const l = new RateLimiter({ limit: 1, window: '1m', store: new MemoryStore(), overrides: o });
  assert.equal(l.policyFor('ab').limit, 1);
  o.set('ab', { limit: 9 });
  o.set('a*', { limit: 7 });
  assert.equal(l.policyFor('ab').limit, 9);
  assert.equal(o.delete('ab'), true);
  assert.equal(l.policyFor('ab').limit, 7, 'deleting the exact key "ab" left the pattern "a*"');
  assert.equal(o.delete('ab'), false);
  assert.equal(l.policyFor('ab').base, l.policy, 'an override is of the limiter policy family');
  assert.equal(l.policyFor('ab'), l.policyFor('ax'), 'one policy object per entry, reused');
  o.clear();
  assert.equal(l.policyFor('ab'), l.policy);
  assert.deepEqual(changes, ['ab', 'a*', 'ab', 'a*']);
  assert.equal((await l.consume('ab')).windowMs, 60_000);
});

test('bad entries are refused with typed errors naming the pattern', () => {
  const o = new PolicyOverrides();
  const code = (fn: () => void): string | undefined => {
    try {
      fn();
    } catch (error) {
      return (error as { code?: string }).code;
    }
    return undefined;
  };
  assert.equal(
    code(() => o.set('', { limit: 1 })),
    ErrorCode.INVALID_OPTIONS,
  );
  assert.equal(
    code(() => o.set('k', { limit: 0 })),
    ErrorCode.INVALID_LIMIT,
  );
  assert.equal(
    code(() => o.set('k', { limit: 1.5 })),
    ErrorCode.INVALID_LIMIT,
  );
  assert.equal(
    code(() => o.set('k', { window: 'soon' })),
    ErrorCode.INVALID_WINDOW,
  );
  assert.equal(
    code(() => o.set('k', { algorithm: 'token-bucket' } as never)),
    ErrorCode.INVALID_OPTIONS,
  );
  assert.equal(
    code(() => o.set('k', { limt: 5 } as never)),
    ErrorCode.UNKNOWN_OPTION,
  );
  assert.equal(
    code(() => o.set('k', 5 as never)),
    ErrorCode.INVALID_OPTIONS,
  );
  assert.throws(() => o.set('k', { algorithm: 'token-bucket' } as never), /cannot change the algorithm/);
  assert.equal(o.size, 0, 'nothing was stored');
});

test('the overrides option: a table or a function, never with execEvenly; a function returning a bad override rejects', async () => {
  assert.throws(() => new RateLimiter({ limit: 1, window: '1s', overrides: {} as never }), { code: ErrorCode.INVALID_OPTIONS });
  assert.throws(() => new RateLimiter({ limit: 1, window: '1s', execEvenly: true, overrides: new PolicyOverrides() }), {
    code: ErrorCode.INVALID_OPTIONS,
  });
  const l = new RateLimiter({ limit: 1, window: '1s', overrides: () => ({ limit: -1 }) });
  await assert.rejects(l.consume('k'), { code: ErrorCode.INVALID_LIMIT });
});

test('a cost above the limiter limit is accepted for a key whose override allows it', async () => {
  const l = new RateLimiter({ limit: 2, window: '1m', overrides: new PolicyOverrides({ big: { limit: 10 } }) });
  assert.equal((await l.consume('big', 5)).allowed, true);
  await assert.rejects(l.consume('small', 5), { code: ErrorCode.COST_EXCEEDS_LIMIT });
});

test('in-memory block: a key refused from memory under its old limit is admitted once an override raises it, and the block threshold moves with the key limit', async () => {
  const overrides = new PolicyOverrides();
  const l = new RateLimiter({ limit: 2, window: '1m', inMemoryBlock: true, overrides });
  await l.consume('k');
  await l.consume('k');
  assert.equal((await l.consume('k')).source, 'memory-block');
  overrides.set('k', { limit: 4 });
  const raised = await l.consume('k');
  assert.equal(raised.allowed, true, 'the block learned under limit 2 is dropped');
  assert.equal((await l.consume('k')).allowed, true);
  const over = await l.consume('k');
  assert.equal(over.allowed, false);
  assert.equal((await l.consume('k')).source, 'memory-block', 'blocked again at its own limit of 4');
});

test('a calendar limiter: an override changes the limit and keeps the calendar period; one that changes the window is refused', async () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 31, 23, 0, 0));
  const overrides = new PolicyOverrides({ vip: { limit: 3 }, odd: { window: '1h' } });
  const l = new RateLimiter({
    limit: 1,
    window: { calendar: 'month', timeZone: 'UTC' },
    clock: clock.now,
    store: new MemoryStore({ clock: clock.now }),
    overrides,
  });
  for (let i = 0; i < 3; i++) assert.equal((await l.consume('vip')).allowed, true);
  const over = await l.consume('vip');
  assert.equal(over.allowed, false);
  assert.equal(over.retryAfterMs, 3_600_000, 'until February starts, as the limiter has it');
  await assert.rejects(l.consume('odd'), { code: ErrorCode.INVALID_OPTIONS });
});
