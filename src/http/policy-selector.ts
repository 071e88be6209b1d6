/** Per-request policies. */
/**
 * A `limiter` option that is a function of the request, its answers checked once each and remembered.
 */
import { isThenable } from './limiter-parts.js';
import type { NamedPolicy, SelectPolicies } from './settings.js';
import type { LimiterSelector } from './types.js';

/**
 * Wraps the user's selector so each distinct answer (a limiter, a
 * `{ limiter, name }` entry or an array of them) is checked by `parse` once
 * and its policies reused: a selector that returns one of a few limiters
 * built up front costs a WeakMap lookup per request. An answer that is not
 * an object is handed to `parse`, which throws the option's error for it.
 */
export function policySelector<Raw>(select: LimiterSelector<Raw>, parse: (value: unknown) => NamedPolicy[]): SelectPolicies<Raw> {
  const parsed = new WeakMap<object, readonly NamedPolicy[]>();
  const policiesOf = (value: unknown): readonly NamedPolicy[] => {
    if (typeof value !== 'object' || value === null) return parse(value);
    let policies = parsed.get(value);
    if (policies === undefined) {
      policies = parse(value);
      parsed.set(value, policies);
    }
    return policies;
  };
  return (raw, client) => {
    const answer = select(raw, client);
    return isThenable(answer) ? Promise.resolve(answer).then(policiesOf) : policiesOf(answer);
  };
}
