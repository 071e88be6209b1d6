/** LocalFirstStore: Redis-backed fixed-window limits decided in process memory from leased slices of each key's quota, with blocks broadcast over pub/sub. */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../../../clock.js';
import { describe } from '../../../duration.js';
import { ErrorCode, FloodgateError, toStoreError } from '../../../errors.js';
import { samePolicy, type Operation, type Outcome, type Policy } from '../../../policy.js';
import { assertKnownOptions } from '../../../validate.js';
import type { Store } from '../../store.js';
import { adaptClient, type ClientKind, type RedisAdapter, type RedisClient, type ScriptCall } from '../clients.js';
import { redisKeys } from '../keys.js';
import { LOCAL_FIRST_SCRIPTS } from '../lua/local-first.generated.js';
import { RedisStore } from '../store.js';
import { conflictError } from '../bindings.js';
import { decodeMessage, encodeMessage, subscribe, type MessageKind, type Subscription } from './broadcast.js';
import { wantedSlice } from '../../lease-slice.js';
import { admitted, blocked, exhausted, msUntil, newEntry, type Entry, type Waiter } from './lease.js';
import { deadlineWaiter, spendDeadline } from './deadline.js';

/** Options of {@link LocalFirstStore}. */
export interface LocalFirstStoreOptions {
  /**
   * The command client: an ioredis `Redis` or `Cluster`, or a node-redis
   * v4/v5 client (`createClient`), connected. node-redis clusters are not
   * supported in local-first mode. The store never quits it.
   */
  client: RedisClient;
  /**
   * A client of the same kind for pub/sub, which the store subscribes to
   * `channel` (and unsubscribes on close, without quitting it). Default:
   * `client.duplicate()`, which the store opens and also closes.
   */
  subscriber?: RedisClient;
  /** How long a lease or other call waits for Redis before STORE_TIMEOUT, in ms. Default 500. */
  timeoutMs?: number;
  /** Most keys whose lease and marks are kept in memory; the least recently used is dropped (its lease given back). Default 10 000. */
  maxKeys?: number;
  /**
   * The pub/sub channel of block broadcasts. Stores that share counters must
   * share it; give unrelated applications on one Redis their own. Default
   * `"floodgate:local-first"`.
   */
  channel?: string;
  /**
   * Time source, as RedisStore's `clock`: with it the scripts use its time
   * instead of Redis's, and leases expire on it; tests drive it with a
   * ManualClock. Default: Redis's clock for windows and `performance.now()`
   * for lease deadlines.
   */
  clock?: Clock;
  /**
   * How many ms of this process's recent demand on a key one lease should
   * cover. Longer means fewer Redis calls and more quota held locally.
   * Default 100.
   */
  leaseMs?: number;
  /**
   * The largest share (0–1] of a key's remaining quota one lease may take, so
   * quota stranded in idle processes stays small. Default 0.25.
   */
  maxShare?: number;
}

/** Counters of a {@link LocalFirstStore}, for tests, metrics and the benchmark. */
export interface LocalFirstStats {
  /** Consumes answered from memory (lease, exhausted or blocked mark), without Redis. */
  localDecisions: number;
  /** Lease script calls sent. */
  leaseCalls: number;
  /** Return script calls sent. */
  returnCalls: number;
  /** Units granted by leases. */
  unitsLeased: number;
  /** Units Redis took back from returns. */
  unitsReturned: number;
  /** Largest single grant. */
  maxGrant: number;
  /** Keys held in memory. */
  keys: number;
  /** Whether the pub/sub subscription is confirmed; leases hold no surplus while it is not. */
  live: boolean;
}

