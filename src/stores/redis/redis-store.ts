/** RedisStore: the four algorithms as atomic Lua scripts on Redis or Redis Cluster. */
/**
 * The calls of one event-loop turn are coalesced per key and pipelined.
 */
import { windowArgument } from '../../core/calendar-window.js';
import type { Clock } from '../../core/clock.js';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError, toStoreError } from '../../core/errors.js';
import { ALGORITHMS, limitArgument, OP_CODE, samePolicy, type Operation, type Outcome, type Policy } from '../../core/policy.js';
import { invalid, MAX_TIMER_MS, wholeNumber } from '../../core/validate.js';
import type { Store } from '../store.js';
import { compositeCall, crossSlotError, unsupportedOperation } from './composite-call.js';
import { consumeAcrossSlots, slotGroups } from './cross-slot.js';
import { adaptStoreClient } from './clients.js';
import { isClusterKind, type ClientKind, type RedisAdapter, type RedisClient } from './client-adapter.js';
import { PolicyBindings } from '../policy-bindings.js';
import { redisKeys } from './key-names.js';
import { keySlot } from './key-slot.js';
import { LUA_SCRIPTS, type LuaScript } from './lua/scripts.generated.js';
import { TurnPipeline, type PipelineCall } from './turn-pipeline.js';
import { slotCallError, type SlotAcquisition } from '../../core/slots.js';
import { decodeAcquisition, decodeFlag, slotCall, type SlotOperation } from './slot-calls.js';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * The client: an ioredis (5 or later) `Redis` or `Cluster`, a node-redis
   * (4 or later) client (`createClient`) or cluster (`createCluster`), or a
   * valkey-glide (2.3 or later) `GlideClient` or `GlideClusterClient`, already
   * connected. The store never connects, quits or reconfigures it.
   */
  client: RedisClient;
  /**
   * How long the operations of one flush wait for Redis before they reject
   * with STORE_TIMEOUT, in ms. Default 500. Keep it well below your request
   * timeout: a limiter with `insurance` answers from memory after it.
   */
  timeoutMs?: number;
  /**
   * Time source. By default the scripts read Redis's own clock (`TIME`), so
   * hosts with skewed clocks still agree. With a clock, each operation
   * carries the clock's time instead; tests use this to drive Redis with a
   * ManualClock. Redis then expires keys by its own time, so key TTLs are
   * only garbage collection, at least one minute.
   */
  clock?: Clock;
  /**
   * On Redis Cluster, what `consumeAll` does with keys in different slots
   * (one script can only touch one slot). `'reject'` (default): reject with
   * CROSS_SLOT before anything is sent, so every composite that runs is
   * atomic. `'split'`: decide each slot's parts atomically, all slots at
   * once, and reward what admitting slots spent when one refuses: never
   * over a limit, but another request may be refused on those units for
   * about one round trip. Ignored on a single node.
   */
  crossSlot?: 'reject' | 'split';
}

const OPTION_NAMES = ['client', 'timeoutMs', 'clock', 'crossSlot'] as const;
const CROSS_SLOT_MODES = ['reject', 'split'] as const;
/** Operations per script call: a bigger batch would hold Redis's single thread for too long. */
const MAX_OPS_PER_CALL = 500;
/** Integers per outcome in a script reply: allowed, remaining, resetMs, retryAfterMs, emptyMs. */
const OUTCOME_WIDTH = 5;

interface Waiter {
  resolve(outcome: Outcome): void;
  reject(error: FloodgateError): void;
}

/** The operations on one key under one policy that go in one script call, in arrival order. */
interface Batch extends PipelineCall {
  readonly policy: Policy;
  readonly args: string[];
  readonly waiters: Waiter[];
}

