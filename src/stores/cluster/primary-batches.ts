/** How a ClusterStorePrimary applies one worker batch. */
/**
 * Each operation, lease and composite in order in one synchronous step, and what the answer tells workers (hints,
 * grants, invalidations).
 */
import type { Clock } from '../../core/clock.js';
import { BoundedMap } from '../../util/bounded-map.js';
import { ErrorCode } from '../../core/errors.js';
import type { Outcome } from '../../core/policy.js';
import type { MemoryStore } from '../memory.js';
import { BatchReply, remember } from './batch-reply.js';
import { OPERATION_WIDTH, readBatch, type BatchView } from './codec.js';
import { readOperation, grantLease, type BatchOperation } from './primary-operations.js';
import { PrimaryPolicies } from './primary-policies.js';
import { applySlot } from './slot-ops.js';
import { isSlotCode } from './slot-call.js';
import type { Binding, Hinted, Leased, ResolvedPolicy } from './primary-types.js';
import {
  PROTOCOL_VERSION,
  invalidates,
  refusalMs,
  revokesLeases,
  type BatchMessage,
  type InvalidateMessage,
  type PrimaryMessage,
} from './protocol.js';

/** One batch being applied: what it says, and what its answer gathers. */
interface Turn {
  readonly view: BatchView;
  /** The batch's count, to withdraw a hint from an answer not sent yet. */
  readonly batch: number;
  readonly policies: readonly (ResolvedPolicy | undefined)[];
  /** The primary's clock when the batch arrived. */
  readonly primaryNow: number;
  /** performance.now() of the decisions. */
  readonly mono: number;
  readonly reply: BatchReply;
}

/** The message of an operation that threw in the store. */
function failure(error: unknown): string {
  return `cluster store primary failed: ${error instanceof Error ? error.message : String(error)}`;
}

/** Fails the `count` parts of a composite from operation `i`; returns `count`. */
function failParts(reply: BatchReply, i: number, count: number, code: string, text: string): number {
  for (let k = i; k < i + count; k++) reply.fail(k, code, text);
  return count;
}

/** What applying one batch produced. */
export interface Applied {
  /** The answer to the worker that sent it. */
  readonly answer: PrimaryMessage;
  /** Whether that worker was hinted or leased to, so must hear later invalidations. */
  readonly subscribes: boolean;
  /** What every subscribed worker must forget, sent before the answer. */
  readonly invalidation: InvalidateMessage | undefined;
}

/**
 * The counters' side of a ClusterStorePrimary: applies batches to its
 * MemoryStore and remembers, per key, the policy that last touched it and
 * what workers were told (hints, leases) until it stops mattering.
 */
export class BatchApplier {
  /** The policy that last touched each key, for the conflict check. */
  readonly bindings: BoundedMap<string, Binding>;
  /** Keys workers may know as refused, in the order hinted (bounded by maxKeys). */
  readonly hinted = new Map<string, Hinted>();
  /** Keys leased out, in the order granted (bounded by maxKeys). */
  readonly leased = new Map<string, Leased>();
  /** The policies batches carry, decoded once, and the conflicts warned about. */
  private readonly policies = new PrimaryPolicies();
  leaseCalls = 0;
  unitsLeased = 0;
  batches = 0;
  operations = 0;

  /**
   * @param store - the counters
   * @param clock - the primary's clock
   * @param maxKeys - the store's key bound (and the bound of what is remembered per key)
   * @param realTime - whether `clock` is the system clock, so refusals are real ms a worker may count
   */
  constructor(
    private readonly store: MemoryStore,
    private readonly clock: Clock,
    private readonly maxKeys: number,
    private readonly realTime: boolean,
  ) {
    this.bindings = new BoundedMap(maxKeys);
  }

  /**
   * Applies a batch in order, synchronously: nothing interleaves, so each
   * operation (and each composite, as one step) is atomic.
   */
  apply(message: BatchMessage): Applied {
    const view = readBatch(message);
    if (view === undefined) {
      const id = message.id;
      return {
        answer: {
          floodgate: PROTOCOL_VERSION,
          t: 'error',
          ...(Number.isSafeInteger(id) ? { id } : {}),
          code: ErrorCode.STORE_ERROR,
          message: 'cluster store primary received a malformed batch.',
        },
        subscribes: false,
        invalidation: undefined,
      };
    }
    this.batches++;
    const turn: Turn = {
      view,
      batch: this.batches,
      policies: view.policies.map((tuple) => this.policies.resolve(tuple)),
      primaryNow: this.clock(),
      // The monotonic time of the decisions, for when hinted keys stop mattering.
      mono: performance.now(),
      reply: new BatchReply(),
    };
    for (let i = 0; i * OPERATION_WIDTH < view.operations.length;) {
      if (isSlotCode(view.operations[i * OPERATION_WIDTH])) {
        applySlot(this.store, turn.reply, view, i, this.timeOf(turn, i).now);
        this.operations++;
        i++;
        continue;
      }
      const operation = readOperation(view.operations, i * OPERATION_WIDTH, turn.policies);
      const count = operation?.part ? this.applyComposite(turn, i) : this.applyOne(turn, i, operation);
      this.operations += count;
      i += count;
    }
    const { reply } = turn;
    return { answer: reply.result(view.id), subscribes: reply.subscribes, invalidation: reply.invalidation() };
  }

