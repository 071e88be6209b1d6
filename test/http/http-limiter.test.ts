// The shared HTTP path without a server: strict option validation, and the outcomes of decide() and handle() for edge cases (bad keys, dynamic costs, throwing hooks).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import type { Operation, Outcome } from '../../src/core/policy.js';
import { MemoryStore } from '../../src/stores/memory.js';
import type { Store } from '../../src/stores/store.js';
import { HttpLimiter } from '../../src/http/http-limiter.js';
import { UNKNOWN_CLIENT_KEY } from '../../src/http/identity.js';
import { formatWindow } from '../../src/http/options.js';
import type { HttpRateLimitOptions, RequestView } from '../../src/http/types.js';

const adapter = { owner: 'test', frameworkIp: true };
const limiter = (limit = 5, window: string | number = '1m'): RateLimiter => new RateLimiter({ limit, window });
const build = (options: Partial<HttpRateLimitOptions<unknown>>): HttpLimiter<unknown> =>
  new HttpLimiter<unknown>(options as HttpRateLimitOptions<unknown>, adapter);
const view = (over: Partial<RequestView<unknown>> = {}): RequestView<unknown> => ({
  raw: {},
  socketAddress: '192.0.2.1',
  headers: {},
  method: 'GET',
  path: '/',
  ...over,
});

describe('HttpLimiter options', () => {
  it('rejects bad options with stable codes', () => {
    const cases: Array<[Partial<HttpRateLimitOptions<unknown>> | unknown, string]> = [
      [{}, ErrorCode.INVALID_OPTIONS],
      [{ limiter: [] }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: { limit: 5, window: '1m' } }, ErrorCode.UNKNOWN_OPTION],
      [{ limiter: limiter(), windowMs: 1000 }, ErrorCode.UNKNOWN_OPTION],
      [{ limiter: limiter(), key: { header: 'bad header' } }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), key: { header: 'x-api-key', missingStatus: 403 } }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), key: 'user' }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), trustProxy: true }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), trustProxy: 'framework', proxyHeader: 'forwarded' }, ErrorCode.CONFLICTING_OPTIONS],
      [{ limiter: limiter(), ipv6Subnet: 0 }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), maxKeyLength: 32 }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), cost: 0 }, ErrorCode.INVALID_COST],
      [{ limiter: limiter(5), cost: 6 }, ErrorCode.COST_EXCEEDS_LIMIT],
      [{ limiter: limiter(), headers: ['ietf', 'draft-7'] }, ErrorCode.CONFLICTING_OPTIONS],
      [{ limiter: limiter(), statusCode: 200 }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), body: 'html' }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), skip: true }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), allowList: '10.0.0.0/8' }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), denyList: [''] }, ErrorCode.INVALID_OPTIONS],
      // Typos that would otherwise become keys no client sends.
      [{ limiter: limiter(), denyList: ['10.0.0.0/40'] }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), allowList: ['127.0.0.0/33'] }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), denyList: ['2001:db8::/129'] }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), allowList: ['300.1.1.1'] }, ErrorCode.INVALID_OPTIONS],
      // Options that would do nothing.
      [{ limiter: limiter(), proxyHeader: 'forwarded' }, ErrorCode.CONFLICTING_OPTIONS],
      [{ limiter: limiter(), onStoreError: 'pass', storeErrorStatus: 500 }, ErrorCode.CONFLICTING_OPTIONS],
      [{ limiter: limiter(), onStoreError: 'ignore' }, ErrorCode.INVALID_OPTIONS],
      [{ limiter: limiter(), timeout: '5 minutes' }, ErrorCode.INVALID_DURATION],
      [{ limiter: [limiter(), limiter()] }, ErrorCode.CONFLICTING_OPTIONS],
      [
        {
          limiter: [
            { limiter: limiter(), name: 'x' },
            { limiter: limiter(), name: 'x' },
          ],
        },
        ErrorCode.CONFLICTING_OPTIONS,
      ],
      [{ limiter: { limiter: limiter(), name: 'naïve' } }, ErrorCode.INVALID_OPTIONS],
      ['not an object', ErrorCode.INVALID_OPTIONS],
    ];
    cases.forEach(([options, code], i) => {
      assert.throws(() => build(options as Partial<HttpRateLimitOptions<unknown>>), { code }, `case ${i}`);
    });
    const l = limiter();
    assert.throws(() => build({ limiter: [l, { limiter: l, name: 'again' }] }), { code: ErrorCode.CONFLICTING_OPTIONS });
  });

  it('names policies after their limit and window by default', () => {
    assert.deepEqual(build({ limiter: [limiter(10, '1s'), limiter(1000, '1d'), limiter(3, 1500)] }).policyNames, [
      '10-per-1s',
      '1000-per-1d',
      '3-per-1500ms',
    ]);
    assert.deepEqual([formatWindow(60_000), formatWindow(7_200_000), formatWindow(90_000)], ['1m', '2h', '90s']);
  });
});