/**
 * A {@link Store} on Redis (single node or Cluster), through ioredis,
 * node-redis or valkey-glide.
 *
 * Each algorithm is one Lua script that implements `applyOperation` step for
 * step in the same integer arithmetic, so Redis decides exactly as the
 * memory store would. A key's state lives in the hash `{key}` (the sliding
 * log adds the list `{key}:l`); the hash tag keeps both in one Cluster slot.
 * A store key holding a `{tag}` of its own hashes by that tag instead, so
 * the keys of one composite can share a slot (see {@link redisKeys}).
 * Each key's TTL is the moment its state stops mattering; a forever block
 * has none.
 *
 * Calls are queued and flushed once per event-loop turn: all operations on
 * one key (under one policy) become one script call that applies them in
 * arrival order, and the calls for different keys go out together (one
 * pipeline on ioredis; node-redis, valkey-glide and clusters pipeline calls
 * issued in the same tick, and on glide, which may reorder requests in
 * flight, a call on a key waits for the one before it). Scripts are sent by
 * SHA; when Redis has lost them (restart, failover, SCRIPT FLUSH) they are
 * re-sent by text transparently.
 *
 * Failures reject with a {@link FloodgateError}: STORE_TIMEOUT when a flush
 * gets no reply within `timeoutMs` (a late reply is then ignored, but Redis
 * may still apply it), STORE_ERROR for a client or script error, or at once
 * while the client reports its connection down, and CLOSED after
 * {@link close}. Being limited is an Outcome, not an error.
 *
 * Like the cluster store's primary, the store remembers which policy last
 * used each key (the 10 000 most recent) for as long as that usage matters:
 * an operation on the same key under other options (limiters whose prefixes
 * collide) rejects with CONFLICTING_OPTIONS, with one process warning per
 * pair of policies, instead of silently sharing the counter.
 */
export class RedisStore implements Store {
  /** @inheritDoc */
  readonly name = 'redis';
  /** The client library the store detected. */
  readonly clientKind: ClientKind;
  /** The flush timeout in ms. */
  readonly timeoutMs: number;
  private readonly adapter: RedisAdapter;
  private readonly clock: Clock | undefined;
  /**
   * On an ioredis Cluster: the master (`host:port`) serving a store key's slot, as the client's slot map says now (see
   * Store.failureScope), so limiters open one breaker per node. Absent for the other clients, which fail as one.
   */
  readonly failureScope?: (key: string) => string | undefined;
  /** What consumeAll does with keys in different Cluster slots; see {@link RedisStoreOptions.crossSlot}. */
  readonly crossSlot: 'reject' | 'split';
  /**
   * The batch still open for more operations, per store key: this turn's, replaced by a new Map when the turn's calls
   * are taken. Not `clear()`ed: clearing a long-lived Map gives it a new table that its old one points to, and those
   * dead promoted tables keep each turn's young tables alive through scavenges (measured: 15 full collections and
   * 4.0 µs of CPU per call against 1 and 2.7 over 400 000 calls, 64 in flight).
   */
  private openBatches = new Map<string, Batch>();
  private readonly pipeline: TurnPipeline<PipelineCall>;
  private readonly bindings = new PolicyBindings();
  private closed = false;

  /** @param options - see {@link RedisStoreOptions}; invalid ones throw a FloodgateError. */
  constructor(options: RedisStoreOptions) {
    this.adapter = adaptStoreClient(options, 'RedisStore', OPTION_NAMES);
    const o = options;
    this.clientKind = this.adapter.kind;
    const timeoutMs = wholeNumber(o.timeoutMs ?? 500, 'RedisStore timeoutMs', {
      min: 1,
      max: MAX_TIMER_MS,
      code: ErrorCode.INVALID_DURATION,
      expected: `a whole number of milliseconds from 1 to ${MAX_TIMER_MS}`,
    });
    this.timeoutMs = timeoutMs;
    this.pipeline = new TurnPipeline<PipelineCall>({
      adapter: this.adapter,
      timeoutMs,
      downError: (down) => new FloodgateError(ErrorCode.STORE_ERROR, `redis store failed: ${down}.`),
      timeoutMessage: `redis store did not answer within ${timeoutMs} ms; raise RedisStore timeoutMs if Redis is slow but healthy.`,
      onTake: () => {
        if (this.openBatches.size > 0) this.openBatches = new Map();
      },
    });
    if (o.clock !== undefined && typeof o.clock !== 'function') {
      invalid(ErrorCode.INVALID_OPTIONS, 'RedisStore clock', 'a function returning ms', o.clock);
    }
    this.clock = o.clock;
    if (o.crossSlot !== undefined && !CROSS_SLOT_MODES.includes(o.crossSlot)) {
      invalid(ErrorCode.INVALID_OPTIONS, 'RedisStore crossSlot', `one of ${CROSS_SLOT_MODES.join(', ')}`, o.crossSlot);
    }
    this.crossSlot = o.crossSlot ?? 'reject';
    if (this.clientKind === 'ioredis-cluster') {
      // ioredis keeps `slots[slot]` = [master, ...replicas] as "host:port", refreshed after MOVED and failovers.
      const cluster = o.client as { slots?: unknown };
      this.failureScope = (key) => {
        const slots = cluster.slots;
        const nodes = Array.isArray(slots) ? (slots[keySlot(redisKeys(key).state)] as unknown) : undefined;
        return Array.isArray(nodes) && typeof nodes[0] === 'string' ? nodes[0] : undefined;
      };
    }
  }

