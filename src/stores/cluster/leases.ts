/** Leases: the worker-side slices of fixed-window quota that a ClusterStore took from its primary. */
/**
 * The worker spends them without IPC.
 */
import { BoundedMap } from '../../util/bounded-map.js';
import { samePolicy, type Operation, type Outcome, type Policy } from '../../core/policy.js';
import {
  firstDemand,
  keepSurplus,
  leaseAdmitted,
  settleInLease,
  spendDeadline,
  wantedSlice,
  wantsTopUp,
  type LeaseState,
} from '../lease-core.js';

/** One key's lease. Times are `performance.now()` of this process (the caller's `now`); `windowEnd` is on the primary's clock. */
export interface Lease extends LeaseState {
  readonly policy: Policy;
  /** Lease calls in flight; while one is, others ask only for what they need. */
  inFlight: number;
}

/** The grant of one lease call: units taken, and the primary's window end they belong to. */
export interface Grant {
  readonly granted: number;
  readonly windowEnd: number;
}

/**
 * The leases of one transport's stores, keyed by full store key. Bounded:
 * past `maxKeys` the oldest lease is dropped (its units stay counted at the
 * primary until the window ends, so dropping one never admits more).
 */
export class Leases {
  private readonly entries: BoundedMap<string, Lease>;
  /** performance.now() of the last consume answered from a lease. */
  lastSpendAt = -Infinity;

  /** @param maxKeys - the most keys leased at once; past it the least recently leased is dropped */
  constructor(maxKeys: number) {
    this.entries = new BoundedMap(maxKeys);
  }

  /** Keys held. */
  get size(): number {
    return this.entries.size;
  }

  /** Units held for `key` and not spent (the primary counts them as consumed already). */
  unitsOf(key: string): number {
    return this.entries.get(key)?.units ?? 0;
  }

  /**
   * Spends `operation.amount` from the key's lease when it covers the call:
   * the admitted outcome, or undefined (nothing spent) when the primary must
   * be asked. Counts what it spends as demand; ask() counts the rest.
   */
  spend(operation: Operation): Outcome | undefined {
    // The clock is read only past the first checks: under load most calls find no units (a refused key).
    const e = this.holding(operation);
    if (e === undefined) return undefined;
    const now = performance.now();
    return now >= e.spendUntil ? undefined : this.take(e, operation.amount, now);
  }

  /**
   * What the key's lease holds, as a peek would report it, when it covers
   * `operation` at `now`; undefined (the primary must be asked) otherwise.
   * Spends nothing.
   */
  covered(operation: Operation, now: number): Outcome | undefined {
    const e = this.holding(operation);
    return e === undefined || now >= e.spendUntil ? undefined : leaseAdmitted(e, now);
  }

  /**
   * Spends every operation's amount from its key's lease when every lease
   * covers its operation at `now`: the admitted outcomes, in order; otherwise
   * undefined, and nothing is spent.
   */
  spendAll(operations: readonly Operation[], now: number): Outcome[] | undefined {
    const held: Lease[] = [];
    for (const operation of operations) {
      const e = this.holding(operation);
      if (e === undefined || now >= e.spendUntil) return undefined;
      held.push(e);
    }
    return held.map((e, i) => this.take(e, operations[i]!.amount, now));
  }

  /**
   * A reservation's give-back (reward) or excess (penalty) settled in the
   * key's lease at `now` (see settleInLease): undefined, with nothing
   * changed, when the primary must take it (no lease under this policy, one
   * past its deadline, an excess it does not cover).
   */
  settleHere(operation: Operation, now: number): Outcome | undefined {
    const { kind } = operation;
    const e = this.entries.get(operation.key);
    if ((kind !== 'reward' && kind !== 'penalty') || e === undefined || !samePolicy(e.policy, operation.policy)) return undefined;
    const outcome = settleInLease(e, kind, operation.amount, now);
    // Used here, so the store keeps listening for the lease's revocation rather than dropping it idle.
    if (outcome !== undefined) this.lastSpendAt = now;
    return outcome;
  }