  /** Applies operation `i` of a batch (a lease call or a plain operation); returns 1, the operations it took. */
  private applyOne(turn: Turn, i: number, operation: BatchOperation | undefined): number {
    const { reply } = turn;
    if (operation === undefined) {
      reply.fail(i, ErrorCode.STORE_ERROR, 'cluster store primary received a malformed operation.');
      return 1;
    }
    const { kind, key, amount, resolved, leasing } = operation;
    const { now, workerTime } = this.timeOf(turn, i);
    const conflict = this.conflict(key, resolved, now);
    if (conflict !== undefined) {
      reply.fail(i, ErrorCode.CONFLICTING_OPTIONS, conflict);
      return 1;
    }
    const full = this.full(reply, 1);
    let outcome: Outcome;
    let granted = 0;
    try {
      if (leasing) {
        // No surplus while full (see full()), or off real time (a worker's or this primary's own clock: a lease
        // runs out on the worker's monotonic clock, which such a clock does not drive).
        const want = full || workerTime || !this.realTime ? amount : Math.max(amount, turn.view.wants?.get(i) ?? 0);
        ({ outcome, granted } = grantLease(this.store, key, resolved.policy, amount, want, now));
      } else {
        outcome = this.store.applySync({ kind, key, amount, policy: resolved.policy }, now);
      }
    } catch (error) {
      reply.fail(i, ErrorCode.STORE_ERROR, failure(error));
      return 1;
    }
    reply.answer(outcome);
    if (leasing) this.leaseOut(turn, i, operation, outcome, granted, now);
    this.record(turn, i, operation, outcome, now, workerTime);
    return 1;
  }

  /**
   * Decides the composite whose first part is operation `i` in one
   * synchronous step (MemoryStore.consumeAllSync, at the first part's time);
   * when every part admits, the parts that lease take their surplus in the
   * same step. A malformed or conflicting composite fails every part, so no
   * part is decided alone. Returns the operations it took.
   */
  private applyComposite(turn: Turn, i: number): number {
    const { reply, view } = turn;
    const count = view.composites?.get(i) ?? 0;
    if (count < 1 || (i + count) * OPERATION_WIDTH > view.operations.length) {
      reply.fail(i, ErrorCode.STORE_ERROR, 'cluster store primary received a malformed composite.');
      return 1;
    }
    const parts: BatchOperation[] = [];
    const keys = new Set<string>();
    for (let k = i; k < i + count; k++) {
      const part = readOperation(view.operations, k * OPERATION_WIDTH, turn.policies);
      if (part === undefined || !part.part || keys.has(part.key)) {
        return failParts(reply, i, count, ErrorCode.STORE_ERROR, 'cluster store primary received a malformed composite.');
      }
      keys.add(part.key);
      parts.push(part);
    }
    const { now, workerTime } = this.timeOf(turn, i);
    for (const part of parts) {
      const conflict = this.conflict(part.key, part.resolved, now);
      if (conflict !== undefined) return failParts(reply, i, count, ErrorCode.CONFLICTING_OPTIONS, conflict);
    }
    // Each part may write a key the store does not hold yet.
    const full = this.full(reply, count);
    const granted = parts.map((part) => part.amount);
    let outcomes: Outcome[];
    let admitted: boolean;
    try {
      outcomes = this.store.consumeAllSync(
        parts.map(({ key, amount, resolved }) => ({ kind: 'consume', key, amount, policy: resolved.policy })),
        now,
      );
      admitted = outcomes.every((outcome) => outcome.allowed);
      // The surplus of leasing parts, as a lease call's (see applyOne): only once the composite has spent.
      for (let k = 0; k < count && admitted && !full && !workerTime && this.realTime; k++) {
        const { key, amount, resolved } = parts[k]!;
        const want = view.wants?.get(i + k);
        if (want === undefined || want <= amount || resolved.policy.algorithm !== 'fixed-window') continue;
        const surplus = grantLease(this.store, key, resolved.policy, 0, want - amount, now);
        if (surplus.granted === 0) continue;
        granted[k]! += surplus.granted;
        outcomes[k] = surplus.outcome;
      }
    } catch (error) {
      return failParts(reply, i, count, ErrorCode.STORE_ERROR, failure(error));
    }
    for (let k = 0; k < count; k++) {
      reply.answer(outcomes[k]!);
      // A refused composite grants nothing: its parts' leases learn only that nothing was spent.
      if (admitted && view.wants?.has(i + k)) this.leaseOut(turn, i + k, parts[k]!, outcomes[k]!, granted[k]!, now);
      this.record(turn, i + k, parts[k]!, outcomes[k]!, now, workerTime);
    }
    return count;
  }

