/** Units the HTTP middleware rewards. */
/**
 * Policies that admitted a request another policy refused, and calls that answered after its timeout.
 */
import type { CompositeDecision } from '../limiter/composite.js';
import type { Decision } from '../core/decision.js';
import { keyAt } from './policy-keys.js';
import type { Counted } from './request-context.js';
import type { NamedPolicy } from './settings.js';

/** Rewards `cost` units of `key` to one policy; resolves to its state after, or undefined when that failed (the caller reports it). */
export type Rewarder = (policy: NamedPolicy, key: string, cost: number) => Promise<Decision | undefined>;

/**
 * Rewards what admitting policies took when another refused (policies on
 * different stores, consumed one by one), replacing their decisions with the
 * state after for the headers.
 */
export async function rewardAdmitting(counted: Counted, decisions: Array<Decision | undefined>, reward: Rewarder): Promise<void> {
  const { policies, key, keys, cost } = counted;
  await Promise.all(
    decisions.map(async (d, i) => {
      // A fail-open decision spent nothing; a refused one spent nothing either.
      if (d === undefined || !d.allowed || d.source === 'fail-open') return;
      const after = await reward(policies[i]!, keyAt(key, keys, i), cost);
      // Still reported as admitting: it was not this policy that refused.
      if (after !== undefined) decisions[i] = { ...after, allowed: true, retryAfterMs: 0 };
    }),
  );
}

/**
 * A consume that outlived the middleware's timeout may still be admitted
 * later; the request was not served under it, so reward those units
 * when (if) it answers. Not awaited: the response does not wait for it.
 */
export function rewardLate(
  counted: Counted,
  calls: ReadonlyArray<Promise<Decision>>,
  results: ReadonlyArray<PromiseSettledResult<Decision>>,
  timedOut: (error: unknown) => boolean,
  reward: Rewarder,
): void {
  const { policies, key, keys, cost } = counted;
  results.forEach((result, i) => {
    if (result.status !== 'rejected' || !timedOut(result.reason)) return;
    calls[i]!.then(
      (late) => (!late.allowed || late.source === 'fail-open' ? undefined : reward(policies[i]!, keyAt(key, keys, i), cost)),
      () => undefined, // already reported as a timeout
    );
  });
}

/** {@link rewardLate} for a composite: admitted after the timeout, every part that spent has its units rewarded. */
export function rewardLateComposite(counted: Counted, call: Promise<CompositeDecision>, reward: Rewarder): void {
  const { policies, key, keys, cost } = counted;
  call.then(
    (late) => {
      if (!late.allowed) return;
      late.parts.forEach((part, i) => {
        if (part !== undefined && part.source !== 'fail-open') void reward(policies[i]!, keyAt(key, keys, i), cost);
      });
    },
    () => undefined, // already reported as a timeout
  );
}
