/** Several enforced rules for one request: each counts in turn, the first refusal answers (later rules are not charged), and an admitted request carries every rule's RateLimit fields. */
import type { HeaderPair } from '../../http/headers.js';
import type { Verdict } from './verdict.js';
import type { Charge } from './rule-cost.js';

/**
 * Runs `enforce` for each rule in order, waiting for each before the next:
 * a rule after a refusing one is never charged, so a client refused by a
 * per-address rule cannot spend the quota of the API key it sends (which
 * may be somebody else's). Units already taken by the earlier rules stay
 * taken: the request was made, and a per-address rule exists to count
 * exactly such attempts.
 *
 * Synchronous as long as every rule answers synchronously.
 */
export function enforceInTurn<R>(rules: readonly R[], enforce: (rule: R) => Verdict | Promise<Verdict>): Verdict | Promise<Verdict> {
  const step = (i: number, fields: readonly HeaderPair[], charges: readonly Charge[]): Verdict | Promise<Verdict> => {
    const decided = enforce(rules[i]!);
    return decided instanceof Promise ? decided.then((verdict) => next(i, fields, charges, verdict)) : next(i, fields, charges, decided);
  };
  const next = (i: number, fields: readonly HeaderPair[], charges: readonly Charge[], verdict: Verdict): Verdict | Promise<Verdict> => {
    // A later refusal leaves the earlier rules' estimates taken (charged as they are), like any units they took.
    if (!verdict.forward) return verdict;
    const merged = mergeFields(fields, verdict.headers);
    const all = verdict.charges === undefined ? charges : [...charges, ...verdict.charges];
    if (i + 1 === rules.length) {
      if (merged === verdict.headers && all === verdict.charges) return verdict;
      return all.length === 0 ? { forward: true, headers: merged } : { forward: true, headers: merged, charges: all };
    }
    return step(i + 1, merged, all);
  };
  return step(0, [], NO_CHARGES);
}

const NO_CHARGES: readonly Charge[] = Object.freeze([]);

/**
 * The RateLimit fields of two rules as one set: Structured Field lists (the
 * IETF `RateLimit` and `RateLimit-Policy`) are joined, so the client sees
 * every policy; a single-policy field (draft-6/7, legacy `X-RateLimit-*`)
 * keeps the earlier rule's value, as one response cannot carry two.
 */
export function mergeFields(earlier: readonly HeaderPair[], later: readonly HeaderPair[]): readonly HeaderPair[] {
  if (earlier.length === 0) return later;
  if (later.length === 0) return earlier;
  const out: HeaderPair[] = [...earlier];
  for (const pair of later) {
    const name = pair[0].toLowerCase();
    const at = out.findIndex((p) => p[0].toLowerCase() === name);
    if (at < 0) out.push(pair);
    else if (pair[2] === true && out[at]![2] === true) out[at] = [out[at]![0], `${out[at]![1]}, ${pair[1]}`, true];
  }
  return out;
}
