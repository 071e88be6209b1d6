/** LocalFirstStore: Redis-backed fixed-window limits decided in process memory from leased quota. */
/**
 * The limits are decided from leased slices of each key's quota, with blocks broadcast over pub/sub.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../../../core/clock.js';
import { ErrorCode, FloodgateError, toStoreError } from '../../../core/errors.js';
import { sameFamily, samePolicy, type Operation, type Outcome, type Policy } from '../../../core/policy.js';
import type { Store } from '../../store.js';
import type { SlotAcquisition } from '../../../core/slots.js';
import type { ClientKind } from '../client-adapter.js';
import { RedisStore } from '../redis-store.js';
import { conflictError } from '../../policy-bindings.js';
import { publishCall, subscribe, type MessageKind } from './broadcast.js';
import type { Subscription } from './subscription.js';
import { Hearing } from './hearing.js';
import { admitted, closedError, decideInMemory, rejectAll, newEntry, sweepEntries, type Entry } from './lease.js';
import { deadlineWaiter } from './deadline.js';
import { resolveLocalFirstOptions, type LocalFirstStoreOptions, type LocalFirstStats } from './local-first-options.js';
import { TurnPipeline, type PipelineCall } from '../turn-pipeline.js';
import { lapse, wantsTopUp } from '../../lease-core.js';
import { BoundedMap } from '../../../util/bounded-map.js';
import { consumeAllLeased, decideAllInMemory } from './composite.js';
import { applyControl, settleLeased } from './control.js';
import type { LocalFirstHost } from './host.js';
import { returnCall } from './lease-call.js';
import { Leasing } from './leasing.js';
/**
 * A {@link Store} that decides fixed-window consumes in process memory from
 * leases: a slice of a key's remaining quota that one atomic script call
 * takes from Redis (counting it as consumed there) and that the process then
 * spends locally until the Redis window ends, giving back what it did not
 * use. The sum of grants per Redis window never exceeds the limit and a
 * lease is never spent after its window, so no number of processes can
 * admit more than the limit per window. See docs/local-first.md.
 *
 * Exhausted and blocked keys are broadcast over Redis pub/sub, so every
 * process refuses them from memory; reset, reward and block broadcast too.
 * Peek, reward, penalty, block and reset, and every operation of the other
 * algorithms, go to Redis per call through an internal {@link RedisStore}.
 * So do concurrency slots: they are never leased, each acquire, release and
 * renew is one script call on Redis, exactly as on RedisStore.
 *
 * Failures reject with STORE_ERROR, STORE_TIMEOUT or CLOSED, as RedisStore's
 * do, so a RateLimiter's insurance and fail modes apply; a consume the
 * lease covers never waits on Redis and never fails.
 */
export class LocalFirstStore implements Store {
  /** @inheritDoc */
  readonly name = 'redis-local-first';
  /** The client library of `client`. */
  readonly clientKind: ClientKind;
  /** Call timeout in ms. */
  readonly timeoutMs: number;
  /** Bound on keys held in memory. */
  readonly maxKeys: number;
  /** The pub/sub channel. */
  readonly channel: string;
  /** Target lease duration in ms at the current demand. */
  readonly leaseMs: number;
  /** Largest share of the remaining quota per lease. */
  readonly maxShare: number;
  /** This store's id in broadcast messages. */
  readonly id = randomBytes(6).toString('base64url');
  private readonly inner: RedisStore;
  /** Its RedisStore's (the Cluster node serving a key's slot, on an ioredis Cluster): calls to Redis fail per node. */
  readonly failureScope?: (key: string) => string | undefined;
  private readonly clock: Clock | undefined;
  /** Keys held; an evicted one's waiters are still answered (the reply handler holds the entry), its lease given back. */
  private readonly entries: BoundedMap<string, Entry>;
  /** Keys put at the young end of `entries` so far (an entry's `placed` is this count then): how far a key is from eviction. */
  private placements = 0;
  /** Pairs of policies warned about as conflicting. */
  private readonly warned = new Set<string>();
  private readonly subscription: Subscription;
  private readonly sweeper: NodeJS.Timeout;
  /** The turn's script calls, sent as one pipeline. */
  private readonly pipeline: TurnPipeline<PipelineCall>;
  /** The lease calls, and their smoothed round trip. */
  private readonly leasing: Leasing;
  /** Whether the pub/sub subscription is confirmed, and what is given up when it was not. */
  private readonly hearing: Hearing;
  private closed = false;
  private readonly host: LocalFirstHost;
  private readonly counters = { localDecisions: 0, leaseCalls: 0, returnCalls: 0, unitsLeased: 0, unitsReturned: 0, maxGrant: 0 };