  /** The key's lease when it holds enough units under the operation's policy. */
  private holding(operation: Operation): Lease | undefined {
    // Entries are made by ask() only, so keys that never lease take no room here.
    const e = this.entries.get(operation.key);
    return e === undefined || e.units < operation.amount || !samePolicy(e.policy, operation.policy) ? undefined : e;
  }

  private take(e: Lease, amount: number, now: number): Outcome {
    this.lastSpendAt = now;
    e.demand += amount;
    e.units -= amount;
    return leaseAdmitted(e, now);
  }

  /**
   * How many units a lease call for this consume should ask for, and marks
   * the call in flight. The entry it returns is the one the grant may go to.
   */
  ask(operation: Operation, now: number, horizonMs: number): { entry: Lease; want: number } {
    const lease = this.entry(operation, now, horizonMs);
    const need = operation.amount;
    lease.demand += need;
    const want = lease.inFlight > 0 ? need : wantedSlice(lease, need, 0, now, horizonMs);
    lease.demand = 0;
    lease.since = now;
    lease.inFlight++;
    return { entry: lease, want };
  }

  /**
   * When a hot key's lease runs low (half of the last grant spent) and no
   * call is in flight: the size of a top-up to ask for now, so consumes keep
   * being answered here; marks it in flight. Undefined otherwise.
   */
  topUp(key: string, now: number, horizonMs: number): { entry: Lease; want: number } | undefined {
    const lease = this.entries.get(key);
    if (lease === undefined || lease.inFlight > 0 || !wantsTopUp(lease, now, 1, 0)) return undefined;
    const want = wantedSlice(lease, 0, 0, now, horizonMs);
    if (want <= 0) return undefined;
    lease.demand = 0;
    lease.since = now;
    lease.inFlight++;
    return { entry: lease, want };
  }

  /**
   * The primary answered a lease call for `need` units. Keeps the surplus of
   * a grant (when `lease` is still this key's lease: not revoked, not
   * dropped) and returns the outcome the caller gets: `remaining` counts the
   * units held here too.
   */
  absorbReply(key: string, lease: Lease, need: number, outcome: Outcome, grant: Grant | undefined, sentAt: number, now: number): Outcome {
    if (this.entries.get(key) !== lease) return outcome;
    if (grant === undefined || !outcome.allowed) {
      if (need === 0) lease.lastGrant = 0; // a refused top-up: none again until the next grant
      return outcome;
    }
    const surplus = Math.max(0, grant.granted - need);
    keepSurplus(lease, surplus, grant.windowEnd);
    // A need-only grant (asked while another call was in flight) must not disable the half-spent top-up.
    if (surplus > 0 || need === 0) lease.lastGrant = surplus;
    lease.spendUntil = spendDeadline(sentAt, outcome.resetMs, false);
    lease.endsBy = now + outcome.resetMs;
    lease.remote = outcome.remaining;
    return need === 0 ? outcome : leaseAdmitted(lease, now);
  }

  /** A lease call ended (answered, failed or timed out): it is no longer in flight. */
  finished(lease: Lease): void {
    lease.inFlight = Math.max(0, lease.inFlight - 1);
  }

  /** Drops a key's lease (the primary revoked it, or this process blocked, penalised or reset the key). */
  revoke(key: string): void {
    this.entries.delete(key);
  }

  /** Drops every lease (the primary is gone or may have forgotten keys, or this process stops listening). */
  clear(): void {
    this.entries.clear();
  }

  private entry(operation: Operation, now: number, horizonMs: number): Lease {
    let e = this.entries.get(operation.key);
    // Moved to the back on every lease call: the oldest entry, dropped first when full, is the least recently leased.
    if (e !== undefined) this.entries.delete(operation.key);
    if (e !== undefined && !samePolicy(e.policy, operation.policy)) e = undefined;
    if (e !== undefined) {
      this.entries.set(operation.key, e);
    } else {
      // A new key starts as if it had been idle for a whole horizon, so its first lease asks for what it spends.
      e = {
        policy: operation.policy,
        units: 0,
        spendUntil: 0,
        endsBy: 0,
        windowEnd: NaN,
        remote: 0,
        ...firstDemand(now, horizonMs),
        lastGrant: 0,
        inFlight: 0,
      };
      this.entries.set(operation.key, e);
    }
    return e;
  }
}
