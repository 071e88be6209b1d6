/** The policies a ClusterStorePrimary meets. */
/**
 * Decoded from the wire once per distinct tuple, and the conflicts between two of them on one key, each warned about
 * once.
 */
import { ErrorCode } from '../../core/errors.js';
import type { Policy } from '../../core/policy.js';
import { decodePolicy, describePolicy, familyOf, POLICY_TUPLE_LENGTHS } from './protocol.js';
import type { ResolvedPolicy } from './primary-types.js';

/** Distinct policies remembered; more than this many limiters is a leak, and the cache just restarts. */
const POLICY_CACHE_SIZE = 1024;
/** Distinct conflicts warned about, so a persistent misconfiguration does not flood the log. */
const WARNED_CONFLICTS = 100;

/** The decoded policies and warned conflicts of one primary. */
export class PrimaryPolicies {
  private readonly policies = new Map<string, ResolvedPolicy>();
  private readonly warned = new Set<string>();

  /** The policy of a wire tuple, decoded once per distinct tuple; undefined for a malformed one. */
  resolve(tuple: unknown): ResolvedPolicy | undefined {
    if (!Array.isArray(tuple) || !POLICY_TUPLE_LENGTHS.includes(tuple.length)) return undefined;
    const fp = tuple.join(',');
    let resolved = this.policies.get(fp);
    if (resolved === undefined) {
      const policy = decodePolicy(tuple);
      if (policy === undefined) return undefined;
      if (this.policies.size >= POLICY_CACHE_SIZE) this.policies.clear();
      resolved = { policy, fp, family: familyOf(tuple) };
      this.policies.set(fp, resolved);
    }
    return resolved;
  }

  /** The message of a key used under two policies; the first time a pair is seen, also a process warning. */
  conflict(key: string, bound: Policy, incoming: Policy): string {
    const text =
      `Two limiters use the store key ${JSON.stringify(key)} with different options (${describePolicy(bound)} and ${describePolicy(incoming)}). ` +
      'Limiters that share a prefix share counters, so they must have the same options: give each limiter its own prefix.';
    const pair = `${describePolicy(bound)} / ${describePolicy(incoming)}`;
    if (!this.warned.has(pair) && this.warned.size < WARNED_CONFLICTS) {
      this.warned.add(pair);
      process.emitWarning(text, { code: ErrorCode.CONFLICTING_OPTIONS });
    }
    return text;
  }
}
