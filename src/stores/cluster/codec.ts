/** The cluster store's batch codec. */
/**
 * A turn's calls into one batch message, and batch, result and invalidation messages back into what their receiver
 * applies.
 */
import { OP_CODE, type Operation, type Policy } from '../../core/policy.js';
import {
  COMPOSITE_CODE,
  LEASE_CODE,
  PROTOCOL_VERSION,
  encodePolicy,
  type BatchMessage,
  type InvalidateMessage,
  type PolicyTuple,
  type ResultMessage,
} from './protocol.js';
import type { SlotCall } from './slot-call.js';

/** What {@link encodeBatch} reads of one call. */
export interface BatchCall {
  readonly operation: Operation;
  /** The caller's clock at call time, or -1 for the primary's clock. */
  readonly time: number;
  /** For a lease call: the units wanted (the operation's amount is the need). */
  readonly lease: { readonly want: number } | undefined;
  /** Whether the caller learns known refusals from the answer. */
  readonly remembers: boolean;
  /** For a part of a composite: its part count on the first part, 0 on the others. */
  readonly composite: number | undefined;
  /** For a concurrency-slot call: what it asks (its operation is only a carrier of the key). */
  readonly slot?: SlotCall;
}

/** The batch message of `calls`: each distinct policy sent once, operations flattened, the optional fields only when used. */
export function encodeBatch(id: number, to: string | undefined, calls: readonly BatchCall[]): BatchMessage {
  const indexOf = new Map<Policy, number>();
  const p: PolicyTuple[] = [];
  const o: (number | string)[] = [];
  const times: number[] = [];
  let wants: number[] | undefined;
  let groups: number[] | undefined;
  let slots: (number | string)[] | undefined;
  let timed = false;
  let remembers = false;
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    const { kind, key, amount, policy } = call.operation;
    times.push(call.time);
    if (call.time >= 0) timed = true;
    if (call.slot !== undefined) {
      // No policy: a slot's limit travels as its amount, its owner and ttl in `s`.
      o.push(call.slot.code, -1, key, call.slot.limit);
      (slots ??= []).push(i, call.slot.owner, call.slot.ttlMs);
      continue;
    }
    let index = indexOf.get(policy);
    if (index === undefined) {
      index = p.push(encodePolicy(policy)) - 1;
      indexOf.set(policy, index);
    }
    const code = call.composite !== undefined ? COMPOSITE_CODE : call.lease !== undefined ? LEASE_CODE : OP_CODE[kind];
    o.push(code, index, key, amount);
    if (call.lease !== undefined) (wants ??= []).push(i, call.lease.want);
    if (call.composite) (groups ??= []).push(i, call.composite);
    if (call.remembers) remembers = true;
  }
  return {
    floodgate: PROTOCOL_VERSION,
    t: 'batch',
    id,
    ...(to === undefined ? {} : { to }),
    p,
    o,
    ...(timed ? { n: times } : {}),
    ...(remembers ? { c: 1 as const } : {}),
    ...(wants ? { w: wants } : {}),
    ...(groups ? { a: groups } : {}),
    ...(slots ? { s: slots } : {}),
  };
}

/** A batch message, checked and read: the fields the primary applies, under their names. */
export interface BatchView {
  readonly id: number;
  /** The policy tuples, as sent. */
  readonly policies: readonly unknown[];
  /** Four entries per operation: code, policy index, key, amount (see OPERATION_WIDTH). */
  readonly operations: readonly unknown[];
  /** Each operation's time on the worker's clock, -1 for the primary's; undefined when none was sent. */
  readonly times: readonly unknown[] | undefined;
  /** Whether the worker keeps known refusals (so wants hints). */
  readonly wantsHints: boolean;
  /** Units wanted per lease operation index, from the `w` pairs; malformed pairs are skipped. */
  readonly wants: Map<number, number> | undefined;
  /** Part count per first operation index of a composite, from the `a` pairs; malformed pairs are skipped (their parts then fail). */
  readonly composites: Map<number, number> | undefined;
  /** [owner, ttl ms] per slot operation index, from the `s` triples (checked where applied). */
  readonly slots: Map<number, readonly unknown[]> | undefined;
}

/** Entries per operation in a batch's operation list. */
export const OPERATION_WIDTH = 4;

