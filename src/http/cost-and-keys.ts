/** A request's cost and each policy's key: the route's key, or a policy's own key function's answer, checked as the route key's is. */
import { boundKey } from './client-keys.js';
import { checkedKey, isThenable, type Keys } from './limiter-parts.js';
import type { HttpSettings, NamedPolicy } from './options.js';
import type { ClientInfo, HttpOutcome, RequestView } from './types.js';

type Next = (cost: number, keys: Keys) => HttpOutcome | Promise<HttpOutcome>;

/**
 * Works out the request's cost (the `cost` option, a number or a function)
 * and each policy's key, then calls `next`: at once when no callback answers
 * with a promise, as most do (every await is a microtask turn per request).
 * Policies without a key of their own get the route's `key` as one string.
 * @param client - the ClientInfo, built on first use
 */
export function costAndKeys<Raw>(
  settings: HttpSettings<Raw>,
  view: RequestView<Raw>,
  client: () => ClientInfo,
  key: string,
  policies: readonly NamedPolicy[],
  next: Next,
): HttpOutcome | Promise<HttpOutcome> {
  const keyed = (cost: number): HttpOutcome | Promise<HttpOutcome> => {
    if (!ownKeys(policies)) return next(cost, key);
    const keys = policyKeys(policies, key, view.raw, client(), settings.maxKeyLength);
    return isThenable(keys) ? Promise.resolve(keys).then((all) => next(cost, all)) : next(cost, keys);
  };
  if (typeof settings.cost === 'number') return keyed(settings.cost);
  const returned = settings.cost(view.raw, client());
  return isThenable(returned) ? Promise.resolve(returned).then(keyed) : keyed(returned);
}

/** True when a policy has a key of its own (else every policy counts by the route's key, the common case, with no array made). */
export function ownKeys(policies: readonly NamedPolicy[]): boolean {
  for (const p of policies) if (p.key !== undefined) return true;
  return false;
}

/**
 * Each policy's key: the route's `key`, or the policy's own key function's
 * answer, checked and bounded as the route key function's is.
 * @throws FloodgateError INVALID_KEY for an answer that is not a non-empty string
 */
export function policyKeys(
  policies: readonly NamedPolicy[],
  key: string,
  raw: unknown,
  client: ClientInfo,
  maxKeyLength: number,
): string[] | Promise<string[]> {
  const answers = policies.map((p) => (p.key === undefined ? key : p.key(raw, client)));
  const keysOf = (values: readonly unknown[]): string[] =>
    values.map((v, i) => (policies[i]!.key === undefined ? key : boundKey(checkedKey(v), maxKeyLength)));
  return answers.some((a) => isThenable(a)) ? Promise.all(answers).then(keysOf) : keysOf(answers);
}