describe('HttpLimiter.handle', () => {
  it('hands invalid keys and costs back as errors, spending nothing', async () => {
    const a = limiter(5);
    const b = limiter(2);
    const emptyKey = await build({ limiter: a, key: () => '' }).handle(view());
    assert.equal(emptyKey.action, 'error');
    assert.equal((emptyKey as { error: { code: string } }).error.code, ErrorCode.INVALID_KEY);
    const tooCostly = await build({ limiter: [a, b], cost: () => 3 }).handle(view());
    assert.equal(tooCostly.action, 'error');
    assert.equal((tooCostly as { error: { code: string } }).error.code, ErrorCode.COST_EXCEEDS_LIMIT);
    assert.equal((await a.peek('192.0.2.1')).remaining, 5, 'the policy that admitted was refunded');
  });

  it("hands a body function's answer without JSON text back as a typed error, not an empty or broken body", async () => {
    for (const answer of [undefined, () => 1, Symbol('s'), { n: 1n }]) {
      const gate = build({ limiter: limiter(1), body: (() => answer) as unknown as () => object });
      assert.equal((await gate.handle(view())).action, 'continue');
      const refused = await gate.handle(view());
      assert.equal(refused.action, 'error', `body function answering ${String(typeof answer)}`);
      assert.equal((refused as { error: { code: string } }).error.code, ErrorCode.INVALID_OPTIONS);
      assert.match((refused as { error: Error }).error.message, /the body function must return a string or a JSON-serialisable value/);
    }
  });

  it('charges a dynamic cost and reports it', async () => {
    const decisions: number[] = [];
    const gate = build({ limiter: limiter(5), cost: () => 2, onDecision: (_r, info) => void decisions.push(info.cost) });
    const outcomes = [await gate.handle(view()), await gate.handle(view()), await gate.handle(view())];
    assert.deepEqual(
      outcomes.map((o) => o.action),
      ['continue', 'continue', 'respond'],
    );
    assert.deepEqual(decisions, [2, 2, 2]);
  });

  it('keeps answering when hooks throw, and when onError throws too', async () => {
    const errors: unknown[] = [];
    const gate = build({
      limiter: limiter(1),
      onLimited: () => {
        throw new Error('hook');
      },
      onDecision: async () => {
        throw new Error('async hook');
      },
      onError: (e) => {
        errors.push(e);
        throw new Error('onError itself');
      },
    });
    assert.equal((await gate.handle(view())).action, 'continue');
    const refused = await gate.handle(view());
    assert.equal(refused.action, 'respond');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(errors.map((e) => (e as Error).message).sort(), ['async hook', 'async hook', 'hook']);
  });

  it('uses the framework address with trustProxy "framework", and a shared key when no address is known', async () => {
    const keys: string[] = [];
    const onDecision = (_r: unknown, info: { key: string }): void => void keys.push(info.key);
    await build({ limiter: limiter(), trustProxy: 'framework', onDecision }).handle(view({ frameworkIp: '::ffff:198.51.100.4' }));
    await build({ limiter: limiter(), onDecision }).handle(view({ socketAddress: undefined }));
    assert.deepEqual(keys, ['198.51.100.4', UNKNOWN_CLIENT_KEY]);
  });

  it('gives back a consume that answered after the middleware timed out', async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const slow: Store = {
      name: 'slow',
      apply: (op: Operation): Promise<Outcome> =>
        new Promise((resolve, reject) => setTimeout(() => memory.apply(op).then(resolve, reject), 150)),
    };
    const l = new RateLimiter({ limit: 3, window: '1m', store: slow, breaker: false });
    const outcome = await build({ limiter: l, timeout: 30, onError: () => undefined }).handle(view());
    assert.equal(outcome.action, 'respond');
    assert.equal((outcome as { status: number }).status, 503);
    await new Promise((r) => setTimeout(r, 400));
    assert.equal((await l.peek('192.0.2.1')).remaining, 3, 'the late admission was refunded');
  });
});

