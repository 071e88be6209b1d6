// Composite (all-or-nothing) cases of the conformance suite: every store that has consumeAll must pass them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  consumeAll,
  consumeAllNow,
  MemoryStore,
  RateLimiter,
  type CompositeDecision,
  type ManualClock,
  type RateLimiterOptions,
} from '../../src/index.js';
import { rateLimitHeaders } from '../../src/http/headers.js';
import { compositeReports } from '../../src/http/together.js';

/** What the suite hands the composite cases. */
export interface CompositeContext {
  readonly clock: ManualClock;
  /** A limiter on the store under test, with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store'>): RateLimiter;
  /** Store calls made so far (consumeAll counts one). */
  calls(): number;
}

let tags = 0;
/** A hash tag per test, so a composite's keys share one Redis Cluster slot. */
const tag = () => `{g${++tags}:${process.pid}}`;

/** Registers the composite cases inside a conformance `describe`. */
export function compositeCases(ctx: CompositeContext): void {
  const { clock } = ctx;

  test('composite: every part admits, so every part spends (mixed algorithms and costs)', async () => {
    const g = tag();
    const perSecond = ctx.limiter({ limit: 5, window: '1s', algorithm: 'token-bucket' });
    const perDay = ctx.limiter({ limit: 100, window: '1d', algorithm: 'sliding-window' });
    const perOrg = ctx.limiter({ limit: 50, window: '1m', algorithm: 'sliding-log' });
    const d = await consumeAll([
      { limiter: perSecond, key: `${g}u1`, cost: 2 },
      { limiter: perDay, key: `${g}u1`, cost: 3 },
      { limiter: perOrg, key: g },
    ]);
    assert.equal(d.allowed, true);
    assert.deepEqual(
      d.parts.map((p) => p && [p.allowed, p.remaining]),
      [
        [true, 3],
        [true, 97],
        [true, 49],
      ],
    );
    assert.equal(d.decisive, 0);
    assert.equal(d.remaining, 3);
    assert.equal((await perSecond.peek(`${g}u1`)).remaining, 3);
    assert.equal((await perDay.peek(`${g}u1`)).remaining, 97);
    assert.equal((await perOrg.peek(g)).remaining, 49);
  });

  test('composite: one part refuses, so no part changes (read back from the store)', async () => {
    const g = tag();
    const perUser = ctx.limiter({ limit: 10, window: '1m', algorithm: 'fixed-window' });
    const perOrg = ctx.limiter({ limit: 3, window: '1m', algorithm: 'sliding-window' });
    const log = ctx.limiter({ limit: 10, window: '1m', algorithm: 'sliding-log' });
    const bucket = ctx.limiter({ limit: 10, window: '1m', algorithm: 'token-bucket' });
    await perOrg.consume(g, 3);
    await perUser.consume(`${g}u`, 4);
    clock.advance(1000);
    const before = await Promise.all([perUser.peek(`${g}u`), log.peek(`${g}u`), bucket.peek(`${g}u`), perOrg.peek(g)]);
    const d = await consumeAll([
      { limiter: perUser, key: `${g}u` },
      { limiter: log, key: `${g}u`, cost: 2 },
      { limiter: bucket, key: `${g}u` },
      { limiter: perOrg, key: g },
    ]);
    assert.equal(d.allowed, false);
    assert.equal(d.decisive, 3);
    assert.equal(d.remaining, 0);
    assert.ok(d.retryAfterMs > 0);
    assert.deepEqual(
      d.parts.map((p) => p?.allowed),
      [true, true, true, false],
    );
    // A part that would have admitted reports what it has, unspent.
    assert.deepEqual(
      d.parts.map((p) => p?.remaining),
      [6, 10, 10, 0],
    );
    const after = await Promise.all([perUser.peek(`${g}u`), log.peek(`${g}u`), bucket.peek(`${g}u`), perOrg.peek(g)]);
    assert.deepEqual(after.map(numbers), before.map(numbers));
  });

  test('composite: a refusing part with a blockDuration is blocked; the others are untouched', async () => {
    const g = tag();
    const strict = ctx.limiter({ limit: 1, window: '1s', blockDuration: '1m' });
    const loose = ctx.limiter({ limit: 10, window: '1s' });
    assert.equal(
      (
        await consumeAll([
          { limiter: loose, key: g },
          { limiter: strict, key: g },
        ])
      ).allowed,
      true,
    );
    const refused = await consumeAll([
      { limiter: loose, key: g },
      { limiter: strict, key: g },
    ]);
    assert.equal(refused.allowed, false);
    assert.equal(refused.decisive, 1);
    assert.equal(refused.retryAfterMs, 60_000);
    assert.equal((await loose.peek(g)).remaining, 9);
    clock.advance(2000);
    // The window has passed; the block holds for its own minute.
    const still = await strict.peek(g);
    assert.equal(still.allowed, false);
    assert.equal(still.retryAfterMs, 58_000);
    const again = await consumeAll([
      { limiter: loose, key: g },
      { limiter: strict, key: g },
    ]);
    assert.equal(again.allowed, false);
    assert.equal((await loose.peek(g)).remaining, 10);
  });

  test('composite: an explicitly blocked part refuses without spending anywhere', async () => {
    const g = tag();
    const a = ctx.limiter({ limit: 5, window: '1s' });
    const b = ctx.limiter({ limit: 5, window: '1s', algorithm: 'token-bucket' });
    await b.block(g, 'forever');
    const d = await consumeAll([
      { limiter: a, key: g },
      { limiter: b, key: g },
    ]);
    assert.equal(d.allowed, false);
    assert.equal(d.retryAfterMs, Infinity);
    assert.equal((await a.peek(g)).remaining, 5);
    await b.reset(g);
    assert.equal(
      (
        await consumeAll([
          { limiter: a, key: g },
          { limiter: b, key: g },
        ])
      ).allowed,
      true,
    );
  });

  test('composite: concurrent composites under a shared limit admit exactly the limits', async () => {
    const g = tag();
    const perUser = ctx.limiter({ limit: 4, window: '1m' });
    const perOrg = ctx.limiter({ limit: 10, window: '1m', algorithm: 'sliding-window' });
    const users = ['a', 'b', 'c', 'd'];
    const calls = Array.from({ length: 48 }, (_, i) => {
      const user = users[i % users.length]!;
      return consumeAll([
        { limiter: perUser, key: `${g}${user}` },
        { limiter: perOrg, key: g },
      ]).then((d) => ({ user, d }));
    });
    const results = await Promise.all(calls);
    const admitted = results.filter((r) => r.d.allowed);
    assert.equal(admitted.length, 10);
    let spent = 0;
    for (const user of users) {
      const mine = admitted.filter((r) => r.user === user).length;
      assert.ok(mine <= 4, `${user} admitted ${mine}`);
      const left = (await perUser.peek(`${g}${user}`)).remaining;
      assert.equal(4 - left, mine, `${user}: the store holds what was admitted`);
      spent += mine;
    }
    assert.equal(spent, 10);
    assert.equal((await perOrg.peek(g)).remaining, 0);
  });

  test('composite: the in-memory block of a refusing part answers the next composite without the store', async () => {
    const g = tag();
    const a = ctx.limiter({ limit: 5, window: '1s' });
    const b = ctx.limiter({ limit: 1, window: '1s', inMemoryBlock: true });
    assert.equal(
      (
        await consumeAll([
          { limiter: a, key: g },
          { limiter: b, key: g },
        ])
      ).allowed,
      true,
    );
    assert.equal(
      (
        await consumeAll([
          { limiter: a, key: g },
          { limiter: b, key: g },
        ])
      ).allowed,
      false,
    );
    const calls = ctx.calls();
    const d = await consumeAll([
      { limiter: a, key: g },
      { limiter: b, key: g },
    ]);
    assert.equal(d.allowed, false);
    assert.equal(d.source, 'memory-block');
    // Not consulted on any store, so a route's refusals read the same on memory as on Redis.
    assert.equal(d.parts[0], undefined);
    assert.equal(ctx.calls(), calls, 'no store call at all');
    assert.equal((await a.peek(g)).remaining, 4);
  });

  test('composite: refused RateLimit fields are the same on every store: every part the store decided, the refusing one first', async () => {
    const g = tag();
    const loose = ctx.limiter({ limit: 100, window: '1m' });
    const strict = ctx.limiter({ limit: 1, window: '1m', blockDuration: '1h', inMemoryBlock: true });
    const policies = [
      { limiter: loose, name: 'loose', key: undefined },
      { limiter: strict, name: 'strict', key: undefined },
    ];
    const parts = [
      { limiter: loose, key: g },
      { limiter: strict, key: g },
    ];
    const fields = (d: CompositeDecision) => rateLimitHeaders(['ietf'], compositeReports(policies, d, undefined), 0);
    assert.equal((await consumeAll(parts)).allowed, true);
    // Refused by the store: both parts reported, the refusing one first in RateLimit; RateLimit-Policy keeps the route's order.
    assert.deepEqual(fields(await consumeAll(parts)), [
      ['RateLimit-Policy', '"loose";q=100;w=60, "strict";q=1;w=60', true],
      ['RateLimit', '"strict";r=0;t=3600, "loose";r=99;t=60', true],
    ]);
    // Refused by the in-memory block: only the blocking part, which the store was not asked about either.
    const blocked = await consumeAll(parts);
    assert.equal(blocked.source, 'memory-block');
    assert.deepEqual(fields(blocked), [
      ['RateLimit-Policy', '"strict";q=1;w=60', true],
      ['RateLimit', '"strict";r=0;t=3600', true],
    ]);
  });

  test('composite: a shadow part that would refuse is admitted, marked, and the enforced parts spend as without it', async () => {
    const g = tag();
    const enforced = ctx.limiter({ limit: 5, window: '1m' });
    const watched = ctx.limiter({ limit: 1, window: '1m', shadow: true });
    const alsoWatched = ctx.limiter({ limit: 10, window: '1m', shadow: true });
    const parts = [
      { limiter: enforced, key: g },
      { limiter: watched, key: g },
      { limiter: alsoWatched, key: g },
    ];
    assert.equal((await consumeAll(parts)).shadowLimited, undefined);
    const d = await consumeAll(parts);
    assert.equal(d.allowed, true);
    assert.equal(d.shadowLimited, true);
    assert.deepEqual(
      d.parts.map((p) => p && [p.allowed, p.remaining, p.shadowLimited === true]),
      [
        [true, 3, false],
        [true, 0, true],
        [true, 8, false],
      ],
    );
    assert.ok(d.parts[1]!.retryAfterMs > 0, "the shadow part keeps the refusal's wait");
    assert.equal((await enforced.peek(g)).remaining, 3);
    assert.equal((await watched.peek(g)).remaining, 0);
    assert.equal((await alsoWatched.peek(g)).remaining, 8);
    // An enforced part's refusal still refuses the whole, the shadow parts marked and nothing spent.
    await enforced.consume(g, 3);
    const refused = await consumeAll(parts);
    assert.equal(refused.allowed, false);
    assert.deepEqual(
      refused.parts.map((p) => p && [p.allowed, p.shadowLimited === true]),
      [
        [false, false],
        [true, true],
        [true, false],
      ],
    );
    assert.equal((await alsoWatched.peek(g)).remaining, 8);
  });

  test('composite: consumeAllNow decides as consumeAll does when it can, and spends nothing when it cannot', async () => {
    const g = tag();
    const a = ctx.limiter({ limit: 3, window: '1s' });
    const b = ctx.limiter({ limit: 2, window: '1s' });
    const parts = [
      { limiter: a, key: g },
      { limiter: b, key: g },
    ];
    const now = consumeAllNow(parts);
    if (now === undefined) {
      assert.equal((await a.peek(g)).remaining, 3);
      assert.equal((await b.peek(g)).remaining, 2);
    } else {
      assert.equal(now.allowed, true);
      assert.deepEqual(
        now.parts.map((p) => p?.remaining),
        [2, 1],
      );
    }
  });

  test('composite: parts that cannot be decided together are a typed error, before any store call', async () => {
    const g = tag();
    const a = ctx.limiter({ limit: 3, window: '1s' });
    const elsewhere = new RateLimiter({ limit: 3, window: '1s', store: new MemoryStore() });
    const calls = ctx.calls();
    await assert.rejects(consumeAll([]), { code: 'FLOODGATE_INVALID_COMPOSITE' });
    await assert.rejects(
      consumeAll([
        { limiter: a, key: g },
        { limiter: a, key: g },
      ]),
      { code: 'FLOODGATE_INVALID_COMPOSITE' },
    );
    await assert.rejects(
      consumeAll([
        { limiter: a, key: g },
        { limiter: elsewhere, key: g },
      ]),
      { code: 'FLOODGATE_INVALID_COMPOSITE' },
    );
    await assert.rejects(consumeAll([{ limiter: a, key: g, cost: 4 }]), { code: 'FLOODGATE_COST_EXCEEDS_LIMIT' });
    await assert.rejects(consumeAll([{ limiter: a, key: '' }]), { code: 'FLOODGATE_INVALID_KEY' });
    await assert.rejects(consumeAll([{ limiter: {} as RateLimiter, key: g }]), { code: 'FLOODGATE_INVALID_COMPOSITE' });
    assert.equal(ctx.calls(), calls);
    await elsewhere.store.close?.();
  });
}

function numbers(d: { allowed: boolean; remaining: number; resetMs: number }): [boolean, number, number] {
  return [d.allowed, d.remaining, d.resetMs];
}
