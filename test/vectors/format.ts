// The shape of the shared JSON vectors (test/vectors/algorithms.json) and a runner that checks them against any store.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ManualClock, RateLimiter, type Algorithm, type CalendarWindow, type Clock, type Decision } from '../../src/index.js';
import type { ConformanceTarget } from '../conformance/suite.js';
import { compositeVectorTests } from './composite-format.js';

/** What the vectors need of a conformance target: the store and its teardown. */
type VectorTarget = Pick<ConformanceTarget, 'store' | 'teardown'>;

/** Absolute time of t = 0 in every case: a whole day, so epoch-aligned windows are predictable. */
export const T0 = 1_700_006_400_000;

/** Expected numbers of a Decision; "Infinity" stands for Infinity (JSON has none). */
export interface Expectation {
  allowed: boolean;
  remaining: number;
  resetMs: number | 'Infinity';
  retryAfterMs: number | 'Infinity';
}

/** One call at time T0 + t. `amount` is the cost, points, or block ms (-1 = forever). */
export interface VectorStep {
  t: number;
  op: 'consume' | 'peek' | 'reward' | 'penalty' | 'block' | 'reset';
  amount?: number;
  /** null for reset, which resolves to nothing. */
  expect: Expectation | null;
}

/** A sequence of calls on one key under one policy. */
export interface VectorCase {
  name: string;
  /** Absolute time of t = 0 when not the file's: calendar cases sit at a month end, a leap day, a DST change. */
  t0?: number;
  /** For a calendar window, `windowMs` is the longest period (what the limiter derives); the windows follow this. */
  /** `burst` and `initialTokens` (token bucket only) are present when set apart from their defaults (limit, burst). */
  policy: { algorithm: Algorithm; limit: number; windowMs: number; blockMs: number; burst?: number; initialTokens?: number };
  /** A calendar window: the period in its time zone (weekStart 0 = Sunday … 6, for weeks). */
  calendar?: { unit: CalendarWindow['calendar']; timeZone: string; weekStart?: number };
  steps: VectorStep[];
}

/** Loads the vectors file. */
export function loadVectors(): { t0: number; cases: VectorCase[] } {
  return JSON.parse(readFileSync(new URL('./algorithms.json', import.meta.url), 'utf8'));
}

async function call(limiter: RateLimiter, key: string, step: VectorStep): Promise<Decision | undefined> {
  switch (step.op) {
    case 'consume':
      return limiter.consume(key, step.amount ?? 1);
    case 'peek':
      return limiter.peek(key);
    case 'reward':
      return limiter.reward(key, step.amount ?? 1);
    case 'penalty':
      return limiter.penalty(key, step.amount ?? 1);
    case 'block':
      return limiter.block(key, step.amount === -1 ? 'forever' : step.amount!);
    case 'reset':
      await limiter.reset(key);
      return undefined;
  }
}

/** Registers one test per vector case against the store the factory builds (a conformance factory will do: vectors need no failureScope). */
export function runVectors(label: string, factory: (clock: Clock) => Promise<VectorTarget>): void {
  describe(`vectors: ${label}`, () => {
    const { t0, cases } = loadVectors();
    const clock = new ManualClock(t0);
    let target: VectorTarget;
    before(async () => {
      target = await factory(clock.now);
    });
    after(() => target.teardown());
    compositeVectorTests(() => target.store, clock, t0);
    let n = 0;
    for (const vc of cases) {
      test(vc.name, async () => {
        const limiter = new RateLimiter({
          store: target.store,
          clock: clock.now,
          prefix: `vec${++n}:${process.pid}:${Date.now()}`,
          algorithm: vc.policy.algorithm,
          limit: vc.policy.limit,
          window: vc.calendar
            ? { calendar: vc.calendar.unit, timeZone: vc.calendar.timeZone, weekStart: vc.calendar.weekStart }
            : vc.policy.windowMs,
          ...(vc.policy.blockMs ? { blockDuration: vc.policy.blockMs } : {}),
          ...(vc.policy.burst === undefined ? {} : { burst: vc.policy.burst }),
          ...(vc.policy.initialTokens === undefined ? {} : { initialTokens: vc.policy.initialTokens }),
        });
        for (const [i, step] of vc.steps.entries()) {
          clock.set((vc.t0 ?? t0) + step.t);
          const d = await call(limiter, 'v', step);
          const got = d && {
            allowed: d.allowed,
            remaining: d.remaining,
            resetMs: d.resetMs === Infinity ? 'Infinity' : d.resetMs,
            retryAfterMs: d.retryAfterMs === Infinity ? 'Infinity' : d.retryAfterMs,
          };
          assert.deepEqual(
            got ?? null,
            step.expect,
            `step ${i} (t=${step.t} ${step.op}${step.amount === undefined ? '' : ` ${step.amount}`})`,
          );
        }
      });
    }
  });
}
