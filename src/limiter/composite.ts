/** consumeAll: one all-or-nothing decision over several (limiter, key, cost) parts. */
/**
 * Each part goes through its limiter's block list, breaker and fallbacks.
 */
import type { Decision, DecisionSource } from '../core/decision.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError, isStoreFailure, toStoreError } from '../core/errors.js';
import { RateLimiter } from './rate-limiter.js';
import { refused } from './fallback.js';
import { combine, decisiveIndex, type CompositeDecision, type LimitPart } from './composite-decision.js';
import { consumeAllNowShadowed, consumeAllShadowed, hasShadowPart } from './composite-shadow.js';
import { LIMITER_INTERNALS, type LimiterInternals } from './internals.js';
import { warnCompositeDoesNotWait } from './waiting.js';
import { capacityOf, type Operation, type Outcome } from '../core/policy.js';
import type { Store } from '../stores/store.js';
import type { CircuitBreaker } from '../guards/breaker.js';
import { assertKey, assertUnits } from '../core/validate.js';

export type { CompositeDecision, LimitPart } from './composite-decision.js';

/** Most parts in one composite: a guard against a request that builds its parts from client input. */
export const MAX_PARTS = 64;

/** Parts checked once, with what each step needs. */
interface Plan {
  readonly store: Store;
  readonly operations: Operation[];
  readonly keys: string[];
  readonly internals: LimiterInternals[];
  readonly parts: readonly LimitPart[];
}

/**
 * Spends every part's cost if every part admits it, and nothing anywhere if
 * one refuses: the per-second and the per-day limit, the per-user and the
 * per-organisation limit, decided in one atomic step of the parts' common
 * store (one script call on Redis). A refusing part with a `blockDuration`
 * is blocked as a single consume over its limit would be; the other parts
 * are left exactly as they were.
 *
 * Each part's limiter keeps its role: its in-memory block refuses at once
 * (without a store call) a key it knows is limited, and learns from its
 * part's outcome; its breaker keeps calls away from a failing store; when the
 * store fails, the parts' fallbacks decide together (see docs/composite.md).
 * A part whose limiter is in shadow mode never refuses the whole: the
 * enforced parts spend as they would without it, and its would-be refusal
 * is marked `shadowLimited` (see composite-shadow.ts).
 *
 * @returns the decision; `allowed: false` when any part refused
 * @throws FloodgateError INVALID_COMPOSITE, INVALID_KEY, INVALID_COST, COST_EXCEEDS_LIMIT or COMPOSITE_UNSUPPORTED (as a rejection)
 */
export function consumeAll(parts: readonly LimitPart[]): Promise<CompositeDecision> {
  return hasShadowPart(parts) ? consumeAllShadowed(parts, consumeAllOnce) : consumeAllOnce(parts);
}

function consumeAllOnce(parts: readonly LimitPart[]): Promise<CompositeDecision> {
  let plan: Plan;
  let now: CompositeDecision | undefined;
  try {
    plan = prepare(parts);
    now = decideNow(plan);
  } catch (error) {
    return Promise.reject(error);
  }
  return now === undefined ? ask(plan) : Promise.resolve(now);
}

/**
 * {@link consumeAll} decided synchronously when that needs no waiting: a
 * part's in-memory block refuses, or the store answers at once (the memory
 * store always, local-first while every part's lease covers it). Otherwise
 * undefined, and nothing was spent: call `consumeAll`.
 * @throws FloodgateError as consumeAll would reject for a bad call
 */
export function consumeAllNow(parts: readonly LimitPart[]): CompositeDecision | undefined {
  if (hasShadowPart(parts)) return consumeAllNowShadowed(parts, (live) => decideNow(prepare(live)));
  return decideNow(prepare(parts));
}

