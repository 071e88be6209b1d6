// PolicyBindings (which policy last used each Redis key from this process): a conflict is found for a key bound
// lately however many new keys come, a key bound two generations ago is forgotten, and the table stays bounded.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyBindings } from '../../src/stores/policy-bindings.js';
import type { Policy } from '../../src/core/policy.js';

const perMinute: Policy = { algorithm: 'fixed-window', limit: 10, windowMs: 60_000, blockMs: 0 };
const perHour: Policy = { algorithm: 'fixed-window', limit: 10, windowMs: 3_600_000, blockMs: 0 };

describe('PolicyBindings', () => {
  it('regression: a full table dropped its oldest key for each new one (a long-lived Map churned into GC); now it turns generations, and a key bound among the latest 5 000 still conflicts', () => {
    const b = new PolicyBindings();
    for (let i = 0; i < 100_000; i++) b.bind(`k${i}`, perMinute, 0, 60_000);
    assert.ok(b.size <= 10_000, `size ${b.size}`);
    // The latest keys: still bound, so another policy on them is a configuration error.
    for (const i of [99_999, 97_000, 95_001]) assert.equal(b.check(`k${i}`, perHour, 1)?.code, 'FLOODGATE_CONFLICTING_OPTIONS');
    // Long gone: forgotten, so no longer checked.
    assert.equal(b.check('k0', perHour, 1), undefined);
    // The same policy (or its family) is never a conflict.
    assert.equal(b.check('k99999', perMinute, 1), undefined);
  });

  it('a key used again is extended in place, and its usage lapsing or a zero reset frees it', () => {
    const b = new PolicyBindings();
    b.bind('a', perMinute, 0, 1_000);
    b.bind('a', perMinute, 500, 1_000);
    assert.ok(b.check('a', perHour, 1_400) !== undefined);
    assert.equal(b.check('a', perHour, 1_500), undefined);
    b.bind('a', perMinute, 2_000, 60_000);
    b.bind('a', perMinute, 2_000, 0);
    assert.equal(b.check('a', perHour, 2_001), undefined);
    assert.equal(b.size, 0);
  });

  it('a key bound in the old generation and used again moves to the young one and keeps conflicting', () => {
    const b = new PolicyBindings();
    b.bind('hot', perMinute, 0, 60_000);
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 5_000; i++) b.bind(`r${round}-${i}`, perMinute, 0, 60_000);
      b.bind('hot', perMinute, 0, 60_000);
    }
    assert.equal(b.check('hot', perHour, 1)?.code, 'FLOODGATE_CONFLICTING_OPTIONS');
  });
});
