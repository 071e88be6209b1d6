/** Several enforced rules for one request. */
/**
 * Each counts in turn, the first refusal answers (later rules are not charged, earlier rules' slots are freed), and an
 * admitted request carries every rule's RateLimit fields.
 */
import type { HeaderPair } from '../../http/index.js';
import type { Verdict } from './verdict.js';
import type { Charge } from './rule-cost.js';
import type { Hold } from './rule-slots.js';

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
export function enforceInTurn<R>(
  rules: readonly R[],
  enforce: (rule: R) => Verdict | Promise<Verdict>,
  abandon: (held: readonly Hold[]) => void,
): Verdict | Promise<Verdict> {
  const step = (
    i: number,
    fields: readonly HeaderPair[],
    charges: readonly Charge[],
    holds: readonly Hold[],
  ): Verdict | Promise<Verdict> => {
    const decided = enforce(rules[i]!);
    return decided instanceof Promise
      ? decided.then((verdict) => next(i, fields, charges, holds, verdict))
      : next(i, fields, charges, holds, decided);
  };
  const next = (
    i: number,
    fields: readonly HeaderPair[],
    charges: readonly Charge[],
    holds: readonly Hold[],
    verdict: Verdict,
  ): Verdict | Promise<Verdict> => {
    // A later refusal leaves the earlier rules' estimates taken (charged as they are), like any units they took;
    // their slots go back at once, since no response will run under them.
    if (!verdict.forward) {
      if (charges.length > 0) abandon(charges);
      if (holds.length > 0) abandon(holds);
      return verdict;
    }
    const merged = mergeFields(fields, verdict.headers);
    const allCharges = verdict.charges === undefined ? charges : [...charges, ...verdict.charges];
    const allHolds = verdict.holds === undefined ? holds : [...holds, ...verdict.holds];
    if (i + 1 === rules.length) {
      if (merged === verdict.headers && allCharges === verdict.charges && allHolds === verdict.holds) return verdict;
      return {
        forward: true,
        headers: merged,
        ...(allCharges.length === 0 ? {} : { charges: allCharges }),
        ...(allHolds.length === 0 ? {} : { holds: allHolds }),
      };
    }
    return step(i + 1, merged, allCharges, allHolds);
  };
  return step(0, [], NO_CHARGES, NO_HOLDS);
}

const NO_CHARGES: readonly Charge[] = Object.freeze([]);
const NO_HOLDS: readonly Hold[] = Object.freeze([]);

/**
 * The RateLimit fields of two rules as one set: Structured Field lists (the
 * IETF `RateLimit` and `RateLimit-Policy`) are joined, so the client sees
 * every policy; a single-policy field (draft-6/7, legacy `X-RateLimit-*`)
 * keeps the earlier rule's value, as one response cannot carry two.
 */
function mergeFields(earlier: readonly HeaderPair[], later: readonly HeaderPair[]): readonly HeaderPair[] {
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
