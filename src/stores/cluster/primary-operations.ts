/** The primary's reading of one batch operation and its lease step. */
/**
 * The reading's checks keep a malformed message from touching a counter.
 */
import type { OperationKind, Outcome, Policy } from '../../core/policy.js';
import type { MemoryStore } from '../memory.js';
import { validAmount } from './batch-reply.js';
import { COMPOSITE_CODE, KIND_BY_CODE, LEASE_CODE, LEASE_SHARE } from './protocol.js';
import type { ResolvedPolicy } from './primary-types.js';

/** One operation of a batch, checked. */
export interface BatchOperation {
  readonly kind: OperationKind;
  /** A lease call (LEASE_CODE): a fixed-window consume that may take units beyond its need. */
  readonly leasing: boolean;
  /** A part of a composite (COMPOSITE_CODE): a consume decided with the other parts. */
  readonly part: boolean;
  readonly resolved: ResolvedPolicy;
  readonly key: string;
  readonly amount: number;
}

/** The operation at `j` of a batch's operation list, or undefined when it is malformed. */
export function readOperation(
  o: readonly unknown[],
  j: number,
  policies: readonly (ResolvedPolicy | undefined)[],
): BatchOperation | undefined {
  const code = o[j];
  const policyIndex = o[j + 1];
  const leasing = code === LEASE_CODE;
  const part = code === COMPOSITE_CODE;
  // typeof checks first: an index like "length" must not reach the arrays.
  const kind = leasing || part ? 'consume' : typeof code === 'number' ? KIND_BY_CODE[code] : undefined;
  const resolved = typeof policyIndex === 'number' ? policies[policyIndex] : undefined;
  const key = o[j + 2];
  const amount = o[j + 3];
  if (
    kind === undefined ||
    resolved === undefined ||
    typeof key !== 'string' ||
    key.length === 0 ||
    !validAmount(leasing ? 'lease' : kind, amount) ||
    (leasing && resolved.policy.algorithm !== 'fixed-window')
  ) {
    return undefined;
  }
  return { kind, leasing, part, resolved, key, amount: amount as number };
}

/**
 * A lease: a consume of `need` units plus up to `want − need` more, at most
 * LEASE_SHARE of what remains beyond the need, in one synchronous step.
 * When `need` does not fit, the outcome is the refused consume of `need`,
 * exactly as a plain consume (which blocks the key under `blockMs`). With
 * `need` 0 (a top-up, or the surplus of a composite part that just spent its
 * need) the outcome is that of what it took, or a peek when it took nothing.
 */
export function grantLease(
  store: MemoryStore,
  key: string,
  policy: Policy,
  need: number,
  want: number,
  now: number,
): { outcome: Outcome; granted: number } {
  let take = need;
  let peek: Outcome | undefined;
  // With a block duration, a refusal caused by units parked in another worker would block the key: no surplus.
  if (want > need && policy.blockMs === 0) {
    peek = store.applySync({ kind: 'peek', key, amount: 0, policy }, now);
    const available = peek.allowed ? peek.remaining : 0;
    if (available >= need) take = Math.min(want, Math.max(need, Math.floor(available * LEASE_SHARE)), available);
  }
  // Nothing to take (a top-up finding no surplus): the state as it stands, read once.
  if (take === 0) return { outcome: peek ?? store.applySync({ kind: 'peek', key, amount: 0, policy }, now), granted: 0 };
  const outcome = store.applySync({ kind: 'consume', key, amount: take, policy }, now);
  return { outcome, granted: outcome.allowed ? take : 0 };
}