describe('HttpLimiter.decide', () => {
  /** A memory store that answers only through a promise, as a remote store does. */
  const remoteLike = (): Store => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    return { name: 'remote-like', apply: (operation) => memory.apply(operation) };
  };
  const blockingLimiter = (clock: () => number): RateLimiter =>
    new RateLimiter({ limit: 2, window: '10s', inMemoryBlock: true, clock, store: remoteLike() });

  it('answers a key the in-memory block refuses synchronously, exactly as handle() does', async () => {
    let now = 1_000_000;
    const blocking = blockingLimiter(() => now);
    const http = build({ limiter: blocking, key: { header: 'x-api-key' }, headers: ['ietf', 'legacy'] });
    const request = view({ headers: { 'x-api-key': 'alice' } });
    // A key the block list does not hold needs the store; a missing key is answered at once.
    const first = http.decide(request);
    assert.ok(first instanceof Promise);
    assert.equal((await first).action, 'continue');
    const missing = http.decide(view());
    assert.ok(!(missing instanceof Promise) && missing.action === 'respond' && missing.status === 401);
    // The consume that spends the last unit teaches the block list (onConsumed defaults to the limit).
    assert.equal((await http.handle(request)).action, 'continue');
    now += 1500;
    const fast = http.decide(request);
    assert.ok(!(fast instanceof Promise));
    assert.deepEqual(fast, await http.handle(request));
    assert.equal(fast.action === 'respond' && fast.status, 429);
    // Other keys are untouched.
    assert.ok(http.decide(view({ headers: { 'x-api-key': 'bob' } })) instanceof Promise);
  });

  it('decides synchronously on a store that decides in process (the memory store), admissions included', () => {
    const http = build({ limiter: new RateLimiter({ limit: 1, window: '1m', store: new MemoryStore({ sweepIntervalMs: 0 }) }) });
    const admitted = http.decide(view());
    const refused = http.decide(view());
    assert.ok(!(admitted instanceof Promise) && admitted.action === 'continue' && admitted.headers.length === 2);
    assert.ok(!(refused instanceof Promise) && refused.action === 'respond' && refused.status === 429);
  });

  it('stays synchronous through synchronous key, cost and skip functions, and waits for asynchronous ones', async () => {
    const blocking = blockingLimiter(() => 1_000_000);
    await blocking.consume('alice', 2);
    const sync = [
      build({ limiter: blocking, key: () => 'alice' }),
      build({ limiter: blocking, key: () => 'alice', cost: () => 1 }),
      build({ limiter: blocking, key: () => 'alice', skip: () => false }),
    ];
    for (const http of sync) {
      const outcome = http.decide(view());
      assert.ok(!(outcome instanceof Promise) && outcome.action === 'respond' && outcome.status === 429);
    }
    const waiting = [
      build({ limiter: blocking, key: async () => 'alice' }),
      build({ limiter: blocking, key: () => 'alice', skip: async () => false }),
      build({ limiter: [blocking, limiter()], key: () => 'alice' }),
    ];
    for (const http of waiting) {
      const outcome = http.decide(view());
      assert.ok(outcome instanceof Promise);
      const settled = await outcome;
      assert.equal(settled.action === 'respond' && settled.status, 429);
    }
    // A throwing key function is an error outcome, not a throw.
    const thrown = build({
      limiter: blocking,
      key: () => {
        throw new Error('boom');
      },
    }).decide(view());
    assert.ok(!(thrown instanceof Promise) && thrown.action === 'error');
    const rejected = await build({
      limiter: blocking,
      key: async () => {
        throw new Error('boom');
      },
    }).decide(view());
    assert.equal(rejected.action, 'error');
  });

  it('shares one frozen refusal between keys with the same seconds left, unless a hook or body function must see each request', async () => {
    const now = 1_000_000;
    const blocking = blockingLimiter(() => now);
    await blocking.consume('alice', 2);
    await blocking.consume('bob', 2);
    const http = build({ limiter: blocking, key: { header: 'x-api-key' } });
    const alice = http.decide(view({ headers: { 'x-api-key': 'alice' } }));
    const bob = http.decide(view({ headers: { 'x-api-key': 'bob' } }));
    assert.equal(alice, bob);
    assert.ok(!(alice instanceof Promise) && Object.isFrozen(alice) && alice.action === 'respond' && Object.isFrozen(alice.headers));

    const seen: Array<string | undefined> = [];
    const hooked = build({ limiter: blocking, key: { header: 'x-api-key' }, onLimited: (_req, info) => void seen.push(info.key) });
    const first = hooked.decide(view({ headers: { 'x-api-key': 'alice' } }));
    const second = hooked.decide(view({ headers: { 'x-api-key': 'bob' } }));
    assert.notEqual(first, second);
    assert.deepEqual(seen, ['alice', 'bob']);

    let bodies = 0;
    const custom = build({ limiter: blocking, key: { header: 'x-api-key' }, body: () => `no ${++bodies}` });
    custom.decide(view({ headers: { 'x-api-key': 'alice' } }));
    const again = custom.decide(view({ headers: { 'x-api-key': 'alice' } }));
    assert.equal(again instanceof Promise || (again.action === 'respond' && again.body), 'no 2');
  });
});
