// A limiter's waiting (LimiterWaiting) around a plain RateLimiter on a memory store, on the clock and timers of the test's ManualTimers.
import { MemoryStore, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { parseWait } from '../../src/limiter/options.js';
import { LimiterWaiting } from '../../src/limiter/waiting.js';
import type { ManualTimers } from './manual-timers.js';

/**
 * A RateLimiter without waiting (`plain`, under `prefix`) on a memory store, wrapped in LimiterWaiting (`w`) with the wait and
 * pacing of `options`; the store, both and the waits all run on `timers`.
 */
export function waitingOnTimers(
  timers: ManualTimers,
  options: Omit<RateLimiterOptions, 'store' | 'clock' | 'prefix'>,
  prefix: string,
): { w: LimiterWaiting; plain: RateLimiter } {
  const { wait, execEvenly, ...policy } = options;
  const store = new MemoryStore({ clock: timers.clock.now, sweepIntervalMs: 0 });
  const plain = new RateLimiter({ ...policy, store, clock: timers.clock.now, prefix });
  const w = new LimiterWaiting({
    wait: parseWait(wait),
    execEvenly: execEvenly ?? false,
    policy: plain.policy,
    policyFor: (key) => plain.policyFor(key),
    store,
    prefix: plain.prefix,
    clock: timers.clock.now,
    consume: (key, cost) => plain.consume(key, cost),
    consumeNow: (key, cost) => plain.consumeNow(key, cost),
    giveBack: (key, cost) => void plain.reward(key, cost),
    schedule: timers.schedule,
  });
  return { w, plain };
}