  /** @param options - see {@link LocalFirstStoreOptions}; invalid ones throw a FloodgateError. */
  constructor(options: LocalFirstStoreOptions) {
    const o = resolveLocalFirstOptions(options);
    this.clientKind = o.adapter.kind;
    this.timeoutMs = o.timeoutMs;
    this.maxKeys = o.maxKeys;
    this.leaseMs = o.leaseMs;
    this.maxShare = o.maxShare;
    this.channel = o.channel;
    this.clock = o.clock;
    this.pipeline = new TurnPipeline({
      adapter: o.adapter,
      timeoutMs: o.timeoutMs,
      downError: (down) => new FloodgateError(ErrorCode.STORE_ERROR, `${this.name} store failed: ${down}.`),
      timeoutMessage: `${this.name} store: Redis did not answer within ${o.timeoutMs} ms; raise timeoutMs if Redis is slow but healthy.`,
    });
    this.entries = new BoundedMap(o.maxKeys, (key, entry) => this.giveBack(key, entry));
    this.inner = new RedisStore({
      client: o.client,
      timeoutMs: this.timeoutMs,
      ...(o.clock ? { clock: o.clock } : {}),
      ...(o.crossSlot ? { crossSlot: o.crossSlot } : {}),
    });
    const scopeOf = this.inner.failureScope;
    if (scopeOf !== undefined) this.failureScope = scopeOf;
    this.hearing = new Hearing({
      id: this.id,
      entries: this.entries,
      closed: () => this.closed,
      readTime: () => this.readTime(),
      touch: (key, t) => this.touch(key, t),
      giveBack: (key, e) => this.giveBack(key, e),
    });
    this.subscription = subscribe(o.subscriber, o.ownedSubscriber, o.channel, {
      message: (text) => this.hearing.message(text),
      up: () => this.hearing.up(),
      down: () => this.hearing.down(),
    });
    this.leasing = new Leasing({
      name: this.name,
      id: this.id,
      channel: o.channel,
      leaseMs: o.leaseMs,
      shareMilli: o.shareMilli,
      clocked: o.clock !== undefined,
      pipeline: this.pipeline,
      counters: this.counters,
      closed: () => this.closed,
      live: () => this.hearing.live,
      readTime: () => this.readTime(),
      now: () => this.now(),
      giveBack: (key, e) => this.giveBack(key, e),
      control: (op) => this.control(op),
    });
    this.sweeper = setInterval(() => this.sweep(), Math.max(10, this.leaseMs));
    this.sweeper.unref();
    this.host = {
      entries: this.entries,
      inner: this.inner,
      readTime: () => this.readTime(),
      touch: (key, t) => this.touch(key, t),
      giveBack: (key, e) => this.giveBack(key, e),
      decided: (e, cost, t) => this.decided(e, cost, t),
      topUpIfLow: (key, e, t) => {
        if (!e.inFlight && this.hearing.live && wantsTopUp(e, t, 4, this.leasing.rttMs)) this.leasing.send(key, e);
      },
      leaseAfter: (key, e, cost, t) => {
        e.demand += cost;
        e.lastUse = t;
        // Without a live subscription a lease holds no surplus, so a top-up would bring nothing.
        if (e.units === 0 && !e.inFlight && this.hearing.live) this.leasing.send(key, e);
      },
      leaseAnswered: (e) =>
        new Promise<void>((resolve) => {
          if (!e.inFlight) return resolve();
          const timer = setTimeout(resolve, this.timeoutMs);
          (e.onAnswered ??= []).push(() => {
            clearTimeout(timer);
            resolve();
          });
        }),
      conflict: (op) => this.conflict(op),
      flush: () => this.pipeline.flushNow(),
      publish: (kind, ms, key) => this.publish(kind, ms, key),
    };
  }