function prepare(parts: readonly LimitPart[]): Plan {
  if (!Array.isArray(parts) || parts.length === 0 || parts.length > MAX_PARTS) {
    throw new FloodgateError(
      ErrorCode.INVALID_COMPOSITE,
      `consumeAll takes an array of 1 to ${MAX_PARTS} parts ({ limiter, key, cost? }); got ${describeValue(parts)}${Array.isArray(parts) ? ` of length ${parts.length}` : ''}.`,
    );
  }
  const n = parts.length;
  const operations: Operation[] = new Array(n);
  const keys: string[] = new Array(n);
  const internals: LimiterInternals[] = new Array(n);
  let store: Store | undefined;
  for (let i = 0; i < n; i++) {
    const part = parts[i];
    const limiter = part?.limiter;
    if (!(limiter instanceof RateLimiter)) {
      throw new FloodgateError(
        ErrorCode.INVALID_COMPOSITE,
        `consumeAll part ${i}: limiter must be a RateLimiter; got ${describeValue(limiter)}.`,
      );
    }
    const { key } = part!;
    const cost = part!.cost ?? 1;
    assertKey(key);
    const policy = limiter.policyFor(key);
    assertUnits(cost, 'cost', capacityOf(policy));
    if (store === undefined) store = limiter.store;
    else if (limiter.store !== store) {
      throw new FloodgateError(
        ErrorCode.INVALID_COMPOSITE,
        `consumeAll part ${i}: its limiter uses another store than part 0's; one atomic step needs every part's counters in one store.`,
      );
    }
    const storeKey = limiter.storeKey(key);
    for (let j = 0; j < i; j++) {
      if (operations[j]!.key === storeKey) {
        throw new FloodgateError(
          ErrorCode.INVALID_COMPOSITE,
          `consumeAll parts ${j} and ${i} name the same counter (${JSON.stringify(storeKey)}); give each part its own limiter or key, or add the costs into one part.`,
        );
      }
    }
    operations[i] = { kind: 'consume', key: storeKey, amount: cost, policy };
    keys[i] = key;
    internals[i] = limiter[LIMITER_INTERNALS]();
    if (internals[i]!.waits) warnCompositeDoesNotWait(limiter.prefix);
  }
  if (store!.consumeAll === undefined) {
    throw new FloodgateError(
      ErrorCode.COMPOSITE_UNSUPPORTED,
      `the ${store!.name} store cannot decide several keys in one atomic step (it has no consumeAll); use a floodgate store (memory, redis, local-first, cluster).`,
    );
  }
  return { store: store!, operations, keys, internals, parts };
}

/** The memory-block refusal, or the store's synchronous answer, or undefined. */
function decideNow(plan: Plan): CompositeDecision | undefined {
  const blocked = memoryBlocked(plan);
  if (blocked !== undefined) return blocked;
  const { store } = plan;
  if (store.consumeAllNow === undefined) return undefined;
  let outcomes: Outcome[] | undefined;
  try {
    outcomes = store.consumeAllNow(plan.operations);
  } catch (error) {
    const failure = toStoreError(error, store.name);
    if (!isStoreFailure(failure)) throw failure;
    return undefined;
  }
  return outcomes === undefined ? undefined : decideFrom(plan, outcomes, 'store');
}

/**
 * A refusal from the first part whose in-memory block holds its key. The
 * other parts are not consulted, on every store: sparing the store is the
 * block's purpose, and a store that could read them in process (memory)
 * reporting more than one that cannot (Redis) made one route's refusals
 * differ by store.
 */
function memoryBlocked(plan: Plan): CompositeDecision | undefined {
  const { internals, keys, operations } = plan;
  for (let i = 0; i < internals.length; i++) {
    const side = internals[i]!;
    const blocks = side.memoryBlock;
    if (blocks === undefined) continue;
    const ms = blocks.check(keys[i]!);
    if (ms <= 0) continue;
    const parts: (Decision | undefined)[] = new Array(internals.length).fill(undefined);
    parts[i] = side.decision(refused(ms), 'memory-block', operations[i]!.policy);
    return combine(parts, false, i);
  }
  return undefined;
}

