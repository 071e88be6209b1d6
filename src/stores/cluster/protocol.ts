/** The cluster store's wire protocol. */
/**
 * Message shapes, envelopes and the compact encodings of policies, operations and outcomes.
 */
import { ALGORITHMS, capacityOf, OP_CODE, type OperationKind, type Outcome, type Policy } from '../../core/policy.js';
import { checkPeriod, type CalendarUnit } from '../../core/calendar.js';
import { calendarLabel, longestPeriodMs, type CalendarSpec } from '../../core/calendar-window.js';

/**
 * Protocol version. Every message carries it under the `floodgate` property,
 * which is also the tag that tells floodgate's messages from any other IPC
 * traffic; a primary answers a different version with an error instead of
 * misreading it (a PM2 primary may run another release than the app).
 */
export const PROTOCOL_VERSION = 1;

/**
 * `topic` of the primary → worker envelope. It is the shape
 * `pm2.sendDataToProcessId` delivers (`{ id, topic, data }`), so a worker
 * reads replies the same way whoever its primary is.
 */
const TOPIC = 'floodgate';

/**
 * `type` of the worker → primary envelope. PM2's daemon forwards
 * `{ type, data }` messages to its bus under `type`, and `'process:msg'` is
 * the event a bus listener subscribes to; node:cluster and worker_threads
 * primaries simply unwrap it. One envelope means a worker never needs to know
 * whether PM2 runs it.
 */
export const PM2_MESSAGE_TYPE = 'process:msg';

/**
 * A policy on the wire: [index in ALGORITHMS, limit, windowMs, blockMs];
 * for a calendar window its unit, time zone and week start after them; for
 * a per-key override, last, its base's limit, window and block (the base
 * has the same algorithm and calendar).
 */
export type PolicyTuple = Array<number | string>;

/** Worker → primary: asks whether a primary is there. Idempotent, so it may be resent until answered. */
interface HelloMessage {
  readonly floodgate: number;
  readonly t: 'hello';
}

/**
 * Worker → primary: every operation a worker made in one event-loop turn.
 *
 * `o` holds four entries per operation: OP_CODE, index into `p`, full key,
 * amount. `n`, present when a store has a clock, holds each operation's time
 * (-1: use the primary's clock). `to` is the primary that answered the
 * handshake; a primary ignores batches addressed to another one, so two
 * primaries on one PM2 bus never both apply a batch.
 */
export interface BatchMessage {
  readonly floodgate: number;
  readonly t: 'batch';
  readonly id: number;
  readonly to?: string;
  readonly p: PolicyTuple[];
  readonly o: (number | string)[];
  readonly n?: number[];
  /**
   * 1 when the worker keeps known refusals (see {@link ResultMessage.h}).
   * Without it the primary sends no hints and has nothing to invalidate for
   * this worker, which is also how a worker of an older release is served.
   */
  readonly c?: 1;
  /**
   * Pairs [operation index, units wanted] of the lease operations
   * ({@link LEASE_CODE}) in `o`, whose amount is the units needed.
   */
  readonly w?: number[];
  /**
   * Pairs [first operation index, part count] of the composites
   * ({@link COMPOSITE_CODE}) in `o`: each is decided in one all-or-nothing step.
   */
  readonly a?: number[];
  /**
   * Triples [operation index, owner id, ttl ms] of the concurrency-slot
   * operations (SLOT_CODE in slot-call.ts) in `o`.
   */
  readonly s?: (number | string)[];
}

/**
 * Operation code of a lease, alongside OP_CODE's: a fixed-window consume of
 * `need` units (its amount; 0 for a top-up) that also takes up to the wanted
 * units (see {@link BatchMessage.w}), capped at a share of what remains, for
 * the worker to spend without asking. Its outcome is that of the consume of
 * everything granted (or of the refused consume of `need`), and the grant
 * travels in {@link ResultMessage.g}.
 */
export const LEASE_CODE = 64;

/**
 * Operation code of a part of a composite, alongside OP_CODE's: a consume
 * decided with the other parts its {@link BatchMessage.a} pair names, all or
 * nothing. A part may also appear in `w`: then, when the composite admits,
 * it takes up to the wanted units beyond its need as a lease does. A primary
 * that does not know the code fails the parts instead of splitting the
 * composite into separate consumes.
 */
export const COMPOSITE_CODE = 65;

/**
 * Longest lease a worker may ask for (ClusterStore `leaseMs`; public from
 * `floodgate/cluster`, so a config that sets it can check it): a lease covers
 * demand to come, and a minute of it is already far more than a window's share.
 */
