/** What a ClusterStore's transport remembers of its primary's answers (known refusals and leases). */
/**
 * The answers it gives from them without IPC, single or composite, and how it learns and forgets them.
 */
import type { Clock } from '../../core/clock.js';
import type { Operation, Outcome } from '../../core/policy.js';
import { readInvalidation } from './codec.js';
import { Leases, type Lease } from './leases.js';
import { refusalMs, type InvalidateMessage } from './protocol.js';
import { KnownRefusals } from './refusals.js';
import type { Pending } from './pending.js';

/** A lease top-up to send: the lease it feeds and the units wanted. */
export type TopUp = { readonly entry: Lease; readonly want: number };

/** The known refusals and leases of one transport's stores, shared by them. */
export class WorkerMemory {
  /** Keys known to be refused. */
  readonly refusals = new KnownRefusals(0);
  /** Leases held. */
  readonly leases: Leases;

  /** @param maxLeases - the most keys leased at once */
  constructor(maxLeases: number) {
    this.leases = new Leases(maxLeases);
  }

  /** The answer to a consume or peek of a key known to be refused; undefined when the primary must decide. */
  known(operation: Operation, clock: Clock | undefined): Outcome | undefined {
    if (operation.kind !== 'consume' && operation.kind !== 'peek') return undefined;
    return this.refusals.answer(operation, clock);
  }

  /** When a hot key's lease runs low: the top-up to ask for now (see Leases.topUp). */
  topUp(key: string, leaseMs: number): TopUp | undefined {
    return this.leases.topUp(key, this.leases.lastSpendAt, leaseMs);
  }

  /**
   * A composite decided here, exactly as the primary would, when every part
   * is answered here: undefined otherwise (nothing spent; the primary
   * decides). Every part leased with room: it spends from every lease at once.
   * Some part known refused and every other part leased with room: refused,
   * nothing spent (a leased part reports what it holds, as a part that would
   * have admitted does). A part with neither goes to the primary with the
   * rest: the composite reports every part's standing, which only the
   * primary knows then.
   */
  decideAll(operations: readonly Operation[], clock: Clock | undefined, leaseMs: number, remembers: boolean): Outcome[] | undefined {
    // One clock reading for every part, so no lease lapses between the check and the spend.
    const now = performance.now();
    const outcomes: Outcome[] = new Array(operations.length);
    let refused = false;
    for (let i = 0; i < operations.length; i++) {
      const operation = operations[i]!;
      // A lease with room comes first, as for a single consume: its units are spendable even when the grant left the key at 0.
      const held = leaseMs > 0 && operation.policy.algorithm === 'fixed-window' ? this.leases.covered(operation, now) : undefined;
      const outcome = held ?? (remembers ? this.refusals.answer(operation, clock) : undefined);
      if (outcome === undefined) return undefined;
      if (!outcome.allowed) refused = true;
      outcomes[i] = outcome;
    }
    return refused ? outcomes : this.leases.spendAll(operations, now);
  }

  /** Keeps a hinted outcome of `call` as a known refusal, on the clock the call was decided at. */
  learn(call: Pending, outcome: Outcome, sentAt: number): void {
    // The worker applies the primary's rule itself too: a hint it cannot
    // honour exactly (a primary of another release) is not kept.
    // A top-up (need 0) decided nothing about a consume: it reads like a peek.
    const kind = call.lease !== undefined && call.operation.amount === 0 ? 'peek' : call.operation.kind;
    const ms = refusalMs(kind, call.operation.policy, outcome);
    if (ms <= 0) return;
    if (call.time >= 0) this.refusals.learn(call.operation, outcome, ms, call.time, call.clock);
    else this.refusals.learn(call.operation, outcome, ms, sentAt, undefined);
  }

  /** The primary says keys may be admissible earlier than it said: forget them. */
  invalidate(message: InvalidateMessage): void {
    const { all, refusals, leases } = readInvalidation(message);
    if (all) {
      this.forgetAll();
      return;
    }
    for (const key of refusals) this.refusals.forget(key);
    for (const key of leases) {
      this.leases.revoke(key);
      this.refusals.forget(key);
    }
  }

  /** Forgets every known refusal and drops every lease: what the primary said is no longer vouched for, or would not be heard revoked. */
  forgetAll(): void {
    this.refusals.clear();
    this.leases.clear();
  }
}