/** Asks the store through every part's breaker; falls back together when it fails. */
async function ask(plan: Plan): Promise<CompositeDecision> {
  const { internals, store } = plan;
  const now = internals[0]!.clock();
  // One breaker per part: its limiter's, or that of the part's failure scope (a Redis Cluster node) on a store that has them.
  // A loop, not map and bind: this runs once per composite request.
  const n = internals.length;
  const breakers = new Array<CircuitBreaker | undefined>(n);
  for (let i = 0; i < n; i++) {
    const breaker = internals[i]!.breaker;
    breakers[i] =
      breaker === undefined || store.failureScope === undefined ? breaker : breaker.forScope(store.failureScope(plan.operations[i]!.key));
  }
  for (const breaker of breakers) {
    if (breaker !== undefined && breaker.isOpen(now)) {
      return fallback(
        plan,
        new FloodgateError(
          ErrorCode.CIRCUIT_OPEN,
          `${store.name} store failed repeatedly; not calling it for ${breaker.retryInMs(now)} ms.`,
        ),
      );
    }
  }
  for (const breaker of breakers) breaker?.allow(now);
  let outcomes: Outcome[];
  try {
    outcomes = await store.consumeAll!(plan.operations);
  } catch (error) {
    const failure = toStoreError(error, store.name);
    if (!isStoreFailure(failure)) throw failure;
    breakers.forEach((breaker, i) => breaker?.failure(internals[i]!.clock()));
    return fallback(plan, failure);
  }
  for (const breaker of breakers) breaker?.success();
  return decideFrom(plan, outcomes, 'store');
}

/** Each part's limiter learns from its outcome; the decisions are combined. */
function decideFrom(plan: Plan, outcomes: Outcome[], source: DecisionSource): CompositeDecision {
  const { internals, keys, operations } = plan;
  const parts: Decision[] = new Array(outcomes.length);
  let allowed = true;
  for (let i = 0; i < outcomes.length; i++) {
    const outcome = outcomes[i]!;
    const policy = operations[i]!.policy;
    internals[i]!.memoryBlock?.learn(keys[i]!, 'consume', outcome, policy);
    parts[i] = internals[i]!.decision(outcome, source, policy);
    if (!outcome.allowed) allowed = false;
  }
  return combine(parts, allowed, decisiveIndex(parts, allowed));
}

/**
 * While the store fails, the parts decide by their own fallbacks, still all
 * or nothing: any part without insurance that rejects makes the call reject;
 * any that fails closed refuses the whole; the parts with insurance are then
 * decided together on their insurance limiters' store (one atomic step
 * there too), and the parts that fail open admit.
 */
async function fallback(plan: Plan, failure: FloodgateError): Promise<CompositeDecision> {
  const { internals, parts } = plan;
  const n = internals.length;
  const insured: LimitPart[] = [];
  for (const side of internals) if (side.insurance === undefined && side.failureMode === 'reject') throw failure;
  const closed = internals.findIndex((side) => side.insurance === undefined && side.failureMode === 'fail-closed');
  if (closed >= 0) {
    const side = internals[closed]!;
    const wait = side.breaker?.nextRetryInMs(side.clock()) || 1000;
    const decisions: (Decision | undefined)[] = new Array(n).fill(undefined);
    decisions[closed] = side.decision(
      { allowed: false, remaining: 0, resetMs: wait, retryAfterMs: wait, emptyMs: wait },
      'fail-closed',
      plan.operations[closed]!.policy,
    );
    return combine(decisions, false, closed);
  }
  for (let i = 0; i < n; i++) {
    const insurance = internals[i]!.insurance;
    // The insurance option was checked to be a RateLimiter (LimiterCore is what the options see of one).
    if (insurance !== undefined) insured.push({ limiter: insurance as RateLimiter, key: parts[i]!.key, cost: parts[i]!.cost ?? 1 });
  }
  const covered = insured.length === 0 ? undefined : await consumeAll(insured);
  const decisions: (Decision | undefined)[] = new Array(n);
  let k = 0;
  for (let i = 0; i < n; i++) {
    const side = internals[i]!;
    if (side.insurance !== undefined) {
      const decision = covered!.parts[k++];
      decisions[i] = decision === undefined ? undefined : { ...decision, source: 'insurance' };
    } else {
      const policy = plan.operations[i]!.policy;
      decisions[i] = side.decision(
        { allowed: true, remaining: capacityOf(policy), resetMs: 0, retryAfterMs: 0, emptyMs: 0 },
        'fail-open',
        policy,
      );
    }
  }
  const allowed = covered === undefined || covered.allowed;
  return combine(decisions, allowed, decisiveIndex(decisions, allowed));
}
