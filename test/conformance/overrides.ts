// Per-key override cases of the conformance suite: a key's policy changed live keeps its counter, leases and blocks follow the new policy, and the store accepts the change.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolicyOverrides, type Algorithm, type ManualClock, type RateLimiter, type RateLimiterOptions } from '../../src/index.js';

/** What the suite hands the override cases. */
export interface OverrideContext {
  readonly clock: ManualClock;
  /** A limiter on the store under test, with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store'>): RateLimiter;
}

const ALL: Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'];

/** Registers the override cases inside a conformance `describe`. */
export function overrideCases(ctx: OverrideContext): void {
  const { clock } = ctx;
  const alignTo = (ms: number): void => clock.advance(ms - (clock.now() % ms));

  for (const algorithm of ALL) {
    test(`overrides (${algorithm}): an exact key and a pattern get their own limit; other keys keep the limiter's`, async () => {
      alignTo(10_000);
      const overrides = new PolicyOverrides({ 'tenant-42': { limit: 8 }, 'trial-*': { limit: 2, window: '20s' } });
      const l = ctx.limiter({ limit: 4, window: '10s', algorithm, overrides });
      const admitted = async (key: string): Promise<number> => {
        let n = 0;
        while ((await l.consume(key)).allowed) n++;
        return n;
      };
      assert.equal(await admitted('tenant-42'), 8);
      assert.equal(await admitted('trial-7'), 2);
      assert.equal(await admitted('plain'), 4);
      const d = await l.peek('trial-7');
      assert.equal(d.limit, 2);
      assert.equal(d.windowMs, 20_000);
      assert.equal((await l.peek('plain')).windowMs, 10_000);
    });

    test(`overrides (${algorithm}): raising and lowering a key's limit live keeps what it used (a token bucket: how full it is)`, async () => {
      alignTo(100_000);
      const overrides = new PolicyOverrides();
      const l = ctx.limiter({ limit: 5, window: '100s', algorithm, overrides });
      for (let i = 0; i < 5; i++) assert.equal((await l.consume('k')).allowed, true);
      assert.equal((await l.consume('k')).allowed, false);
      overrides.set('k', { limit: 8 });
      if (algorithm === 'token-bucket') {
        // The bucket keeps how full it is (GCRA holds the time until it is full again): drained stays
        // drained, and refills at the new rate, one unit per 100 s / 8.
        assert.equal((await l.consume('k')).allowed, false, 'a drained bucket stays drained');
        clock.advance(12_500);
        assert.equal((await l.consume('k')).allowed, true, 'one unit back after window/8');
        assert.equal((await l.consume('k')).allowed, false);
        return;
      }
      const raised = await l.consume('k');
      assert.equal(raised.allowed, true, 'the raised limit admits at once');
      assert.equal(raised.remaining, 2, `${algorithm}: 6 of 8 used, the 5 before the change still counted`);
      overrides.delete('k');
      const lowered = await l.consume('k');
      assert.equal(lowered.allowed, false, 'back under 5, the 6 used are over it');
      assert.equal(lowered.limit, 5);
    });
  }

  test('overrides: a lowered limit stops a key at once, with units this process already held (a lease) given up', async () => {
    alignTo(100_000);
    const overrides = new PolicyOverrides();
    const l = ctx.limiter({ limit: 1000, window: '100s', overrides });
    // A hot key: a leasing store holds a slice of its quota in this process now.
    for (let i = 0; i < 50; i++) assert.equal((await l.consume('hot')).allowed, true);
    overrides.set('hot', { limit: 50 });
    const d = await l.consume('hot');
    assert.equal(d.allowed, false, 'no unit leased under the old limit is spent under the new one');
    assert.equal(d.remaining, 0);
    assert.equal((await l.peek('hot')).remaining, 0);
    overrides.set('hot', { limit: 60 });
    let more = 0;
    while ((await l.consume('hot')).allowed) more++;
    assert.equal(more, 10, 'exactly the raised room: the store holds the 50 used, none lost or double-counted');
  });

  test('overrides: a block duration from the override blocks the key; a function source decides per key', async () => {
    const l = ctx.limiter({
      limit: 2,
      window: '10s',
      overrides: (key) => (key.startsWith('strict:') ? { limit: 1, blockDuration: '1m' } : undefined),
    });
    assert.equal((await l.consume('strict:a')).allowed, true);
    const over = await l.consume('strict:a');
    assert.equal(over.allowed, false);
    assert.equal(over.retryAfterMs, 60_000, 'blocked for the override block duration');
    assert.equal((await l.consume('loose')).allowed, true);
    assert.equal((await l.consume('loose')).allowed, true);
    assert.equal((await l.consume('loose')).retryAfterMs <= 10_000, true, 'no block from the limiter policy');
  });
}