  /** @inheritDoc */
  apply(operation: Operation): Promise<Outcome> {
    if (this.closed) return Promise.reject(closedError());
    const code = OP_CODE[operation.kind];
    const policy = operation.policy;
    if (!Object.hasOwn(OP_CODE, operation.kind) || typeof code !== 'number') {
      return Promise.reject(
        new FloodgateError(
          ErrorCode.INVALID_OPTIONS,
          `RedisStore cannot apply operation ${describeValue(operation.kind)}; known: ${Object.keys(OP_CODE).join(', ')}.`,
        ),
      );
    }
    if (!ALGORITHMS.includes(policy.algorithm)) {
      return Promise.reject(
        new FloodgateError(
          ErrorCode.INVALID_ALGORITHM,
          `RedisStore has no script for algorithm ${describeValue(policy.algorithm)}; known: ${ALGORITHMS.join(', ')}.`,
        ),
      );
    }
    let now: string | undefined;
    let t: number;
    try {
      // Read before touching any batch, so a throwing clock cannot leave one half-written.
      if (this.clock) {
        t = this.clock();
        now = String(t);
      } else {
        t = performance.now();
      }
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    const conflict = this.bindings.check(operation.key, policy, t);
    if (conflict !== undefined) return Promise.reject(conflict);
    return new Promise<Outcome>((answered, reject) => {
      const resolve = (outcome: Outcome): void => {
        this.bindings.bind(operation.key, policy, t, outcome.resetMs);
        answered(outcome);
      };
      let batch = this.openBatches.get(operation.key);
      if (batch === undefined || !samePolicy(batch.policy, policy) || batch.waiters.length >= MAX_OPS_PER_CALL) {
        // A new batch also takes over the key, so a later operation never jumps ahead of this one.
        batch = newBatch(operation.key, policy, this.clock !== undefined ? t : undefined);
        this.openBatches.set(operation.key, batch);
        this.pipeline.push(batch);
      }
      batch.args.push(String(code), String(operation.amount));
      if (now !== undefined) batch.args.push(now);
      batch.waiters.push({ resolve, reject });
    });
  }

  /**
   * Consumes every operation's amount or none, in one script call
   * (`applyComposite` in Lua): parts may differ in algorithm, limit, window
   * and block. Goes out with the turn's other calls, after those already
   * queued on the same keys. Fails as {@link apply} does; on Redis Cluster,
   * keys in different slots reject with CROSS_SLOT before anything is sent
   * (give the keys a common `{tag}`), or with `crossSlot: 'split'` are
   * decided one slot at a time (see {@link consumeAcrossSlots}).
   */
  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    if (this.closed) return Promise.reject(closedError());
    const unsupported = unsupportedOperation(operations);
    if (unsupported !== undefined) return Promise.reject(unsupported);
    if (isClusterKind(this.clientKind)) {
      if (this.crossSlot === 'split') {
        const groups = slotGroups(operations);
        if (groups.length > 1) return consumeAcrossSlots(this, operations, groups);
      } else {
        const crossSlot = crossSlotError(operations);
        if (crossSlot !== undefined) return Promise.reject(crossSlot);
      }
    }
    let t: number;
    try {
      t = this.clock ? this.clock() : performance.now();
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    for (const operation of operations) {
      const conflict = this.bindings.check(operation.key, operation.policy, t);
      if (conflict !== undefined) return Promise.reject(conflict);
    }
    return new Promise<Outcome[]>((resolve, reject) => {
      this.pipeline.push(
        compositeCall(operations, this.clock ? t : undefined, (error, reply) => {
          const outcomes = error != null ? toStoreError(error, 'redis') : decodeReply(reply, operations.length);
          if (outcomes instanceof FloodgateError) return reject(outcomes);
          for (let i = 0; i < outcomes.length; i++) {
            const o = operations[i]!;
            this.bindings.bind(o.key, o.policy, t, outcomes[i]!.resetMs);
          }
          resolve(outcomes);
        }),
      );
      // A later operation on one of these keys must queue behind the composite, not join an earlier batch.
      for (const operation of operations) this.openBatches.delete(operation.key);
    });
  }

  /**
   * Takes a concurrency slot (see SlotStore.acquireSlot) in one script call
   * on the key's slot set, a sorted set of owner ids scored by expiry: its
   * expired members are dropped, and the owner is added while fewer than
   * `limit` remain. Time is the store's clock when it has one, else Redis
   * TIME, so hosts with skewed clocks agree. Goes out with the turn's other
   * calls; fails as {@link apply} does.
   */
  acquireSlot(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition> {
    const bad = slotCallError('RedisStore', key, owner, ttlMs, limit);
    return bad ? Promise.reject(bad) : this.slot('acquire', key, [String(limit), owner, String(ttlMs)], decodeAcquisition);
  }

  /** Frees `owner`'s unexpired slot of `key` (see SlotStore.releaseSlot), in one script call. */
  releaseSlot(key: string, owner: string): Promise<boolean> {
    const bad = slotCallError('RedisStore', key, owner);
    return bad ? Promise.reject(bad) : this.slot('release', key, [owner], decodeFlag);
  }

  /** Extends `owner`'s unexpired slot of `key` (see SlotStore.renewSlot), in one script call. */
  renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const bad = slotCallError('RedisStore', key, owner, ttlMs);
    return bad ? Promise.reject(bad) : this.slot('renew', key, [owner, String(ttlMs)], decodeFlag);
  }

  /** Queues one slot script call for this turn's flush and decodes its reply. */
  private slot<T>(operation: SlotOperation, key: string, args: string[], decode: (reply: unknown) => T | FloodgateError): Promise<T> {
    if (this.closed) return Promise.reject(closedError());
    let now: number | undefined;
    try {
      now = this.clock?.();
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    return new Promise<T>((resolve, reject) => {
      this.pipeline.push({
        ...slotCall(operation, key, now, args),
        answer: (error, reply) => {
          const decoded = error != null ? toStoreError(error, 'redis') : decode(reply);
          if (decoded instanceof FloodgateError) reject(decoded);
          else resolve(decoded);
        },
      });
    });
  }

  /**
   * Rejects every queued and in-flight operation with CLOSED, and every later
   * one. Does not quit the client, which belongs to the caller. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pipeline.abort(closedError());
  }
}

/** A script call for operations on `key`; `clientTime` is the store clock's time, undefined to use Redis TIME. */
function newBatch(key: string, policy: Policy, clientTime: number | undefined): Batch {
  const keys = redisKeys(key);
  const script: LuaScript = LUA_SCRIPTS[policy.algorithm];
  // A calendar window's period ends come from this host's clock; the script picks by Redis's.
  const window = windowArgument(policy.windowMs, policy.calendar, clientTime ?? Date.now());
  return {
    script,
    keys: policy.algorithm === 'sliding-log' ? [keys.state, keys.log] : [keys.state],
    args: [limitArgument(policy), window, String(policy.blockMs), clientTime !== undefined ? '1' : '0'],
    policy,
    waiters: [],
    answer(error, reply) {
      const outcomes = error != null ? toStoreError(error, 'redis') : decodeReply(reply, this.waiters.length);
      if (outcomes instanceof FloodgateError) {
        for (const waiter of this.waiters) waiter.reject(outcomes);
      } else {
        this.waiters.forEach((waiter, i) => waiter.resolve(outcomes[i]!));
      }
    },
  };
}

/** -1 is how the scripts spell Infinity (blocked until unblocked). */
function ms(value: number): number {
  return value === -1 ? Infinity : value;
}

/** Turns a script reply into outcomes, or a STORE_ERROR when it has the wrong shape. */
function decodeReply(reply: unknown, count: number): Outcome[] | FloodgateError {
  if (!Array.isArray(reply) || reply.length !== count * OUTCOME_WIDTH) {
    return new FloodgateError(
      ErrorCode.STORE_ERROR,
      `redis store failed: the script answered ${Array.isArray(reply) ? `${reply.length} values` : describeValue(reply)} where ${count * OUTCOME_WIDTH} integers were expected.`,
    );
  }
  for (let o = 0; o < reply.length; o++) {
    // Number() because ioredis with stringNumbers: true answers integers as strings.
    if (!Number.isSafeInteger(Number(reply[o]))) {
      return new FloodgateError(
        ErrorCode.STORE_ERROR,
        `redis store failed: the script answered ${describeValue(reply[o])} where an integer was expected.`,
      );
    }
  }
  const outcomes: Outcome[] = new Array(count);
  for (let i = 0, o = 0; i < count; i++, o += OUTCOME_WIDTH) {
    outcomes[i] = {
      allowed: Number(reply[o]) === 1,
      remaining: Number(reply[o + 1]),
      resetMs: ms(Number(reply[o + 2])),
      retryAfterMs: ms(Number(reply[o + 3])),
      emptyMs: ms(Number(reply[o + 4])),
    };
  }
  return outcomes;
}

function closedError(): FloodgateError {
  return new FloodgateError(ErrorCode.CLOSED, 'RedisStore was closed; create a new store to keep limiting.');
}
