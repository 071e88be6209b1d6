/** Policy: the algorithm, limit, window and block that decide about a key, and the operations a store applies. */
import { sameCalendar, type CalendarSpec } from './calendar-window.js';

/** Names of the supported algorithms. */
export const ALGORITHMS = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'] as const;

/** One of {@link ALGORITHMS}. */
export type Algorithm = (typeof ALGORITHMS)[number];

/**
 * A validated policy, in whole milliseconds. Stores receive it with every
 * operation, so a store holds no per-limiter configuration.
 */
export interface Policy {
  /** The algorithm. */
  readonly algorithm: Algorithm;
  /**
   * Units admitted per window. For the token bucket, the refill: `limit`
   * tokens per window, and the bucket size too unless `burst` says otherwise.
   */
  readonly limit: number;
  /**
   * Window length (or time to refill the whole bucket), in ms. With
   * `calendar`, the longest period (see longestPeriodMs): windows then end
   * where the calendar says, and this is only the length where a number is
   * needed.
   */
  readonly windowMs: number;
  /** How long a consume that goes over the limit blocks the key, in ms; 0 for no block. */
  readonly blockMs: number;
  /**
   * The limiter's own policy, when this one is a per-key override of it
   * (see `PolicyOverrides`). A key's policy may change between policies of
   * one family; stores refuse two unrelated policies on one key.
   */
  readonly base?: Policy;
  /**
   * Fixed window only: windows follow this calendar period (a window opened
   * at any instant ends when that instant's day, week or month ends in the
   * time zone). Absent for windows of `windowMs` from the first consume.
   */
  readonly calendar?: CalendarSpec;
  /**
   * Token bucket only: the bucket size (the most tokens held, so the most
   * units admitted at once), when it is not `limit`. Absent: `limit`.
   */
  readonly burst?: number;
  /**
   * Token bucket only: the tokens of a key the store holds nothing for (a new
   * key, or one forgotten once its bucket was full again), when not the
   * bucket size. Absent: a new key's bucket is full.
   */
  readonly initialTokens?: number;
}

/** The most units a key can hold at once: a token bucket's burst, else the limit. */
export function capacityOf(policy: Policy): number {
  return policy.burst ?? policy.limit;
}

/**
 * The time a key takes to go from nothing left to whole again, in ms: the
 * window, or for a token bucket with a burst, burst × window / limit (rounded
 * up), the time its refill takes to fill the whole bucket.
 */
export function refillMs(policy: Policy): number {
  return policy.burst === undefined ? policy.windowMs : Math.ceil((policy.burst * policy.windowMs) / policy.limit);
}

/**
 * The limit as the Lua scripts' limit argument: `'limit'`, or for a token
 * bucket with a burst or initial tokens `'limit:burst:initialTokens'`
 * (prelude.lua parse_limit).
 */
export function limitArgument(policy: Policy): string {
  if (policy.burst === undefined && policy.initialTokens === undefined) return String(policy.limit);
  const burst = capacityOf(policy);
  return `${policy.limit}:${burst}:${policy.initialTokens ?? burst}`;
}

/** Operation names a store applies. */
export type OperationKind = 'consume' | 'peek' | 'reward' | 'penalty' | 'block' | 'reset';

/** Numeric codes of operations, as the Lua scripts and the IPC protocol carry them. */
export const OP_CODE: Readonly<Record<OperationKind, number>> = {
  consume: 1,
  peek: 2,
  reward: 3,
  penalty: 4,
  block: 5,
  reset: 6,
};

/** `amount` of a block operation meaning "until unblocked". */
export const BLOCK_FOREVER = -1;

/**
 * One operation on one key.
 *
 * `amount` is the cost for consume, the units for reward and penalty, the
 * block duration in ms (or {@link BLOCK_FOREVER}) for block, and 0 for peek
 * and reset.
 */
export interface Operation {
  /** What to do. */
  readonly kind: OperationKind;
  /** The full store key (prefix included). */
  readonly key: string;
  /** See the interface description. */
  readonly amount: number;
  /** The policy in force. */
  readonly policy: Policy;
}

/**
 * What a store returns for one operation: the decision's numbers plus
 * `emptyMs`, the time until at least one unit is available again, which the
 * in-memory block list uses.
 *
 * `Infinity` in `resetMs`, `retryAfterMs` or `emptyMs` means "blocked until
 * unblocked".
 */
export interface Outcome {
  /** Whether the operation was admitted (consume) or a cost-1 consume would be (others). */
  readonly allowed: boolean;
  /** Units that can still be consumed now. */
  readonly remaining: number;
  /** ms until the quota is whole again. */
  readonly resetMs: number;
  /** ms until this operation could succeed; 0 when allowed. */
  readonly retryAfterMs: number;
  /** ms until one unit is available; 0 when one is available now. */
  readonly emptyMs: number;
}

/**
 * What each limiter's policy counts for (its prefix), kept beside the policy
 * rather than in it: the policy's fields are what it decides, and two
 * limiters with equal numbers have equal policies. A store that keeps
 * summaries per policy (the memory store's overflow sketch) keeps one per
 * scope, so a flood of new keys under one limiter fills no other's summary.
 */
const scopes = new WeakMap<Policy, string>();

/** Records that `policy` counts under `scope` (the limiter's prefix); see {@link policyScope}. */
export function scopePolicy(policy: Policy, scope: string): void {
  scopes.set(policy, scope);
}

/** The scope of `policy` (or of the limiter policy it overrides); undefined for a policy no limiter scoped. */
export function policyScope(policy: Policy): string | undefined {
  return scopes.get(policy.base ?? policy);
}

/** Whether two policies decide alike (the same algorithm, limit, window, block, calendar, burst and initial tokens). */
export function samePolicy(a: Policy, b: Policy): boolean {
  return (
    a === b ||
    (a.algorithm === b.algorithm &&
      a.limit === b.limit &&
      a.windowMs === b.windowMs &&
      a.blockMs === b.blockMs &&
      a.burst === b.burst &&
      a.initialTokens === b.initialTokens &&
      sameCalendar(a.calendar, b.calendar))
  );
}

/**
 * Whether two policies may take turns on one store key: the same policy, or
 * per-key overrides of the same limiter's policy (and that policy itself).
 */
export function sameFamily(a: Policy, b: Policy): boolean {
  return samePolicy(a.base ?? a, b.base ?? b);
}
