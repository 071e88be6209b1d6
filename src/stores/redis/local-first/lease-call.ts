/** The local-first lease call. */
/**
 * Its arguments (sized from a key's waiters and demand), its reply, and how a reply changes the key's entry and
 * answers its waiters.
 */
import { windowArgument } from '../../../core/calendar-window.js';
import { ErrorCode, FloodgateError } from '../../../core/errors.js';
import type { Outcome, Policy } from '../../../core/policy.js';
import type { ScriptCall } from '../client-adapter.js';
import type { PipelineCall } from '../turn-pipeline.js';
import { redisStateKey } from '../key-names.js';
import { LOCAL_FIRST_SCRIPTS } from '../lua/local-first.generated.js';
import { lapse, spendDeadline, wantedSlice } from '../../lease-core.js';
import { admitted, blocked, msUntil, type Entry, type Waiter } from './lease.js';
import { describeValue } from '../../../core/describe-value.js';
/** Where need and want (ARGV[7], ARGV[8] of lease-fixed-window.lua) sit in a lease call's args. */
const NEED_ARG = 6;
const WANT_ARG = 7;
/** Where the share cap (ARGV[9]) sits. */
const SHARE_ARG = 8;
/** Integers in a lease reply: granted, remaining, window ms left, block ms left, window end. */
const LEASE_WIDTH = 5;

/** A lease script reply: units granted, the window's remaining quota, ms left in the window and in a block, and the window's end (Redis time). */
export interface LeaseReply {
  granted: number;
  remaining: number;
  windowLeft: number;
  blockLeft: number;
  windowEnd: number;
}

/** Reads a lease script reply; a malformed one is a STORE_ERROR. */
export function parseLease(reply: unknown): LeaseReply | FloodgateError {
  if (!Array.isArray(reply) || reply.length !== LEASE_WIDTH) {
    return new FloodgateError(ErrorCode.STORE_ERROR, `redis-local-first store failed: the lease script answered ${describeValue(reply)}.`);
  }
  const v = reply.map(Number);
  if (!v.every(Number.isSafeInteger)) {
    return new FloodgateError(ErrorCode.STORE_ERROR, `redis-local-first store failed: the lease script answered ${describeValue(reply)}.`);
  }
  return { granted: v[0]!, remaining: v[1]!, windowLeft: v[2]!, blockLeft: v[3]!, windowEnd: v[4]! };
}

/** What sizes a lease when it is sent. */
export interface LeaseSizing {
  /** When the call is sent. */
  readonly now: number;
  /** Whether the pub/sub subscription is confirmed (without it no surplus is held). */
  readonly live: boolean;
  /** Smoothed lease round trip, in local ms. */
  readonly rttMs: number;
  /** Target lease duration at the current demand. */
  readonly leaseMs: number;
  /** The share cap in thousandths. */
  readonly shareMilli: number;
}

/** Writes a lease call's need and want from the key's waiters and demand as they are now; returns need. */
export function sizeLease(e: Entry, sizing: LeaseSizing, args: string[]): number {
  const t = sizing.now;
  lapse(e, t);
  const first = e.waiters[0];
  // A top-up needs nothing, so Redis never refuses (or blocks) on its account.
  const need = first === undefined ? 0 : Math.max(1, first.cost - e.units);
  let queued = -e.units;
  for (const w of e.waiters) {
    queued += w.cost;
    w.asked = true;
  }
  // Without a live subscription this process could miss a block, so it holds no surplus; nor when a
  // round trip outlasts a whole window, since every reply then comes after its lease's deadline.
  // A lease should outlast a few round trips, or the top-up would come too late.
  const surplus = sizing.live && e.policy !== undefined && sizing.rttMs < e.policy.windowMs;
  const want = surplus ? wantedSlice(e, need, queued, t, Math.max(sizing.leaseMs, 4 * sizing.rttMs)) : Math.max(need, queued);
  e.demand = 0;
  e.since = t;
  args[NEED_ARG] = String(need);
  args[WANT_ARG] = String(want);
  // The share cap keeps idle quota from piling up in one process; consumes already waiting park
  // nothing, and capping them would admit a few per round trip while the rest wait out timeoutMs.
  args[SHARE_ARG] = surplus ? String(sizing.shareMilli) : '1000';
  return need;
}

/**
 * Takes a lease reply into the entry: the grant, the window, and what it
 * says about exhaustion and blocks. `current` is true for the reply to the
 * call in flight, false for a late one (its call had timed out). True when
 * the reply says the key is blocked: its unspent units go back to Redis.
 */
export function absorbReply(
  e: Entry,
  sentAt: number,
  t: number,
  p: LeaseReply,
  current: boolean,
  clocked: boolean,
  counters: { unitsLeased: number; maxGrant: number },
): boolean {
  // A late reply may come after a newer one; from an older window than the lease held, its units have
  // lapsed. The reply to the call in flight, though, is Redis's word on the key's window now, even one
  // that looks older (Redis back empty on a clock behind, a failover to a host whose clock lags):
  // dropping it would drop every grant Redis counts, and leave the waiters waiting, call after call,
  // until Redis's window passes the one held.
  if (!current && p.windowEnd !== 0 && p.windowEnd < e.windowEnd) return false;
  if (p.windowLeft > 0) {
    if (e.windowEnd !== p.windowEnd) {
      // Another window: whatever is left of the lease of the one before has lapsed.
      e.units = 0;
      e.windowEnd = p.windowEnd;
      e.spendUntil = spendDeadline(sentAt, p.windowLeft, clocked);
      e.endsBy = t + p.windowLeft;
    } else {
      // Both are bounds of the same window's end: keep the tightest.
      e.spendUntil = Math.max(e.spendUntil, spendDeadline(sentAt, p.windowLeft, clocked));
      e.endsBy = Math.min(e.endsBy, t + p.windowLeft);
    }
  }
  if (p.blockLeft !== 0) {
    e.blockedUntil = p.blockLeft < 0 ? Infinity : t + p.blockLeft;
    e.remote = 0;
    // The window may outlive the block: the caller gives the unspent units back to it.
    return true;
  }
  if (p.granted > 0) {
    e.units += p.granted;
    e.lastGrant = p.granted;
    counters.unitsLeased += p.granted;
    if (p.granted > counters.maxGrant) counters.maxGrant = p.granted;
  }
  e.remote = p.remaining;
  e.exhaustedUntil = p.remaining <= 0 && p.windowLeft > 0 ? e.endsBy : 0;
  return false;
}