const OPTION_NAMES = ['client', 'subscriber', 'timeoutMs', 'maxKeys', 'channel', 'clock', 'leaseMs', 'maxShare'] as const;
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
/** Where need and want (ARGV[7], ARGV[8] of lease-fixed-window.lua) sit in a lease call's args. */
const NEED_ARG = 6;
const WANT_ARG = 7;
/** Where the share cap (ARGV[9]) sits. */
const SHARE_ARG = 8;
/** Integers in a lease reply: granted, remaining, window ms left, block ms left, window end. */
const LEASE_WIDTH = 5;

/** A script call queued for the next flush, with who to tell about its reply. */
interface Call extends ScriptCall {
  settled: boolean;
  timedOut: boolean;
  done(error: unknown, reply: unknown): void;
  /** A reply that came after the call timed out; a late grant is still a valid lease. */
  late?(reply: unknown): void;
  /** Runs when the flush sends the call, to fill in what should reflect that moment. */
  prepare?(): void;
}

interface Flight {
  calls: Call[];
  pending: number;
  timer: NodeJS.Timeout;
  settled: Promise<void>;
  finish(): void;
}

interface LeaseReply {
  granted: number;
  remaining: number;
  windowLeft: number;
  blockLeft: number;
  windowEnd: number;
}

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
  private readonly adapter: RedisAdapter;
  private readonly inner: RedisStore;
  private readonly clock: Clock | undefined;
  private readonly shareMilli: number;
  private readonly entries = new Map<string, Entry>();
  /** Pairs of policies warned about as conflicting. */
  private readonly warned = new Set<string>();
  private readonly subscription: Subscription;
  private readonly sweeper: NodeJS.Timeout;
  private outbox: Call[] = [];
  private immediate: NodeJS.Immediate | undefined;
  private readonly flights = new Set<Flight>();
  private live = false;
  /** Smoothed lease round trip, in local ms. */
  private rttMs = 0;
  private everLive = false;
  private closed = false;
  private readonly counters = { localDecisions: 0, leaseCalls: 0, returnCalls: 0, unitsLeased: 0, unitsReturned: 0, maxGrant: 0 };

  /** @param options - see {@link LocalFirstStoreOptions}; invalid ones throw a FloodgateError. */
  constructor(options: LocalFirstStoreOptions) {
    assertKnownOptions(options, OPTION_NAMES, 'LocalFirstStore');
    const o = options as LocalFirstStoreOptions;
    if (o.client === undefined) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        'LocalFirstStore needs a client, e.g. new LocalFirstStore({ client: new Redis(url) }) with ioredis.',
      );
    }
    const adapter = adaptClient(o.client);
    if (adapter.kind === 'node-redis-cluster') {
      throw new FloodgateError(
        ErrorCode.INVALID_CLIENT,
        'LocalFirstStore does not support node-redis clusters (createCluster); use an ioredis Cluster, a single node, or RedisStore.',
      );
    }
    this.adapter = adapter;
    this.clientKind = adapter.kind;
    this.timeoutMs = wholeNumber(o.timeoutMs ?? 500, 'timeoutMs', 1, MAX_TIMEOUT_MS, ErrorCode.INVALID_DURATION);
    this.maxKeys = wholeNumber(o.maxKeys ?? 10_000, 'maxKeys', 1, Number.MAX_SAFE_INTEGER, ErrorCode.INVALID_OPTIONS);
    this.leaseMs = wholeNumber(o.leaseMs ?? 100, 'leaseMs', 1, 3_600_000, ErrorCode.INVALID_DURATION);
    const share = o.maxShare ?? 0.25;
    if (typeof share !== 'number' || !(share > 0 && share <= 1)) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `LocalFirstStore maxShare must be a number above 0 and at most 1; got ${describe(share)}.`,
      );
    }
    this.maxShare = share;
    this.shareMilli = Math.max(1, Math.round(share * 1000));
    const channel = o.channel ?? 'floodgate:local-first';
    if (typeof channel !== 'string' || channel.length === 0) {
      throw new FloodgateError(ErrorCode.INVALID_OPTIONS, `LocalFirstStore channel must be a non-empty string; got ${describe(channel)}.`);
    }
    this.channel = channel;
    if (o.clock !== undefined && typeof o.clock !== 'function') {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `LocalFirstStore clock must be a function returning ms; got ${describe(o.clock)}.`,
      );
    }
    this.clock = o.clock;

    let subscriber = o.subscriber;
    const owned = subscriber === undefined;
    if (subscriber === undefined) {
      const duplicate = (o.client as { duplicate?: unknown }).duplicate;
      if (typeof duplicate !== 'function') {
        throw new FloodgateError(
          ErrorCode.INVALID_CLIENT,
          'LocalFirstStore cannot duplicate this client for pub/sub; pass a subscriber client.',
        );
      }
      // ioredis resubscribes by itself after a reconnection, with a promise nobody handles: a store closed while
      // that connection is mid-handshake got an unhandled "Connection is closed." rejection. The subscription
      // (broadcast.ts) subscribes again on every 'ready' with a handler of its own, so ioredis's copy is off.
      // (An ioredis Cluster duplicates with other arguments and resubscribes through its own subscriber.)
      const plainIoredis =
        typeof (o.client as { status?: unknown }).status === 'string' && (o.client as { isCluster?: unknown }).isCluster !== true;
      subscriber = (plainIoredis ? duplicate.call(o.client, { autoResubscribe: false }) : duplicate.call(o.client)) as object;
    } else if (typeof subscriber !== 'object' || subscriber === null) {
      throw new FloodgateError(ErrorCode.INVALID_CLIENT, `LocalFirstStore subscriber must be a Redis client; got ${describe(subscriber)}.`);
    } else if (subscriber === o.client) {
      // A client in subscriber mode refuses every other command: the store's own calls, and the app's.
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        'LocalFirstStore subscriber must be a second connection, not client itself (a subscribed connection runs no other commands); pass client.duplicate(), or leave subscriber out and the store duplicates client.',
      );
    }
    this.inner = new RedisStore({ client: o.client, timeoutMs: this.timeoutMs, ...(o.clock ? { clock: o.clock } : {}) });
    this.subscription = subscribe(subscriber, owned, channel, {
      message: (text) => this.onMessage(text),
      up: () => this.onUp(),
      down: () => this.onDown(),
    });
    this.sweeper = setInterval(() => this.sweep(), Math.max(10, this.leaseMs));
    this.sweeper.unref();
  }

  /** A snapshot of the store's counters. */
  stats(): LocalFirstStats {
    return { ...this.counters, keys: this.entries.size, live: this.live };
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
    if (this.immediate !== undefined) {
      clearImmediate(this.immediate);
      this.flush();
    }
    await Promise.all([...this.flights].map((f) => f.settled));
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
    if (e === undefined || e.policy === undefined || e.policy === op.policy || samePolicy(e.policy, op.policy)) return undefined;
    let t: number;
    try {
      t = this.now();
    } catch {
      // The operation reports the clock's failure itself.
      return undefined;
    }
    const inUse = e.endsBy > t || e.units > 0 || e.blockedUntil > t || e.waiters.length > 0 || e.inFlight;
    return inUse ? conflictError(op.key, e.policy, op.policy, this.warned) : undefined;
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
    if (this.closed || operation.kind !== 'consume' || operation.policy.algorithm !== 'fixed-window') return undefined;
    const e = this.entries.get(operation.key);
    // A new key needs a lease call.
    if (e === undefined) return undefined;
    if (e.policy !== operation.policy) {
      // A key known only from a mark holds no lease, so it takes the policy as consume would; a key
      // leased under another policy must hand its lease back first, which consume does.
      if (e.policy === undefined) e.policy = operation.policy;
      else if (!samePolicy(e.policy, operation.policy)) return undefined;
    }
    let t: number;
    try {
      t = this.now();
    } catch {
      // apply reports the clock's failure as a store error.
      return undefined;
    }
    const outcome = this.decide(operation.key, e, operation.amount, operation.policy, t);
    if (outcome !== undefined) {
      // Most recently used, as consume's touch does, so a hot key is never the one evicted.
      this.entries.delete(operation.key);
      this.entries.set(operation.key, e);
    }
    return outcome;
  }

  private consume(op: Operation): Promise<Outcome> {
    let t: number;
    try {
      t = this.now();
    } catch (error) {
      return Promise.reject(toStoreError(error, this.name));
    }
    const e = this.touch(op.key, t);
    if (e.policy !== op.policy && (e.policy === undefined || !samePolicy(e.policy, op.policy))) {
      // Another limiter on the same key: its lease counts in the same hash, so hand it back.
      if (e.policy !== undefined) this.giveBack(op.key, e);
      e.policy = op.policy;
    }
    const decided = this.decide(op.key, e, op.amount, op.policy, t);
    if (decided !== undefined) return Promise.resolve(decided);
    e.demand += op.amount;
    e.lastUse = t;
    return new Promise<Outcome>((resolve, reject) => {
      e.waiters.push(deadlineWaiter(e, op.amount, this.timeoutMs, this.name, resolve, reject));
      // Consumes that find no units share one call: the one in flight (a lease or a top-up) serves them first.
      if (!e.inFlight) this.lease(op.key, e);
    });
  }

  /**
   * Decides a consume of `cost` on `e` from memory: from the lease, or
   * refused by a block or exhausted mark. Undefined when only Redis can
   * decide, and then nothing was spent or counted (expired marks and lapsed
   * units are cleared, which any later look would do too).
   */
  private decide(key: string, e: Entry, cost: number, policy: Policy, t: number): Outcome | undefined {
    if (e.blockedUntil !== 0) {
      if (e.blockedUntil > t) {
        this.decided(e, cost, t);
        return blocked(msUntil(e.blockedUntil, t), msUntil(e.endsBy, t));
      }
      e.blockedUntil = 0;
    }
    // Past its deadline the lease's window may be over: its units lapse with it.
    if (e.units > 0 && t >= e.spendUntil) e.units = 0;
    if (e.units >= cost && e.waiters.length === 0) {
      e.units -= cost;
      this.decided(e, cost, t);
      const outcome = admitted(e, t);
      // Top up before the lease runs dry, so a hot key's consumes never wait for a round trip; but not
      // when the reply would come after the deadline: its units would lapse on arrival, and consumes
      // queued behind it would wait a second round trip for the next window's lease.
      if (!e.inFlight && this.live && e.lastGrant >= 4 && e.units * 2 <= e.lastGrant && t + this.rttMs < e.spendUntil) {
        this.lease(key, e);
      }
      return outcome;
    }
    if (e.exhaustedUntil !== 0) {
      if (e.exhaustedUntil <= t) {
        e.exhaustedUntil = 0;
      } else if (policy.blockMs === 0 && e.waiters.length === 0) {
        // With a block duration the refusal must reach Redis, which sets the block for everyone.
        this.decided(e, cost, t);
        return exhausted(e, e.exhaustedUntil, t);
      }
    }
    return undefined;
  }

  /** Counts a consume decided from memory: in the key's demand (which sizes its next slice) and in the stats. */
  private decided(e: Entry, cost: number, t: number): void {
    e.demand += cost;
    e.lastUse = t;
    this.counters.localDecisions++;
  }

  /**
   * Sends one lease call for the waiters of `e`, or a top-up when none wait.
   * The call is sized when the flush sends it, so it covers every consume
   * that queued on the key during this event-loop turn.
   */
  private lease(key: string, e: Entry): void {
    const policy = e.policy;
    if (policy === undefined) return;
    let t: number;
    try {
      t = this.now();
    } catch (error) {
      rejectAll(e, toStoreError(error, this.name));
      return;
    }
    e.inFlight = true;
    this.counters.leaseCalls++;
    // Taken before the call goes out, so the deadline sentAt + msLeft can only be early.
    const sentAt = t;
    let need = 0;
    const call = this.scriptCall(key, policy, [
      '1',
      this.clock ? String(t) : '0',
      '0',
      '0',
      String(this.shareMilli),
      this.channel,
      this.id,
      key,
    ]);
    this.send(
      call,
      (error, reply) => this.onLease(key, e, sentAt, need, error, reply),
      (reply) => {
        const parsed = parseLease(reply);
        if (!(parsed instanceof FloodgateError) && !this.closed) this.absorb(key, e, sentAt, this.now(), parsed, false);
      },
      () => {
        need = this.sizeLease(e, sentAt, call.args);
      },
    );
  }

  /** Writes a lease call's need and want from the key's waiters and demand as they are now; returns need. */
  private sizeLease(e: Entry, sentAt: number, args: string[]): number {
    let t = sentAt;
    try {
      t = Math.max(sentAt, this.now());
    } catch {
      // The rate is then measured up to when the call was queued; nothing else depends on it.
    }
    if (e.units > 0 && t >= e.spendUntil) e.units = 0;
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
    const surplus = this.live && e.policy !== undefined && this.rttMs < e.policy.windowMs;
    const want = surplus ? wantedSlice(e, need, queued, t, Math.max(this.leaseMs, 4 * this.rttMs)) : Math.max(need, queued);
    e.demand = 0;
    e.since = t;
    args[NEED_ARG] = String(need);
    args[WANT_ARG] = String(want);
    // The share cap keeps idle quota from piling up in one process; consumes already waiting park
    // nothing, and capping them would admit a few per round trip while the rest wait out timeoutMs.
    args[SHARE_ARG] = surplus ? String(this.shareMilli) : '1000';
    return need;
  }

  private onLease(key: string, e: Entry, sentAt: number, need: number, error: unknown, reply: unknown): void {
    e.inFlight = false;
    const parsed = error == null ? parseLease(reply) : toStoreError(error, this.name);
    if (parsed instanceof FloodgateError) {
      rejectAll(e, parsed);
      return;
    }
    if (this.closed) {
      rejectAll(e, closedError());
      return;
    }
    let t: number;
    try {
      t = this.now();
    } catch (clockError) {
      rejectAll(e, toStoreError(clockError, this.name));
      return;
    }
    this.rttMs += (t - sentAt - this.rttMs) / 5;
    this.absorb(key, e, sentAt, t, parsed, true);
    if (parsed.blockLeft !== 0) {
      const outcome = blocked(msUntil(e.blockedUntil, t), msUntil(e.endsBy, t));
      const waiters = e.waiters;
      e.waiters = [];
      for (const w of waiters) w.resolve(outcome);
      return;
    }
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
    if (e.waiters.length === 0) return;
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
      if (blocks && e.policy !== undefined) {
        e.blockedUntil = t + blockMs;
        // Best effort, as returns are: a failed block leaves the refusal standing, and the next consume asks Redis.
        this.control({ kind: 'block', key, amount: blockMs, policy: e.policy }).catch(() => {});
      }
    }
    if (e.waiters.length > 0) this.lease(key, e);
  }

  /**
   * Takes a lease reply into the entry: the grant, the window, and what it
   * says about exhaustion and blocks. `current` is true for the reply to the
   * call in flight, false for a late one (its call had timed out).
   */
  private absorb(key: string, e: Entry, sentAt: number, t: number, p: LeaseReply, current: boolean): void {
    // A late reply may come after a newer one; from an older window than the lease held, its units have
    // lapsed. The reply to the call in flight, though, is Redis's word on the key's window now, even one
    // that looks older (Redis back empty on a clock behind, a failover to a host whose clock lags):
    // dropping it would drop every grant Redis counts, and leave the waiters waiting, call after call,
    // until Redis's window passes the one held.
    if (!current && p.windowEnd !== 0 && p.windowEnd < e.windowEnd) return;
    if (p.windowLeft > 0) {
      if (e.windowEnd !== p.windowEnd) {
        // Another window: whatever is left of the lease of the one before has lapsed.
        e.units = 0;
        e.windowEnd = p.windowEnd;
        e.spendUntil = spendDeadline(sentAt, p.windowLeft, this.clock !== undefined);
        e.endsBy = t + p.windowLeft;
      } else {
        // Both are bounds of the same window's end: keep the tightest.
        e.spendUntil = Math.max(e.spendUntil, spendDeadline(sentAt, p.windowLeft, this.clock !== undefined));
        e.endsBy = Math.min(e.endsBy, t + p.windowLeft);
      }
    }
    if (p.blockLeft !== 0) {
      e.blockedUntil = p.blockLeft < 0 ? Infinity : t + p.blockLeft;
      e.remote = 0;
      // The window may outlive the block: give the unspent units back to it.
      this.giveBack(key, e);
      return;
    }
    if (p.granted > 0) {
      e.units += p.granted;
      e.lastGrant = p.granted;
      this.counters.unitsLeased += p.granted;
      if (p.granted > this.counters.maxGrant) this.counters.maxGrant = p.granted;
    }
    e.remote = p.remaining;
    e.exhaustedUntil = p.remaining <= 0 && p.windowLeft > 0 ? e.endsBy : 0;
  }

  /** Peek, reward, penalty, block and reset: applied by Redis, then broadcast and mirrored locally. */
  private async control(op: Operation): Promise<Outcome> {
    const before = this.entries.get(op.key);
    // No unit leased before a reset or block is asked for is spent after it from here.
    if (before && op.kind === 'reset') {
      before.units = 0;
      before.exhaustedUntil = 0;
      before.blockedUntil = 0;
    } else if (before && op.kind === 'block') {
      this.giveBack(op.key, before);
    }
    const outcome = await this.inner.apply(op);
    let t: number;
    try {
      t = this.now();
    } catch (error) {
      throw toStoreError(error, this.name);
    }
    const e = this.entries.get(op.key);
    switch (op.kind) {
      case 'reset':
        if (e) {
          e.units = 0;
          e.exhaustedUntil = 0;
          e.blockedUntil = 0;
        }
        this.publish('r', 0, op.key);
        break;
      case 'reward':
        if (e) e.exhaustedUntil = 0;
        this.publish('a', 0, op.key);
        break;
      case 'block': {
        const entry = this.touch(op.key, t);
        entry.blockedUntil = outcome.retryAfterMs === Infinity ? Infinity : t + outcome.retryAfterMs;
        this.giveBack(op.key, entry);
        this.publish('b', op.amount, op.key);
        return outcome;
      }
      default:
        break;
    }
    if (!e || e.units <= 0 || t >= e.spendUntil || e.blockedUntil > t) return outcome;
    // Redis counts this process's unspent lease as consumed; it is not, for this process.
    return { allowed: true, remaining: outcome.remaining + e.units, resetMs: outcome.resetMs, retryAfterMs: 0, emptyMs: 0 };
  }

  /** Returns the entry's unspent units to their window (best effort), and forgets them. */
  private giveBack(key: string, e: Entry): void {
    const units = e.units;
    e.units = 0;
    if (units <= 0 || e.policy === undefined) return;
    let t: number;
    try {
      t = this.now();
    } catch {
      return;
    }
    if (t >= e.spendUntil) return;
    this.counters.returnCalls++;
    const count = (reply: unknown): void => {
      const n = Number(reply);
      if (Number.isSafeInteger(n)) this.counters.unitsReturned += n;
    };
    this.send(
      this.scriptCall(key, e.policy, [
        '2',
        this.clock ? String(t) : '0',
        String(units),
        String(e.windowEnd),
        '0',
        this.channel,
        this.id,
        key,
      ]),
      (error, reply) => {
        if (error == null) count(reply);
      },
      count,
    );
  }

  private publish(kind: MessageKind, ms: number, key: string): void {
    const message = encodeMessage({ kind, sender: this.id, ms, key });
    this.send({ script: LOCAL_FIRST_SCRIPTS.publish, keys: [redisKeys(key).state], args: [this.channel, message] }, () => {});
  }

  private scriptCall(key: string, policy: Policy, tail: string[]): ScriptCall & { readonly args: string[] } {
    return {
      script: LOCAL_FIRST_SCRIPTS.lease,
      keys: [redisKeys(key).state],
      args: [String(policy.limit), String(policy.windowMs), String(policy.blockMs), this.clock ? '1' : '0', ...tail],
    };
  }

  private onMessage(text: string): void {
    const m = decodeMessage(text);
    // Our own news we applied when Redis answered; applying it again late could undo newer news.
    if (m === undefined || m.sender === this.id || this.closed) return;
    let t: number;
    try {
      t = this.now();
    } catch {
      return;
    }
    if (m.kind === 'a' || m.kind === 'r') {
      const e = this.entries.get(m.key);
      if (e === undefined) return;
      e.exhaustedUntil = 0;
      if (m.kind === 'r') {
        // The window the lease came from is gone: nothing to give back to.
        e.units = 0;
        e.blockedUntil = 0;
      }
      return;
    }
    if (m.ms === 0) return;
    const e = this.touch(m.key, t);
    if (m.kind === 'x') {
      e.exhaustedUntil = Math.max(e.exhaustedUntil, t + m.ms);
      e.remote = 0;
    } else {
      e.blockedUntil = m.ms < 0 ? Infinity : Math.max(e.blockedUntil, t + m.ms);
      this.giveBack(m.key, e);
    }
  }

  private onUp(): void {
    // Messages may have been missed since the last confirmation: start from what Redis says.
    if (this.everLive) this.forgetAll();
    this.everLive = true;
    this.live = true;
  }

  private onDown(): void {
    if (!this.live) return;
    this.live = false;
    this.forgetAll();
  }

  /** Gives back every lease and drops every mark whose freshness is unknown. */
  private forgetAll(): void {
    for (const [key, e] of this.entries) {
      this.giveBack(key, e);
      e.exhaustedUntil = 0;
      e.blockedUntil = 0;
    }
  }

  /** The entry of `key`, created if needed, moved to the most recently used end; evicts past maxKeys. */
  private touch(key: string, t: number): Entry {
    let e = this.entries.get(key);
    if (e !== undefined) {
      this.entries.delete(key);
    } else {
      e = newEntry(t);
    }
    this.entries.set(key, e);
    if (this.entries.size > this.maxKeys) {
      const [oldKey, old] = this.entries.entries().next().value!;
      this.entries.delete(oldKey);
      // Waiters of an evicted entry are still answered: the reply handler holds the entry.
      this.giveBack(oldKey, old);
    }
    return e;
  }

  /** Gives back idle leases, drops lapsed ones and expired marks, and forgets idle keys. */
  private sweep(): void {
    let t: number;
    try {
      t = this.now();
    } catch {
      return;
    }
    const idleMs = 2 * this.leaseMs;
    for (const [key, e] of this.entries) {
      if (e.units > 0) {
        if (t >= e.spendUntil) e.units = 0;
        else if (t - e.lastUse >= idleMs && !e.inFlight) this.giveBack(key, e);
      }
      if (e.exhaustedUntil !== 0 && e.exhaustedUntil <= t) e.exhaustedUntil = 0;
      if (e.blockedUntil !== 0 && e.blockedUntil <= t) e.blockedUntil = 0;
      const empty = e.units === 0 && e.exhaustedUntil === 0 && e.blockedUntil === 0 && !e.inFlight && e.waiters.length === 0;
      if (empty && t - e.lastUse >= idleMs) this.entries.delete(key);
    }
  }

  private send(
    script: ScriptCall,
    done: (error: unknown, reply: unknown) => void,
    late?: (reply: unknown) => void,
    prepare?: () => void,
  ): void {
    this.outbox.push({ ...script, settled: false, timedOut: false, done, ...(late ? { late } : {}), ...(prepare ? { prepare } : {}) });
    this.immediate ??= setImmediate(this.flush);
  }

  /** Sends every call queued this event-loop turn as one pipeline. */
  private readonly flush = (): void => {
    this.immediate = undefined;
    const calls = this.outbox;
    this.outbox = [];
    if (calls.length === 0) return;
    const down = this.adapter.unavailable();
    if (down !== undefined) {
      const error = new FloodgateError(ErrorCode.STORE_ERROR, `${this.name} store failed: ${down}.`);
      for (const c of calls) settle(c, error, undefined);
      return;
    }
    for (const c of calls) c.prepare?.();
    let finish!: () => void;
    const settled = new Promise<void>((resolve) => (finish = resolve));
    const flight: Flight = {
      calls,
      pending: calls.length,
      settled,
      finish,
      timer: setTimeout(() => {
        const error = new FloodgateError(
          ErrorCode.STORE_TIMEOUT,
          `${this.name} store: Redis did not answer within ${this.timeoutMs} ms; raise timeoutMs if Redis is slow but healthy.`,
        );
        for (const c of calls) {
          if (!c.settled) c.timedOut = true;
          settle(c, error, undefined);
        }
        this.flights.delete(flight);
        finish();
      }, this.timeoutMs),
    };
    this.flights.add(flight);
    const onReply = (index: number, error: unknown, reply: unknown): void => {
      const c = calls[index];
      if (c === undefined) return;
      if (c.settled) {
        if (c.timedOut && error == null && c.late) c.late(reply);
      } else {
        settle(c, error, reply);
      }
      if (--flight.pending === 0) {
        clearTimeout(flight.timer);
        this.flights.delete(flight);
        flight.finish();
      }
    };
    try {
      this.adapter.send(calls, onReply);
    } catch (error) {
      for (let i = 0; i < calls.length; i++) onReply(i, error, undefined);
    }
  };
}