export const MAX_LEASE_MS = 60_000;

/** Primary → worker: the answer to a hello. `id` names this primary instance. */
interface ReadyMessage {
  readonly floodgate: number;
  readonly t: 'ready';
  readonly id: string;
}

/**
 * Primary → worker: the outcomes of a batch, in order. `r` holds five
 * entries per operation: allowed (1, 0, or -1 when the operation failed and
 * `e` says why), remaining, resetMs, retryAfterMs, emptyMs. Infinity travels
 * as itself over structured clone and as `null` over JSON (node:cluster IPC),
 * which decoding maps back; no sentinel can collide with a real value.
 */
export interface ResultMessage {
  readonly floodgate: number;
  readonly t: 'result';
  readonly id: number;
  readonly r: (number | null)[];
  /** [operation index, error code, message] of each failed operation. */
  readonly e?: [number, string, string][];
  /**
   * Indexes, ascending, of the operations whose outcome the worker may keep
   * as a known refusal of its key for the outcome's `emptyMs` (only in
   * answer to a batch with `c: 1`). The primary remembers every key it
   * hinted and sends an {@link InvalidateMessage} to every worker it hinted
   * before anything could make that key admissible earlier.
   */
  readonly h?: number[];
  /**
   * Triples [operation index, units granted, window end on the primary's
   * clock] of the lease operations. Units beyond the operation's need are the
   * worker's to spend until the window ends, unless revoked.
   */
  readonly g?: number[];
}

/**
 * Primary → every worker it ever sent hints or leases: forget the known
 * refusals of keys `k` (a reward, penalty, block, reset or change of policy
 * touched them); drop the leases (and refusals) of keys `l` (a penalty,
 * block, reset or change of policy touched them); or, with `all: 1`, forget
 * and drop everything (the primary may have evicted a key).
 * Sent in the same turn as the change, before the answer to the batch that
 * made it, so on each channel it precedes every answer computed after it.
 */
export interface InvalidateMessage {
  readonly floodgate: number;
  readonly t: 'inv';
  readonly k?: string[];
  readonly l?: string[];
  readonly all?: 1;
}

/**
 * Primary → worker: a whole batch (or, without `id`, the handshake) failed.
 * Its shape never changes between versions, so a worker reads it whatever
 * version the primary speaks (that is how a version mismatch is reported).
 */
interface ErrorMessage {
  readonly floodgate: number;
  readonly t: 'error';
  readonly id?: number;
  readonly code: string;
  readonly message: string;
}

/** Anything a worker sends. */
export type WorkerMessage = HelloMessage | BatchMessage;
/** Anything a primary sends. */
export type PrimaryMessage = ReadyMessage | ResultMessage | ErrorMessage | InvalidateMessage;

/** The envelope around a worker's message. */
export interface WorkerEnvelope {
  readonly type: typeof PM2_MESSAGE_TYPE;
  readonly data: WorkerMessage;
}

/** The envelope around a primary's message (`id` is added by PM2 only). */
export interface PrimaryEnvelope {
  readonly topic: typeof TOPIC;
  readonly data: PrimaryMessage;
}

/** Wraps a worker message for sending. */
export function toPrimary(data: WorkerMessage): WorkerEnvelope {
  return { type: PM2_MESSAGE_TYPE, data };
}

/** Wraps a primary message for sending. */
export function toWorker(data: PrimaryMessage): PrimaryEnvelope {
  return { topic: TOPIC, data };
}

/** The worker message inside `value`, or undefined when it is someone else's traffic. */
export function openWorkerEnvelope(value: unknown): WorkerMessage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const envelope = value as { type?: unknown; data?: unknown };
  if (envelope.type !== PM2_MESSAGE_TYPE) return undefined;
  const data = envelope.data as { floodgate?: unknown } | null | undefined;
  return typeof data === 'object' && data !== null && data.floodgate !== undefined ? (data as WorkerMessage) : undefined;
}

/** The primary message inside `value`, or undefined when it is someone else's traffic. */
export function openPrimaryEnvelope(value: unknown): PrimaryMessage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const envelope = value as { topic?: unknown; data?: unknown };
  if (envelope.topic !== TOPIC) return undefined;
  const data = envelope.data as { floodgate?: unknown } | null | undefined;
  return typeof data === 'object' && data !== null && data.floodgate !== undefined ? (data as PrimaryMessage) : undefined;
}

