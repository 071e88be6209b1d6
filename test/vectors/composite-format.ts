// The shape of the composite vectors (test/vectors/composite.json) and a runner that checks them against any store with consumeAll.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { consumeAll, RateLimiter, type Algorithm, type Decision, type ManualClock, type Store } from '../../src/index.js';

/** One part: index into the case's policies, a key name, and a cost (or amount for a single op). */
export type PartRef = [policy: number, key: string, cost: number];

/** A part's expected numbers: allowed, remaining, resetMs, retryAfterMs ("Infinity" for Infinity); null when not consulted. */
export type PartExpect = [boolean, number, number | 'Infinity', number | 'Infinity'] | null;

/** A composite consume, or a single operation on one part (to build state: a block, a penalty). */
export type CompositeStep =
  | { t: number; parts: PartRef[]; expect: { allowed: boolean; parts: PartExpect[] } }
  | { t: number; op: 'block' | 'penalty' | 'peek'; part: PartRef; expect: PartExpect };

/** A sequence of steps over a set of policies; every key of a case shares one hash tag. */
export interface CompositeCase {
  name: string;
  policies: { algorithm: Algorithm; limit: number; windowMs: number; blockMs: number }[];
  steps: CompositeStep[];
}

/** Loads the composite vectors. */
export function loadCompositeVectors(): { t0: number; cases: CompositeCase[] } {
  return JSON.parse(readFileSync(new URL('./composite.json', import.meta.url), 'utf8'));
}

/** A decision as the vectors write it. */
export function partExpect(d: Decision | undefined): PartExpect {
  if (d === undefined) return null;
  const fmt = (n: number) => (n === Infinity ? 'Infinity' : n);
  return [d.allowed, d.remaining, fmt(d.resetMs), fmt(d.retryAfterMs)];
}

/** The limiters of a case on `store`, with prefixes unique to `run`. */
export function caseLimiters(vc: CompositeCase, store: Store, clock: ManualClock, run: string): RateLimiter[] {
  return vc.policies.map(
    (p, i) =>
      new RateLimiter({
        store,
        clock: clock.now,
        prefix: `${run}:p${i}`,
        algorithm: p.algorithm,
        limit: p.limit,
        window: `${p.windowMs}ms`,
        ...(p.blockMs ? { blockDuration: p.blockMs } : {}),
      }),
  );
}

/** Runs one step; resolves to what the vectors record for it. */
export async function runStep(
  step: CompositeStep,
  limiters: RateLimiter[],
  tag: string,
): Promise<{ allowed: boolean; parts: PartExpect[] } | PartExpect> {
  const key = (name: string) => `${tag}${name}`;
  if ('parts' in step) {
    const d = await consumeAll(step.parts.map(([p, k, cost]) => ({ limiter: limiters[p]!, key: key(k), cost })));
    return { allowed: d.allowed, parts: d.parts.map(partExpect) };
  }
  const [p, k, amount] = step.part;
  const limiter = limiters[p]!;
  if (step.op === 'block') return partExpect(await limiter.block(key(k), amount === -1 ? 'forever' : amount));
  if (step.op === 'penalty') return partExpect(await limiter.penalty(key(k), amount));
  return partExpect(await limiter.peek(key(k)));
}

/** Registers one test per composite case; `store()` is read when the test runs. */
export function compositeVectorTests(store: () => Store, clock: ManualClock, t0: number): void {
  const { cases } = loadCompositeVectors();
  let n = 0;
  for (const vc of cases) {
    test(`composite: ${vc.name}`, async () => {
      const run = `cv${++n}:${process.pid}:${Date.now()}`;
      const limiters = caseLimiters(vc, store(), clock, run);
      for (const [i, step] of vc.steps.entries()) {
        clock.set(t0 + step.t);
        const got = await runStep(step, limiters, `{${run}}`);
        assert.deepEqual(got, step.expect, `step ${i} (t=${step.t})`);
      }
    });
  }
}