  /** The time operation `i` is decided at: the worker's, when it sent one, else the primary's. */
  private timeOf(turn: Turn, i: number): { now: number; workerTime: boolean } {
    const t = turn.view.times === undefined ? -1 : turn.view.times[i];
    const workerTime = typeof t === 'number' && t >= 0;
    return { now: workerTime ? (t as number) : turn.primaryNow, workerTime };
  }

  /** The conflict message when another policy still holds `key`, else undefined. */
  private conflict(key: string, resolved: ResolvedPolicy, now: number): string | undefined {
    const bound = this.bindings.get(key);
    if (bound === undefined || bound.family === resolved.family || bound.until <= now) return undefined;
    return this.policies.conflict(key, bound.policy, resolved.policy);
  }

  /**
   * Whether writing `fresh` keys may make the store evict. The MemoryStore
   * evicts its least recently written key when full, and which key goes is
   * not reported: then any hinted key may be the one forgotten (admissible
   * again), so every worker forgets everything, and nothing is hinted while
   * it is full. Leases go too: an evicted key's count is forgotten, so units
   * leased in it would be spent twice.
   */
  private full(reply: BatchReply, fresh: number): boolean {
    const full = this.store.size + fresh > this.maxKeys;
    if (full && (this.hinted.size > 0 || this.leased.size > 0)) {
      this.hinted.clear();
      this.leased.clear();
      reply.forgetEverything();
    }
    return full;
  }

  /** Operation `i` was a lease call (or a leasing part): its grant, and the lease remembered for revocation. */
  private leaseOut(turn: Turn, i: number, operation: BatchOperation, outcome: Outcome, granted: number, now: number): void {
    const { reply, mono } = turn;
    this.leaseCalls++;
    reply.grant(i, granted, now + outcome.resetMs);
    if (granted <= operation.amount) return;
    this.unitsLeased += granted - operation.amount;
    reply.leasedOut = true;
    const dropped = remember(this.leased, operation.key, { fp: operation.resolved.fp, until: mono + outcome.resetMs }, this.maxKeys);
    if (dropped !== undefined && dropped[1].until > mono) reply.revoke(dropped[0]);
  }

  /** What operation `i`'s outcome changes of what workers were told (leases, hints) and of the key's policy binding. */
  private record(turn: Turn, i: number, operation: BatchOperation, outcome: Outcome, now: number, workerTime: boolean): void {
    const { reply, mono, batch } = turn;
    const { kind, key, resolved, leasing, amount } = operation;
    if (!leasing && this.leased.size > 0) {
      const held = this.leased.get(key);
      // Units leased before a penalty, block or reset (or under another policy) must not be spent after it.
      // The revocation goes out before this batch's answer, so a worker drops even a grant made earlier in it.
      if (held !== undefined && (revokesLeases(kind) || held.fp !== resolved.fp)) {
        this.leased.delete(key);
        if (held.until > mono) reply.revoke(key);
      }
    }
    if (this.hinted.size > 0) {
      const known = this.hinted.get(key);
      // A reward, penalty, block or reset may make the key admissible
      // earlier; another policy taking the key over changes what its
      // callers must be told (a conflict, not a refusal).
      if (known !== undefined && (invalidates(kind) || known.fp !== resolved.fp)) {
        this.hinted.delete(key);
        if (known.until > mono) reply.staleKey(key);
        // Hinted earlier in this very batch: withdraw it from the answer too.
        if (known.batch === batch) reply.withdraw(known.index);
      }
    }
    // A refusal the worker may replay by itself: decided on real time (the
    // primary's system clock, or the worker's own clock it sent), and with
    // the store not full (see full()).
    if (turn.view.wantsHints && (workerTime || this.realTime) && this.store.size < this.maxKeys) {
      // A top-up (need 0) decided nothing about a consume: it reads like a peek.
      const ms = refusalMs(leasing && amount === 0 ? 'peek' : kind, resolved.policy, outcome);
      if (ms > 0) {
        reply.hint(i);
        const evicted = remember(
          this.hinted,
          key,
          { fp: resolved.fp, until: workerTime ? Infinity : mono + ms, batch, index: i },
          this.maxKeys,
        );
        if (evicted !== undefined) {
          if (evicted[1].until > mono) reply.staleKey(evicted[0]);
          if (evicted[1].batch === batch) reply.withdraw(evicted[1].index);
        }
      }
    }
    const until = now + outcome.resetMs;
    const bound = this.bindings.get(key);
    // Re-inserted, which keeps the Map in least-recently-used order.
    if (bound !== undefined) this.bindings.delete(key);
    if (until > now) {
      const binding = bound ?? { family: resolved.family, policy: resolved.policy, until };
      binding.family = resolved.family;
      binding.policy = resolved.policy;
      binding.until = until;
      this.bindings.set(key, binding);
    }
  }

  /** Forgets bindings, hints and leases that no longer matter. */
  sweep(): void {
    const now = this.clock();
    for (const [key, binding] of this.bindings) {
      if (binding.until <= now) this.bindings.delete(key);
    }
    const mono = performance.now();
    for (const told of [this.hinted, this.leased]) {
      for (const [key, entry] of told) if (entry.until <= mono) told.delete(key);
    }
  }
}