/**
 * Answers the waiters of a lease reply (not a block): admits those the units
 * cover and refuses those Redis could not. Returns the block to set (ms) when
 * the reply drained the window under a block duration, else 0.
 */
export function answerWaiters(e: Entry, t: number, parsed: LeaseReply, need: number): number {
  // A reply past the lease's deadline still admits the consumes its call counted: Redis took their
  // units inside the window when it ran the script, before this reply, as a per-request consume
  // would. Only the surplus lapses, and consumes that queued after the call was sent ask again.
  const late = t >= e.spendUntil;
  while (e.waiters.length > 0) {
    const w = e.waiters[0]!;
    if (e.units < w.cost || (late && !w.asked)) break;
    e.units -= w.cost;
    e.waiters.shift();
    w.resolve(admitted(e, t));
  }
  if (late) e.units = 0;
  if (e.waiters.length === 0) return 0;
  // A top-up asked for nothing, so its refusal says nothing about the waiters: they ask themselves.
  // With a block duration a refusal must reach Redis, which sets the block: drained waiters ask again,
  // unless the reply came late, when asking again would land in a later window (and queue them there
  // until they time out); then they are refused and the block is set by a block call, as Redis would have.
  const blockMs = e.policy?.blockMs ?? 0;
  const drained = parsed.granted > 0 && parsed.remaining <= 0 && (blockMs === 0 || late);
  if (need > 0 && (parsed.granted === 0 || drained)) {
    // Redis could not cover the first waiter: refuse it and every waiter that cannot fit either;
    // smaller ones that might still fit try again. Or the grant drained the window: the waiters
    // the call counted and it could not cover are refused now, as per-request consumes would be,
    // rather than queued into a later window while their deadline runs.
    const windowLeft = msUntil(e.endsBy, t);
    const fits = e.units + parsed.remaining;
    const remaining = Math.max(0, fits);
    const refusal: Outcome = {
      allowed: false,
      remaining,
      resetMs: windowLeft,
      retryAfterMs: windowLeft,
      emptyMs: remaining >= 1 ? 0 : windowLeft,
    };
    const blocks = drained && blockMs > 0;
    const answer = blocks ? blocked(blockMs, windowLeft) : refusal;
    const keep: Waiter[] = [];
    e.waiters.forEach((w, i) => {
      if (drained ? !w.asked || w.cost <= fits : i > 0 && w.cost <= fits) keep.push(w);
      else w.resolve(answer);
    });
    e.waiters = keep;
    if (blocks) {
      e.blockedUntil = t + blockMs;
      return blockMs;
    }
  }
  return 0;
}

/**
 * A call of the lease script (lease-fixed-window.lua) for `key` under
 * `policy`: ARGV[1..4] the policy (a calendar window's period ends
 * included) and whether the caller's clock is used,
 * then the operation (`'1'` lease, `'2'` return), the caller's time (`at`,
 * or 0 for Redis's), and the operation's own arguments in `rest`.
 */
export function leaseScriptCall(
  key: string,
  policy: Policy,
  at: number | undefined,
  rest: readonly string[],
): ScriptCall & { readonly args: string[] } {
  const args = [
    String(policy.limit),
    // A calendar window's period ends, from this host's clock (the script picks by Redis's).
    windowArgument(policy.windowMs, policy.calendar, at ?? Date.now()),
    String(policy.blockMs),
    at === undefined ? '0' : '1',
    rest[0]!,
    at === undefined ? '0' : String(at),
  ];
  for (let i = 1; i < rest.length; i++) args.push(rest[i]!);
  // The state key alone: the script touches no other (redisKeys would build the log and slot keys too).
  return { script: LOCAL_FIRST_SCRIPTS.lease, keys: [redisStateKey(key)], args };
}

/**
 * The call that returns `e`'s unspent units to their window, or undefined
 * when there is nothing to return (or the time is unknown, `t` undefined, or
 * the lease has lapsed). Forgets the units either way; counts the call and,
 * from its reply, the units Redis took back.
 */
export function returnCall(
  key: string,
  e: Entry,
  t: number | undefined,
  clientTime: boolean,
  channel: string,
  id: string,
  counters: { returnCalls: number; unitsReturned: number },
): PipelineCall | undefined {
  const units = e.units;
  e.units = 0;
  if (units <= 0 || e.policy === undefined || t === undefined || t >= e.spendUntil) return undefined;
  counters.returnCalls++;
  const call = leaseScriptCall(key, e.policy, clientTime ? t : undefined, ['2', String(units), String(e.windowEnd), '0', channel, id, key]);
  const count = (reply: unknown): void => {
    const n = Number(reply);
    if (Number.isSafeInteger(n)) counters.unitsReturned += n;
  };
  return { ...call, answer: (error, reply) => (error == null ? count(reply) : undefined), late: count };
}
