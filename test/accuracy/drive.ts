// Drives a RateLimiter on a MemoryStore with a ManualClock through generated traffic: no sleeping, one key, every decision recorded.
import { ManualClock, MemoryStore, RateLimiter, type Algorithm, type Decision } from '../../src/index.js';
import type { Admission } from './reference.js';
import type { Request } from './traffic.js';

/** The limit and window of a run. */
export interface RunPolicy {
  limit: number;
  windowMs: number;
}

/** One request and what the limiter answered. */
export interface Answered extends Request {
  allowed: boolean;
  retryAfterMs: number;
}

/** Everything a run produced, with times relative to its start. */
export interface Run {
  answers: Answered[];
  /** The admitted requests only, in order. */
  admitted: Admission[];
}

/**
 * The absolute time of t = 0: a multiple of the window near 2023-11-15, so
 * the sliding window's epoch-aligned windows start exactly at 0, W, 2W, …
 */
export function startOf(windowMs: number): number {
  return windowMs * Math.ceil(1_700_000_000_000 / windowMs);
}

/**
 * Runs `requests` through a fresh limiter, one consume each, on one key.
 * `observe` sees every answer as it comes, with the absolute time, so a test
 * can compare it with a reference before the next request.
 */
export async function drive(
  algorithm: Algorithm,
  requests: readonly Request[],
  policy: RunPolicy,
  observe?: (answer: Answered, decision: Decision) => void,
): Promise<Run> {
  const t0 = startOf(policy.windowMs);
  const clock = new ManualClock(t0);
  // No sweep timer: it would only drop expired keys, and must not keep the process alive.
  const store = new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const limiter = new RateLimiter({ algorithm, limit: policy.limit, window: policy.windowMs, store, clock: clock.now });
  const answers: Answered[] = [];
  const admitted: Admission[] = [];
  for (const r of requests) {
    clock.set(t0 + r.t);
    const d = await limiter.consume('k', r.cost);
    const answer: Answered = { t: r.t, cost: r.cost, allowed: d.allowed, retryAfterMs: d.retryAfterMs };
    answers.push(answer);
    if (d.allowed) admitted.push({ t: r.t, cost: r.cost });
    observe?.(answer, d);
  }
  await store.close();
  return { answers, admitted };
}