  /**
   * Consumes every operation's amount or none. Decided in memory when every
   * part is a fixed-window key whose lease covers its cost (or one is refused
   * by a block or exhausted mark heard earlier); else the whole composite
   * goes to Redis as one script call, after the parts' leases are given back.
   */
  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    if (this.closed) return Promise.reject(closedError());
    return consumeAllLeased(this.host, operations);
  }

  /** {@link consumeAll} when memory can decide it alone; undefined (nothing spent) when Redis must. Never throws. */
  consumeAllNow(operations: readonly Operation[]): Outcome[] | undefined {
    const t = this.closed ? undefined : this.readTime();
    return typeof t === 'number' ? decideAllInMemory(this.host, operations, t) : undefined;
  }

  /** Concurrency slots are not leased: each call goes to Redis unchanged (RedisStore.acquireSlot), so they hold across hosts as there. */
  acquireSlot(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition> {
    return this.closed ? Promise.reject(closedError()) : this.inner.acquireSlot(key, limit, owner, ttlMs);
  }
  /** Goes to Redis unchanged, as {@link acquireSlot}. */
  releaseSlot(key: string, owner: string): Promise<boolean> {
    return this.closed ? Promise.reject(closedError()) : this.inner.releaseSlot(key, owner);
  }
  /** Goes to Redis unchanged, as {@link acquireSlot}. */
  renewSlot(key: string, owner: string, ttlMs: number): Promise<boolean> {
    return this.closed ? Promise.reject(closedError()) : this.inner.renewSlot(key, owner, ttlMs);
  }

  /** A snapshot of the store's counters. */
  stats(): LocalFirstStats {
    return { ...this.counters, keys: this.entries.size, live: this.hearing.live };
  }

  /** @inheritDoc */
  apply(operation: Operation): Promise<Outcome> {
    if (this.closed) return Promise.reject(closedError());
    if (operation.policy.algorithm !== 'fixed-window') return this.inner.apply(operation);
    const conflict = this.conflict(operation);
    if (conflict !== undefined) return Promise.reject(conflict);
    if (operation.kind === 'consume') return this.consume(operation);
    return this.control(operation);
  }

  /**
   * Gives every lease back (waiting up to `timeoutMs` for Redis), rejects
   * what still waits with CLOSED, and unsubscribes. Does not quit `client`
   * or a `subscriber` that was passed in. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    for (const [key, entry] of this.entries) this.giveBack(key, entry);
    this.pipeline.flushNow();
    await this.pipeline.drained();
    for (const entry of this.entries.values()) rejectAll(entry, closedError());
    this.entries.clear();
    await this.inner.close();
    await this.subscription.close();
  }

  /**
   * CONFLICTING_OPTIONS when the key's usage under another policy still
   * matters here (its window is open, its lease or block held, or consumes
   * wait on it), as RedisStore and the cluster store refuse: limiters whose
   * prefixes collide must not share one counter silently.
   */
  private conflict(op: Operation): FloodgateError | undefined {
    const e = this.entries.get(op.key);
    if (e === undefined || e.policy === undefined || e.policy === op.policy || sameFamily(e.policy, op.policy)) return undefined;
    // The operation reports the clock's failure itself.
    const t = this.readTime();
    if (t instanceof FloodgateError) return undefined;
    const inUse = e.endsBy > t || e.units > 0 || e.blockedUntil > t || e.waiters.length > 0 || e.inFlight;
    return inUse ? conflictError(op.key, e.policy, op.policy, this.warned) : undefined;
  }

  /** The store's time now, or the clock's failure as a store error. */
  private readTime(): number | FloodgateError {
    try {
      return this.now();
    } catch (error) {
      return toStoreError(error, this.name);
    }
  }

  private now(): number {
    return this.clock ? this.clock() : performance.now();
  }

  /**
   * {@link apply}, answered synchronously when this process can decide alone:
   * a fixed-window consume the lease in hand covers, or one that a block or
   * exhausted mark heard earlier refuses. Undefined, with nothing applied,
   * when Redis must be asked (no lease, not enough units, a key not seen
   * yet, another algorithm or operation, a closed store): then call `apply`.
   * Never throws.
   */
  applyNow(operation: Operation): Outcome | undefined {
    if (this.closed || operation.policy.algorithm !== 'fixed-window') return undefined;
    if (operation.kind === 'peek') return this.peekLease(operation);
    if (operation.kind !== 'consume') return undefined;
    const e = this.entries.get(operation.key);
    // A new key needs a lease call.
    if (e === undefined) return undefined;
    if (e.policy !== operation.policy) {
      // A key known only from a mark holds no lease, so it takes the policy as consume would; a key
      // leased under another policy must hand its lease back first, which consume does.
      if (e.policy === undefined) e.policy = operation.policy;
      else if (!samePolicy(e.policy, operation.policy)) return undefined;
    }
    // apply reports the clock's failure as a store error.
    const t = this.readTime();
    if (t instanceof FloodgateError) return undefined;
    const outcome = this.decide(operation.key, e, operation.amount, operation.policy, t);
    // Most recently used, as consume's touch does, so a hot key is never the one evicted.
    if (outcome !== undefined) this.youngest(operation.key, e);
    return outcome;
  }

  /**
   * A peek answered from the lease held for the key's current window, as a
   * consume decided from it reports the key (Redis's count at the last grant
   * and the lease's units): a composite that another part's in-memory block
   * refused reads its other parts this way rather than asking Redis. Undefined
   * without such a lease (then `apply` asks Redis).
   */
  private peekLease(operation: Operation): Outcome | undefined {
    const e = this.entries.get(operation.key);
    if (e === undefined || e.policy === undefined || (e.policy !== operation.policy && !samePolicy(e.policy, operation.policy)))
      return undefined;
    const t = this.readTime();
    if (t instanceof FloodgateError) return undefined;
    lapse(e, t);
    return e.units > 0 && e.blockedUntil <= t ? admitted(e, t) : undefined;
  }

  /** A reservation's give-back or excess settled in the lease held for the key's window, without Redis (settleLeased); undefined (nothing applied) when Redis must take it. */
  settleNow(operation: Operation): Outcome | undefined {
    return this.closed ? undefined : settleLeased(this.host, operation, this.hearing.live);
  }

  private consume(op: Operation): Promise<Outcome> {
    const t = this.readTime();
    if (t instanceof FloodgateError) return Promise.reject(t);
    const e = this.touch(op.key, t);
    if (e.policy !== op.policy && (e.policy === undefined || !samePolicy(e.policy, op.policy))) {
      // The key's policy changed (an override) or another limiter took it over: the lease was sized and
      // the exhausted mark decided under the old limit, so hand the units back and decide anew in Redis.
      if (e.policy !== undefined) {
        this.giveBack(op.key, e);
        e.exhaustedUntil = 0;
      }
      e.policy = op.policy;
    }
    const decided = this.decide(op.key, e, op.amount, op.policy, t);
    if (decided !== undefined) return Promise.resolve(decided);
    e.demand += op.amount;
    e.lastUse = t;
    return new Promise<Outcome>((resolve, reject) => {
      e.waiters.push(deadlineWaiter(e, op.amount, this.timeoutMs, this.name, resolve, reject));
      // Consumes that find no units share one call: the one in flight (a lease or a top-up) serves them first.
      if (!e.inFlight) this.leasing.send(op.key, e);
    });
  }

  /**
   * Decides a consume of `cost` on `e` from memory (see decideInMemory), counts
   * it when decided, and tops a hot key's lease up before it runs dry.
   */
  private decide(key: string, e: Entry, cost: number, policy: Policy, t: number): Outcome | undefined {
    const outcome = decideInMemory(e, cost, policy, t);
    if (outcome === undefined) return undefined;
    this.decided(e, cost, t);
    // Top up before the lease runs dry, so a hot key's consumes never wait for a round trip; but not
    // when the reply would come after the deadline: its units would lapse on arrival, and consumes
    // queued behind it would wait a second round trip for the next window's lease.
    if (outcome.allowed && !e.inFlight && this.hearing.live && wantsTopUp(e, t, 4, this.leasing.rttMs)) {
      this.leasing.send(key, e);
    }
    return outcome;
  }

  /** Counts a consume decided from memory: in the key's demand (which sizes its next slice) and in the stats. */
  private decided(e: Entry, cost: number, t: number): void {
    e.demand += cost;
    e.lastUse = t;
    this.counters.localDecisions++;
  }

  /** Peek, reward, penalty, block and reset: applied by Redis, then broadcast and mirrored locally (control.ts). */
  private control(op: Operation): Promise<Outcome> {
    return applyControl(this.host, op);
  }

  /** Returns the entry's unspent units to their window (best effort), and forgets them. */
  private giveBack(key: string, e: Entry): void {
    const t = this.readTime();
    const call = returnCall(key, e, typeof t === 'number' ? t : undefined, this.clock !== undefined, this.channel, this.id, this.counters);
    if (call !== undefined) this.pipeline.push(call);
  }

  private publish(kind: MessageKind, ms: number, key: string): void {
    this.pipeline.push(publishCall({ kind, sender: this.id, ms, key }, this.channel));
  }

  /** The entry of `key`, created if needed, moved to the most recently used end; past maxKeys the oldest is given back and dropped. */
  private touch(key: string, t: number): Entry {
    let e = this.entries.get(key);
    if (e !== undefined) {
      this.youngest(key, e);
    } else {
      e = newEntry(t, this.leaseMs);
      e.placed = ++this.placements;
      this.entries.set(key, e);
    }
    return e;
  }

  /**
   * Keeps `key` (held as `e`) out of the older half of the table, where eviction takes from, moving it (delete, set)
   * only from there: at most `placements - e.placed` keys came after it. A move per decision churned the Map's table.
   */
  private youngest(key: string, e: Entry): void {
    if (this.placements - e.placed <= this.entries.size >>> 1) return;
    this.entries.delete(key);
    this.entries.set(key, e);
    e.placed = ++this.placements;
  }

  /** Gives back idle leases, drops lapsed ones and expired marks, and forgets idle keys. */
  private sweep(): void {
    const t = this.readTime();
    if (t instanceof FloodgateError) return;
    sweepEntries(this.entries, t, 2 * this.leaseMs, (key, e) => this.giveBack(key, e));
  }
}
