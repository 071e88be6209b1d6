/** The in-memory block guard of one limiter. */
/**
 * Whether a key is refused from memory, and what a store answer teaches it.
 */
import type { Clock } from '../core/clock.js';
import type { OperationKind, Outcome, Policy } from '../core/policy.js';
import { BlockList, learnBlock, type BlockRule } from './block-list.js';

/** The checked `inMemoryBlock` option: when a key is blocked, for how long, and how many keys are held. */
export interface MemoryBlockRule extends BlockRule {
  /** Most keys held in the block list. */
  readonly maxKeys: number;
}

/**
 * One limiter's in-memory block: the limiter asks it before the store
 * ({@link check}) and tells it every store answer ({@link learn}), so the
 * block list and its rule stay behind these few calls.
 */
export class MemoryBlockGuard {
  private readonly list: BlockList;

  /**
   * @param rule - the checked `inMemoryBlock` option
   * @param clock - the limiter's clock
   * @param changed - true when the limiter's policies changed since it was last asked (its overrides): blocks learned under the old numbers no longer hold
   */
  constructor(
    private readonly rule: MemoryBlockRule,
    private readonly clock: Clock,
    private readonly changed: () => boolean,
  ) {
    this.list = new BlockList({ maxKeys: rule.maxKeys });
  }

  /**
   * ms for which the block refuses `key` from `now`, 0 when it does not. A
   * lookup that finds the key's block just ended marks it lapsed (see
   * {@link takeLapsed}). Forgets every block first when the policies changed.
   */
  check(key: string, now: number = this.clock()): number {
    if (this.changed()) this.list.clear();
    return this.list.blockedFor(key, now);
  }

  /** Learns from the store's answer to operation `kind` on `key` under `policy` (the key's): blocks the key, or lets it go. */
  learn(key: string, kind: OperationKind, outcome: Outcome, policy: Policy): void {
    learnBlock(this.list, this.rule, policy, kind, key, outcome, this.clock());
  }

  /** Drops `key`'s block: its state in the store changed (a reset, a give-back, an unblock). */
  forget(key: string): void {
    this.list.delete(key);
  }

  /** Drops every block: the store may have changed any key in ways this process did not hear (a missed reset or unblock). */
  forgetAll(): void {
    this.list.clear();
  }

  /** True when a {@link check} found `key`'s block over less than a second before `now`; forgets that either way. */
  takeLapsed(key: string, now: number): boolean {
    return this.list.takeLapsed(key, now);
  }
}