/** Operation kinds by OP_CODE, for decoding. */
export const KIND_BY_CODE: readonly (OperationKind | undefined)[] = (() => {
  const kinds: (OperationKind | undefined)[] = [];
  for (const [kind, code] of Object.entries(OP_CODE)) kinds[code] = kind as OperationKind;
  return kinds;
})();

/**
 * Encodes a policy for the wire; an override carries its base's limit, window and block after its own. A token
 * bucket with a burst or initial tokens (itself or its base) carries both after its block, as whole numbers, and
 * its base's too.
 */
export function encodePolicy(policy: Policy): PolicyTuple {
  const tuple: PolicyTuple = [ALGORITHMS.indexOf(policy.algorithm), policy.limit, policy.windowMs, policy.blockMs];
  const c = policy.calendar;
  if (c !== undefined) tuple.push(c.unit, c.timeZone, c.weekStart);
  const base = policy.base;
  const bucket = hasBucket(policy) || (base !== undefined && hasBucket(base));
  if (bucket) tuple.push(capacityOf(policy), policy.initialTokens ?? capacityOf(policy));
  if (base !== undefined) tuple.push(base.limit, base.windowMs, base.blockMs);
  if (base !== undefined && bucket) tuple.push(capacityOf(base), base.initialTokens ?? capacityOf(base));
  return tuple;
}

function hasBucket(policy: Policy): boolean {
  return policy.burst !== undefined || policy.initialTokens !== undefined;
}

/**
 * The lengths a policy tuple can have: plain, calendar or bucket (4, 7, 6), each with an override's base (7, 10,
 * 11).
 */
export const POLICY_TUPLE_LENGTHS: readonly number[] = [4, 6, 7, 10, 11];

/** How many of a tuple's values are its own (the rest are an override's base): 7 calendar, 6 bucket, else 4. */
function ownLength(tuple: readonly unknown[]): number {
  if (typeof tuple[4] === 'string') return 7;
  return tuple.length === 6 || tuple.length === 11 ? 6 : 4;
}

/** An override tuple's base, as a tuple of its own: its numbers, then the calendar or bucket values. */
function baseTuple(tuple: readonly unknown[], own: number): unknown[] {
  return own === 6 ? [tuple[0], ...tuple.slice(own)] : [tuple[0], ...tuple.slice(own), ...tuple.slice(4, own)];
}

/** The fingerprint of a tuple's family: an override's tuple with its base's numbers in its own place; any other tuple's own. */
export function familyOf(tuple: readonly unknown[]): string {
  const own = ownLength(tuple);
  return tuple.length === own ? tuple.join(',') : baseTuple(tuple, own).join(',');
}

/** limit × window bound of the limiter, so a primary never runs arithmetic the algorithms do not promise to keep exact. */
const MAX_PRODUCT = 2 ** 50;

/**
 * Decodes and validates a policy tuple; undefined when malformed. The primary
 * checks because a worker may run another floodgate release than it does.
 */
export function decodePolicy(tuple: unknown): Policy | undefined {
  if (!Array.isArray(tuple) || !POLICY_TUPLE_LENGTHS.includes(tuple.length)) return undefined;
  const own = ownLength(tuple);
  if (tuple.length > own) {
    // An override: its own numbers, then its base's, under the same algorithm and calendar.
    if (tuple.length !== own + (own === 6 ? 5 : 3)) return undefined;
    const self = decodePolicy(tuple.slice(0, own));
    const base = decodePolicy(baseTuple(tuple, own));
    return self === undefined || base === undefined ? undefined : Object.freeze({ ...self, base });
  }
  const [a, limit, windowMs, blockMs, unit, timeZone, weekStart] = tuple as unknown[];
  const algorithm = typeof a === 'number' ? ALGORITHMS[a] : undefined;
  if (algorithm === undefined) return undefined;
  if (!isPositiveInteger(limit) || !isPositiveInteger(windowMs)) return undefined;
  if (!Number.isSafeInteger(blockMs) || (blockMs as number) < 0) return undefined;
  if (limit * windowMs > MAX_PRODUCT) return undefined;
  const policy = { algorithm, limit, windowMs, blockMs: blockMs as number };
  if (tuple.length === 4) return Object.freeze(policy);
  if (own === 6) return decodeBucket(policy, unit, timeZone);
  const calendar = decodeCalendar(unit, timeZone, weekStart);
  if (calendar === undefined || algorithm !== 'fixed-window' || windowMs !== longestPeriodMs(calendar.unit)) return undefined;
  return Object.freeze({ ...policy, calendar });
}

