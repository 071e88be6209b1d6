/** Which policy last used each key of a shared store (Redis, PostgreSQL) from this process. */
/**
 * So two limiters whose prefixes collide fail loudly instead of sharing a counter.
 */
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { sameFamily, type Policy } from '../core/policy.js';
import { describePolicy } from './cluster/protocol.js';

/**
 * Keys whose policy is remembered, about: two generations of half this many keys each; a key bound in neither is
 * forgotten (and no longer checked).
 */
const MAX_BINDINGS = 10_000;
const GENERATION = MAX_BINDINGS / 2;
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
  /**
   * Keys bound lately, and those of the generation before. A full young
   * generation becomes the old one and a new Map starts: nothing is ever
   * deleted one key at a time. A table at its bound that dropped its oldest
   * key for each new one (a composite over 50 000 users) left V8 rehashing a
   * long-lived Map full of holes, and young objects surviving collections
   * through it: a fifth of the process's CPU went to the garbage collector.
   */
  private young = new Map<string, Binding>();
  private old = new Map<string, Binding>();
  private readonly warned = new Set<string>();

  /** Keys remembered (a key in both generations counts twice; at most {@link MAX_BINDINGS}). */
  get size(): number {
    return this.young.size + this.old.size;
  }

  /**
   * The CONFLICTING_OPTIONS error for `policy` on `key` at time `now`, or
   * undefined when the key is free or bound to the same policy (or one of
   * its family: a per-key override may change a key's policy). Emits one
   * process warning per distinct pair of policies.
   */
  check(key: string, policy: Policy, now: number): FloodgateError | undefined {
    const bound = this.young.get(key) ?? this.old.get(key);
    if (bound === undefined || bound.until <= now || sameFamily(bound.policy, policy)) return undefined;
    return conflictError(key, bound.policy, policy, this.warned);
  }

  /** Records that `policy` used `key` at `now`, with usage that matters for `resetMs` more. */
  bind(key: string, policy: Policy, now: number, resetMs: number): void {
    if (!(resetMs > 0)) {
      // No usage left to protect: whatever either generation holds for the key no longer matters.
      this.young.delete(key);
      this.old.delete(key);
      return;
    }
    const bound = this.young.get(key);
    // The same policy again (every later call of a key): extended in place.
    if (bound !== undefined && bound.policy === policy) {
      bound.until = now + resetMs;
      return;
    }
    if (bound === undefined && this.young.size >= GENERATION) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, { policy, until: now + resetMs });
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