/** Reads a batch; undefined when it is malformed (the primary then answers an error). */
export function readBatch(message: BatchMessage): BatchView | undefined {
  const { id, p, o, n, w, a, s } = message;
  if (
    !Number.isSafeInteger(id) ||
    !Array.isArray(p) ||
    !Array.isArray(o) ||
    o.length % OPERATION_WIDTH !== 0 ||
    (w !== undefined && !Array.isArray(w)) ||
    (a !== undefined && !Array.isArray(a)) ||
    (s !== undefined && !Array.isArray(s)) ||
    (n !== undefined && (!Array.isArray(n) || n.length * OPERATION_WIDTH !== o.length))
  ) {
    return undefined;
  }
  return {
    id,
    policies: p,
    operations: o,
    times: n,
    wantsHints: message.c === 1,
    wants: w === undefined ? undefined : wantsOf(w),
    composites: a === undefined ? undefined : wantsOf(a),
    slots: s === undefined ? undefined : slotsOf(s),
  };
}

/** The [index, count] pairs of a batch's `w` (units wanted per lease) or `a` (parts per composite) as a map; malformed pairs are skipped. */
function wantsOf(w: readonly unknown[]): Map<number, number> {
  const wants = new Map<number, number>();
  for (let k = 0; k + 1 < w.length; k += 2) {
    const [index, want] = [w[k], w[k + 1]];
    if (Number.isSafeInteger(index) && Number.isSafeInteger(want) && (want as number) >= 0) wants.set(index as number, want as number);
  }
  return wants;
}

/** The [index, owner, ttl] triples of a batch's `s` as a map; triples without an integer index are skipped. */
function slotsOf(s: readonly unknown[]): Map<number, readonly unknown[]> {
  const slots = new Map<number, readonly unknown[]>();
  for (let k = 0; k + 2 < s.length; k += 3) if (Number.isSafeInteger(s[k])) slots.set(s[k] as number, [s[k + 1], s[k + 2]]);
  return slots;
}

/** A result message, read: each call's outcome or failure, the calls whose refusal the worker may replay, and lease grants. */
export interface ResultView {
  /** Per failed call index: its code and message. */
  readonly failures: Map<number, [string, string]> | undefined;
  /** The five outcome entries per call. */
  readonly outcomes: readonly (number | null)[];
  /** Ascending indexes of the calls whose refusal may be replayed. */
  readonly hints: readonly unknown[] | undefined;
  /** Units granted and the window end (primary clock) per lease call index; malformed triples are skipped. */
  readonly grants: Map<number, { readonly granted: number; readonly windowEnd: number }> | undefined;
}

/** Reads a result message (never throws: missing or malformed parts read as absent). */
export function readResult(message: ResultMessage): ResultView {
  let failures: Map<number, [string, string]> | undefined;
  if (Array.isArray(message.e)) {
    failures = new Map();
    for (const [index, code, text] of message.e) failures.set(index, [code, text]);
  }
  return {
    failures,
    outcomes: Array.isArray(message.r) ? message.r : [],
    hints: Array.isArray(message.h) ? message.h : undefined,
    grants: Array.isArray(message.g) ? grantsOf(message.g) : undefined,
  };
}

function grantsOf(g: readonly unknown[]): Map<number, { readonly granted: number; readonly windowEnd: number }> {
  const grants = new Map<number, { readonly granted: number; readonly windowEnd: number }>();
  for (let k = 0; k + 2 < g.length; k += 3) {
    const [index, granted, windowEnd] = [g[k], g[k + 1], g[k + 2]];
    if (Number.isSafeInteger(index) && Number.isSafeInteger(granted) && typeof windowEnd === 'number') {
      grants.set(index as number, { granted: granted as number, windowEnd });
    }
  }
  return grants;
}

/** An invalidation, read: forget everything, or the keys whose known refusals and whose leases to drop. */
export function readInvalidation(message: InvalidateMessage): { all: boolean; refusals: string[]; leases: string[] } {
  const strings = (list: unknown): string[] => (Array.isArray(list) ? list.filter((key): key is string => typeof key === 'string') : []);
  return { all: message.all === 1, refusals: strings(message.k), leases: strings(message.l) };
}
