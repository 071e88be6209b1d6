/** A route's several policies decided as one composite. */
/**
 * Whether they can be (one store), and their reports for the headers.
 */
import type { CompositeDecision } from '../limiter/composite.js';
import { WarningCode, warnOnce } from '../core/warnings.js';
import type { PolicyReport } from './headers.js';
import { toReport } from './limiter-parts.js';
import type { NamedPolicy, PolicyKeys } from './settings.js';

/** Routes already checked, by their policy list: the check runs once per list, not per request. */
const checked = new WeakMap<readonly NamedPolicy[], boolean>();

/**
 * True when every policy's limiter uses one store that decides composites,
 * so the policies are decided all or nothing in one step. Policies on
 * different stores cannot be: they are consumed one by one and rewarded when
 * one refuses, and a one-time warning says how to make them atomic.
 */
export function decidableTogether(policies: readonly NamedPolicy[]): boolean {
  const known = checked.get(policies);
  if (known !== undefined) return known;
  const store = policies[0]!.limiter.store;
  let together = store.consumeAll !== undefined;
  for (const p of policies) if (p.limiter.store !== store) together = false;
  if (!together) {
    const names = policies.map((p) => JSON.stringify(p.name)).join(', ');
    warnOnce(
      WarningCode.POLICIES_NOT_ATOMIC,
      `policies ${names} of one route are on ${store.consumeAll === undefined ? 'a store without consumeAll' : 'different stores'}, so they cannot be decided all or nothing: each is consumed and given back when another refuses, and a request may be refused on units another request held for a moment. Put the route's limiters on one store (the same MemoryStore, RedisStore, …) to decide them in one atomic step.`,
      names,
    );
  }
  checked.set(policies, together);
  return together;
}

/** The reports of a composite's parts, leaving out parts not consulted (another part's in-memory block refused first). */
export function compositeReports(policies: readonly NamedPolicy[], d: CompositeDecision, keys: PolicyKeys | undefined): PolicyReport[] {
  const reports: PolicyReport[] = [];
  for (let i = 0; i < policies.length; i++) {
    const part = d.parts[i];
    if (part !== undefined) reports.push(toReport(policies[i]!, part, keys?.[i]));
  }
  return reports;
}