function settle(c: Call, error: unknown, reply: unknown): void {
  if (c.settled) return;
  c.settled = true;
  try {
    c.done(error, reply);
  } catch {
    // A handler bug must not leave the other calls of the flush unanswered.
  }
}

function rejectAll(e: Entry, error: FloodgateError): void {
  e.inFlight = false;
  const waiters = e.waiters;
  e.waiters = [];
  for (const w of waiters) w.reject(error);
}

function parseLease(reply: unknown): LeaseReply | FloodgateError {
  if (!Array.isArray(reply) || reply.length !== LEASE_WIDTH) {
    return new FloodgateError(ErrorCode.STORE_ERROR, `redis-local-first store failed: the lease script answered ${describe(reply)}.`);
  }
  const v = reply.map(Number);
  if (!v.every(Number.isSafeInteger)) {
    return new FloodgateError(ErrorCode.STORE_ERROR, `redis-local-first store failed: the lease script answered ${describe(reply)}.`);
  }
  return { granted: v[0]!, remaining: v[1]!, windowLeft: v[2]!, blockLeft: v[3]!, windowEnd: v[4]! };
}

function wholeNumber(value: unknown, name: string, min: number, max: number, code: (typeof ErrorCode)[keyof typeof ErrorCode]): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new FloodgateError(code, `LocalFirstStore ${name} must be a whole number from ${min} to ${max}; got ${describe(value)}.`);
  }
  return value;
}

function closedError(): FloodgateError {
  return new FloodgateError(ErrorCode.CLOSED, 'LocalFirstStore was closed; create a new store to keep limiting.');
}
