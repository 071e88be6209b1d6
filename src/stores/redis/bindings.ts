/** Which policy last used each Redis key from this process. */
/**
 * So two limiters whose prefixes collide fail loudly instead of sharing a counter.
 */
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { BoundedMap } from '../../util/bounded-map.js';
import { sameFamily, type Policy } from '../../core/policy.js';
import { describePolicy } from '../cluster/protocol.js';

/** Keys whose policy is remembered; past this the least recently used is forgotten (and no longer checked). */
const MAX_BINDINGS = 10_000;
/** Distinct conflicts warned about, so a persistent misconfiguration does not flood the log. */
const WARNED_CONFLICTS = 100;

interface Binding {
  policy: Policy;
  /** Until when (on the caller's time base) the key's usage under `policy` matters. */
  until: number;
}

/**
 * Per store key, the policy of the last operation and until when its usage
 * matters (the outcome's `resetMs`), as the cluster store's primary keeps
 * them. An operation on the same key under another policy while that usage
 * matters is a configuration error: two limiters given the same `prefix`, or
 * prefixes that collide such as `"a"` + `"b:c"` and `"a:b"` + `"c"`. The
 * check is per key, so limiters that merely look alike never conflict.
 */
export class PolicyBindings {
  private readonly bindings = new BoundedMap<string, Binding>(MAX_BINDINGS);
  private readonly warned = new Set<string>();

  /** Keys remembered. */
  get size(): number {
    return this.bindings.size;
  }

  /**
   * The CONFLICTING_OPTIONS error for `policy` on `key` at time `now`, or
   * undefined when the key is free or bound to the same policy (or one of
   * its family: a per-key override may change a key's policy). Emits one
   * process warning per distinct pair of policies.
   */
  check(key: string, policy: Policy, now: number): FloodgateError | undefined {
    const bound = this.bindings.get(key);
    if (bound === undefined || bound.until <= now || sameFamily(bound.policy, policy)) return undefined;
    return conflictError(key, bound.policy, policy, this.warned);
  }

  /** Records that `policy` used `key` at `now`, with usage that matters for `resetMs` more. */
  bind(key: string, policy: Policy, now: number, resetMs: number): void {
    const bound = this.bindings.get(key);
    if (!(resetMs > 0)) {
      if (bound !== undefined) this.bindings.delete(key);
      return;
    }
    // The same policy again (every later call of a key): extended in place. The table keeps the order
    // keys were first bound in rather than of last use, which spares a delete and a set per call; a busy
    // key that ages out is bound again by its next call.
    if (bound !== undefined && bound.policy === policy) {
      bound.until = now + resetMs;
      return;
    }
    if (bound !== undefined) this.bindings.delete(key);
    this.bindings.set(key, { policy, until: now + resetMs });
  }
}

/**
 * The CONFLICTING_OPTIONS error for `incoming` on `key`, which `bound` still
 * uses; emits one process warning per distinct pair of policies (the pairs
 * warned about are kept in `warned`, at most 100).
 */
export function conflictError(key: string, bound: Policy, incoming: Policy, warned: Set<string>): FloodgateError {
  const text =
    `Two limiters use the store key ${JSON.stringify(key)} with different options (${describePolicy(bound)} and ${describePolicy(incoming)}). ` +
    'Limiters that share a prefix share counters, so they must have the same options: give each limiter its own prefix.';
  const pair = `${describePolicy(bound)} / ${describePolicy(incoming)}`;
  if (!warned.has(pair) && warned.size < WARNED_CONFLICTS) {
    warned.add(pair);
    process.emitWarning(text, { code: ErrorCode.CONFLICTING_OPTIONS });
  }
  return new FloodgateError(ErrorCode.CONFLICTING_OPTIONS, text);
}