/** A token bucket's policy with its burst and initial tokens from the wire (as parseBucket leaves them); undefined when malformed. */
function decodeBucket(policy: Policy, burst: unknown, initial: unknown): Policy | undefined {
  if (policy.algorithm !== 'token-bucket' || !isPositiveInteger(burst) || !Number.isSafeInteger(initial)) return undefined;
  if ((initial as number) < 0 || (initial as number) > burst || burst * policy.windowMs > MAX_PRODUCT) return undefined;
  return Object.freeze({
    ...policy,
    ...(burst === policy.limit ? {} : { burst }),
    ...(initial === burst ? {} : { initialTokens: initial as number }),
  });
}

/** A calendar period from the wire, checked as the limiter checks its option; undefined when malformed (an unknown zone included). */
function decodeCalendar(unit: unknown, timeZone: unknown, weekStart: unknown): CalendarSpec | undefined {
  if (typeof unit !== 'string' || typeof timeZone !== 'string' || typeof weekStart !== 'number') return undefined;
  try {
    return Object.freeze(checkPeriod({ unit: unit as CalendarUnit, timeZone, weekStart }));
  } catch {
    return undefined;
  }
}

function isPositiveInteger(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

/** Appends an outcome's five numbers to `out`. */
export function pushOutcome(out: (number | null)[], outcome: Outcome): void {
  out.push(outcome.allowed ? 1 : 0, outcome.remaining, outcome.resetMs, outcome.retryAfterMs, outcome.emptyMs);
}

/** Reads the outcome at operation `index` of a result's `r`. */
export function readOutcome(r: readonly (number | null)[], index: number): Outcome {
  const base = index * 5;
  return {
    allowed: r[base] === 1,
    remaining: r[base + 1] ?? 0,
    resetMs: r[base + 2] ?? Infinity,
    retryAfterMs: r[base + 3] ?? Infinity,
    emptyMs: r[base + 4] ?? Infinity,
  };
}

/**
 * Operation kinds that may make a key admissible earlier than its last
 * refusal said (or change its numbers): a key's known refusal is forgotten
 * as soon as one of them is made, and the primary invalidates it everywhere.
 * Consume and peek never do: a refused consume spends nothing.
 */
export function invalidates(kind: OperationKind): boolean {
  return kind === 'reward' || kind === 'penalty' || kind === 'block' || kind === 'reset';
}

/**
 * Operation kinds after which units leased earlier must not be spent: they
 * refuse the key (penalty, block) or start its window over (reset). A reward
 * only adds units, so leases stay.
 */
export function revokesLeases(kind: OperationKind): boolean {
  return kind === 'penalty' || kind === 'block' || kind === 'reset';
}

/** The largest share of a key's remaining quota one lease takes beyond its need, so units stranded in a quiet worker stay few. */
export const LEASE_SHARE = 0.25;

/**
 * How long, in ms from the decision, every consume and peek of the key under
 * `policy` is sure to be refused without changing anything, barring the
 * operations {@link invalidates} names; 0 when not sure.
 *
 * A key with no unit left stays refused until one comes back (`emptyMs`):
 * later consumes are refused and spend nothing, and only time or an
 * invalidating operation changes that. With `policy.blockMs`, though, a
 * refused consume is not free: it blocks the key. So there only a state
 * proven blocked counts (a refused consume, or a block), because consumes
 * during a block change nothing; an exhausted but unblocked key must still
 * send its next consume to the primary, which sets the block.
 */
export function refusalMs(kind: OperationKind, policy: Policy, outcome: Outcome): number {
  if (outcome.remaining !== 0 || !(outcome.emptyMs > 0)) return 0;
  if (policy.blockMs > 0 && kind !== 'block' && !(kind === 'consume' && !outcome.allowed)) return 0;
  return outcome.emptyMs;
}

/** A short human description of a policy, for error messages. */
export function describePolicy(policy: Policy): string {
  const block = policy.blockMs > 0 ? `, block ${policy.blockMs} ms` : '';
  const per = policy.calendar ? calendarLabel(policy.calendar) : `${policy.windowMs} ms`;
  const burst = policy.burst === undefined ? '' : `, burst ${policy.burst}`;
  const initial = policy.initialTokens === undefined ? '' : `, initial tokens ${policy.initialTokens}`;
  return `${policy.algorithm} limit ${policy.limit} per ${per}${burst}${initial}${block}`;
}
