/** How the rate limit service counts a request's descriptors: enforced ones together, shadow and quota ones apart. */
/**
 * Enforced descriptors are one all-or-nothing decision; a check-only descriptor is over once its count is past its
 * limit; a quota descriptor's hits are counted even past it; with `countRefused`, so are a refused request's.
 */
import { consumeAll, isStoreFailure, type Decision, type LimitPart } from '../../index.js';
import { UNIT_SECONDS } from './rls-config.js';
import type { RecentCounts } from './rls-recent.js';
import {
  asItStands,
  fromChecker,
  fromDecision,
  MAX_UINT32,
  over,
  peekNow,
  rememberDecision,
  resetOf,
  status,
  type Counted,
  type RlsStatus,
} from './rls-status.js';

/** How refused requests count (`grpc.countRefused`). */
export interface CountOptions {
  /** True: a refused request's hits are still counted, as envoyproxy/ratelimit counts them by default. */
  readonly countRefused: boolean;
  /** What counters had left when last seen: the statuses of parts a refusal left unread come from it (see rls-recent.ts). */
  readonly recent?: RecentCounts | undefined;
}

/** One counter of a request: its descriptors (one counter named twice counts both costs in one part). */
interface Group {
  readonly part: LimitPart & { cost: number };
  readonly members: Counted[];
}

/**
 * A check-only descriptor (`hits_addend` 0): over once its count is past the limit, as envoyproxy/ratelimit decides
 * (a count exactly at the limit is OK). Without a checker (the algorithm extension), an enforced one is OK as it
 * stands and a shadow or quota one is over when one more unit would not fit.
 */
async function checked(c: Counted, enforced: boolean): Promise<RlsStatus> {
  if (c.checker !== undefined) {
    // Room for one more, read in the process (a local-first lease, the memory store): not past the limit, no store call.
    const now = peekNow(c);
    if (now?.allowed === true) return status('OK', 'ok', Math.min(MAX_UINT32, now.remaining), resetOf(c, now), c.shape);
    return fromChecker(c, await c.checker.peek(c.key));
  }
  return enforced ? asItStands(c) : fromDecision(c, await c.limiter.peek(c.key));
}

/** Counts `g`'s hits even past its limit; `refused` tells whether its part was the one that refused the request. */
async function countPast(g: Group, refused: boolean, statuses: RlsStatus[]): Promise<void> {
  const first = g.members[0]!;
  const checker = first.checker;
  const d: Decision = await (checker ?? first.limiter).penalty(g.part.key, g.part.cost);
  for (const c of g.members) {
    // Without a checker a count exactly at the limit cannot be told from one past it: only the refusing part is over.
    statuses[c.index] =
      checker !== undefined
        ? fromChecker(c, d)
        : refused || d.allowed
          ? fromDecision(c, d)
          : status('OK', 'ok', 0, c.alignedResetMs, c.shape);
  }
}

/**
 * Enforced descriptors: all of them admitted and counted, or none counted (unless `countRefused`).
 * @param alreadyOver - an enforced descriptor is over without a store call (see plan in rls-decide.ts), so the request
 *   is refused: the others are only looked at, as a refused composite spends nothing
 */
export async function decideEnforced(
  counted: readonly Counted[],
  alreadyOver: boolean,
  statuses: RlsStatus[],
  o: CountOptions,
): Promise<void> {
  if (counted.length === 0) return;
  // hits_addend 0 checks without counting. One counter named twice in a request counts both costs in one part
  // (consumeAll refuses a counter named twice).
  const checks: Array<Promise<unknown>> = [];
  const groups: Group[] = [];
  for (const c of counted) {
    if (c.cost === 0) {
      checks.push(checked(c, true).then((s) => (statuses[c.index] = s)));
      continue;
    }
    const group = groups.find((g) => g.part.limiter === c.limiter && g.part.key === c.key);
    if (group === undefined) groups.push({ part: { limiter: c.limiter, key: c.key, cost: c.cost }, members: [c] });
    else {
      // hits_addend may be up to 2^53 - 1 each: the sum stays a whole number a limiter takes (it is over either way).
      group.part.cost = Math.min(group.part.cost + c.cost, Number.MAX_SAFE_INTEGER);
      group.members.push(c);
    }
  }
  if (checks.length === 0) return decideGroups(groups, alreadyOver, statuses, o);
  await Promise.all([...checks, decideGroups(groups, alreadyOver, statuses, o)]);
}

async function decideGroups(groups: readonly Group[], alreadyOver: boolean, statuses: RlsStatus[], o: CountOptions): Promise<void> {
  if (groups.length === 0) return;
  const tooBig = groups.find((g) => g.part.cost > g.members[0]!.shape.limit.requestsPerUnit);
  if (alreadyOver || tooBig !== undefined) {
    if (o.countRefused) {
      await Promise.all(groups.map((g) => countPast(g, g === tooBig, statuses)));
      return;
    }
    for (const g of groups) {
      for (const c of g.members)
        statuses[c.index] =
          g === tooBig ? over(c.shape, false, c.alignedResetMs ?? UNIT_SECONDS[c.unit] * 1000) : await asItStands(c, o.recent);
    }
    return;
  }
  const decision = await consumeAll(groups.length === 1 ? [groups[0]!.part] : groups.map((g) => g.part));
  if (!decision.allowed && o.countRefused) {
    // As envoyproxy/ratelimit counts by default: every descriptor of a refused request, the refusing one past its limit.
    await Promise.all(groups.map((g, i) => countPast(g, decision.parts[i]?.allowed === false, statuses)));
    return;
  }
  for (let i = 0; i < groups.length; i++) {
    const d = decision.parts[i];
    // A part another part's refusal left unconsulted spent nothing: it is reported as it stands.
    for (const c of groups[i]!.members) {
      if (d === undefined) statuses[c.index] = await asItStands(c, o.recent);
      else {
        rememberDecision(c, d, o.recent);
        statuses[c.index] = fromDecision(c, d);
      }
    }
  }
}

/** A shadow or quota descriptor counts on its own: its refusal must not keep the enforced ones from counting. */
export async function decideApart(c: Counted, statuses: RlsStatus[], o: CountOptions): Promise<void> {
  try {
    statuses[c.index] = await apart(c, o);
  } catch (error) {
    if (!isStoreFailure(error)) throw error;
    // A shadow descriptor never refuses: a store that failed under it leaves the answer OK.
    statuses[c.index] = status('OK', 'store_error', 0, c.alignedResetMs, c.shape);
  }
}

async function apart(c: Counted, o: CountOptions): Promise<RlsStatus> {
  if (c.cost === 0) return checked(c, false);
  // A quota descriptor's hits are counted even past its limit, as envoyproxy/ratelimit counts them (with or without
  // its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT): a token budget debited after the response went out records what
  // was used, so the next check-only request finds it over.
  if (c.quota && c.checker !== undefined) return fromChecker(c, await c.checker.penalty(c.key, c.cost));
  if (c.cost > c.shape.limit.requestsPerUnit) {
    // Never admitted; reached only to be counted anyway (countRefused: see plan in rls-decide.ts).
    await (c.checker ?? c.limiter).penalty(c.key, c.cost);
    return over(c.shape, c.shadow, c.alignedResetMs ?? UNIT_SECONDS[c.unit] * 1000);
  }
  const d = await c.limiter.consume(c.key, c.cost);
  // Refused and counted anyway: past its limit, so still over.
  if (!d.allowed && o.countRefused) await (c.checker ?? c.limiter).penalty(c.key, c.cost);
  return fromDecision(c, d);
}
