/** OverloadLimiter: an in-flight limit (adaptive or fixed) whose waiters are served by priority class, fairly across tenants. */
import { systemClock, type Clock } from '../core/clock.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { assertKnownOptions, invalid, MAX_TIMER_MS, optionalFunction, wholeNumber } from '../core/validate.js';
import { FairQueue, type FairEntry } from '../waiting/fair-queue.js';
import { timerScheduler } from '../waiting/wait-queue.js';
import { openSlot, type AdaptiveSlot } from './adaptive-concurrency-limiter.js';
import { AdaptiveController, type AdaptiveControllerOptions, type AdaptiveStats } from './adaptive-controller.js';
import { abortedError } from './waiting.js';

/** The queue of an {@link OverloadLimiter}: how long a request may wait for a slot, and how many may wait. */
export interface OverloadQueueOptions {
  /** The longest a request waits before it is refused (`reason: 'timeout'`). Default `"1s"`. */
  timeout?: Duration;
  /** Most requests waiting, every class and tenant together (bounded memory). A whole number from 1 to 1 000 000. Default 1000. */
  maxQueue?: number;
}

/** Options of {@link OverloadLimiter}. Every one has a default. */
export interface OverloadLimiterOptions {
  /** `"adaptive"` (default): the in-flight limit follows the upstream's latency; a whole number: a fixed in-flight limit. */
  limit?: number | 'adaptive';
  /** The adaptive controller's options (see `AdaptiveControllerOptions`); only with `limit: "adaptive"`. */
  adaptive?: AdaptiveControllerOptions;
  /**
   * The priority classes, highest first. When requests wait, the highest class is served first, so a class is refused only
   * while no lower one is being admitted. Default `["critical", "default", "sheddable"]`.
   */
  priorities?: readonly string[];
  /** The class of a request that names none. Default `"default"` when listed, else the lowest class. */
  defaultPriority?: string;
  /** The wait for a slot (see {@link OverloadQueueOptions}), or `false` to refuse at once when the limit is reached. */
  queue?: OverloadQueueOptions | false;
  /**
   * The most of the limit one tenant may hold in flight, above 0 and at most 1: at `0.25` a tenant holds at most a quarter of
   * the slots (at least one); its other requests wait in its line even while slots are free, which stay for the others.
   * Without it a tenant that holds its slots long (slow endpoints, a client that reads its answers slowly) can take every
   * slot while nobody waits, and the tenants that come after wait until those end. Default 1: no share.
   */
  tenantShare?: number;
  /** Where time comes from (ms). Default: wall time. A ManualClock's `now` drives a simulation. */
  clock?: Clock;
  /** Numbers in [0, 1) for the adaptive probes' jitter. Default Math.random; a seeded generator makes a simulation repeatable. */
  random?: () => number;
  /** Runs `fn` after `ms` and returns a function that cancels it: the waiters' deadlines. Default `setTimeout`; a simulation passes its own. */
  schedule?: (fn: () => void, ms: number) => () => void;
}

/** One request's place: its class, whose tenant it is, and how it may stop waiting. */
export interface OverloadRequest {
  /** Its priority class, one of the limiter's `priorities`. Default the limiter's `defaultPriority`. */
  priority?: string;
  /** Who it is for: waiters are served round-robin across tenants within a class. Default `""` (one shared line). */
  tenant?: string;
  /** Abandons the wait: the call rejects with FLOODGATE_ABORTED, having taken nothing. */
  signal?: AbortSignal;
  /** The longest this request waits, when shorter than the queue's timeout (a client's own deadline). */
  timeout?: Duration;
}

/** Why a request was refused: the limit with no queue, a full queue, a wait that timed out, or evicted for a higher class or a quieter tenant. */
export type OverloadRefusal = 'limit' | 'full' | 'timeout' | 'shed';

/** An {@link OverloadLimiter}'s decision: an {@link AdaptiveSlot} (end it once when admitted) with why it was refused and how long it waited. */
export interface OverloadSlot extends AdaptiveSlot {
  /** The request's class. */
  readonly priority: string;
  /** Why it was refused; undefined when admitted. */
  readonly reason: OverloadRefusal | undefined;
  /** How long it waited, in ms (0 when decided at once). */
  readonly waitedMs: number;
}

/** The limiter's numbers: the controller's, and the queue's. */
export interface OverloadStats extends AdaptiveStats {
  /** Requests waiting now, by class. */
  readonly queued: Readonly<Record<string, number>>;
  /** Decisions since the start, by class and outcome (`admitted`, `waited` — admitted after a wait — or a refusal reason). */
  readonly decisions: Readonly<Record<string, Readonly<Record<'admitted' | 'waited' | OverloadRefusal, number>>>>;
}

interface Waiter {
  readonly priority: number;
  readonly since: number;
  settle: (slot: OverloadSlot) => void;
  fail: (error: unknown) => void;
  cancelTimer: (() => void) | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

const OWNER = 'OverloadLimiter';
const OPTIONS = ['limit', 'adaptive', 'priorities', 'defaultPriority', 'queue', 'tenantShare', 'clock', 'random', 'schedule'] as const;
const DEFAULT_PRIORITIES = ['critical', 'default', 'sheddable'] as const;

/**
 * Protects one upstream from more work than it can take: at most `limit` requests in flight from this process (adaptive by
 * default: see `AdaptiveConcurrencyLimiter`), the others wait in a bounded queue by priority class and tenant, or are refused.
 *
 * - **Priority:** a freed slot goes to the highest class that waits. A request of a higher class is never refused while a
 *   lower one is admitted: it is queued ahead of every lower waiter, and a full queue evicts the newest of the lowest class.
 * - **Fairness:** within a class, each tenant's waiters form a line and the lines are served in turn, so a tenant sending
 *   ten times the others gets no more of the capacity than an equal share while they wait; a full queue evicts from the
 *   longest line.
 * - **Share:** with `tenantShare`, no tenant holds more than that share of the limit in flight; its other requests wait
 *   (and a lower class of another tenant may be admitted meanwhile: the share is the tenant's, whatever the class).
 * - **Deadlines:** a waiter is refused when its timeout passes or its signal aborts, and nothing is left behind.
 *
 * ```ts
 * const overload = new OverloadLimiter({ adaptive: { maxLimit: 200 }, queue: { timeout: '500ms' } });
 * const slot = await overload.acquire({ priority: 'sheddable', tenant: accountId, signal });
 * if (!slot.allowed) return reply(503, { 'Retry-After': '1' });
 * try { const res = await upstream(); slot.release({ error: res.status === 503 }); return res; }
 * catch (e) { slot.drop(); throw e; }
 * ```
 */
export class OverloadLimiter {
  private readonly clock: Clock;
  private readonly schedule: (fn: () => void, ms: number) => () => void;
  private readonly controller: AdaptiveController;
  private readonly priorities: readonly string[];
  private readonly index: ReadonlyMap<string, number>;
  private readonly defaultIndex: number;
  private readonly timeoutMs: number;
  private readonly maxQueue: number;
  private readonly queue: FairQueue<Waiter>;
  private readonly counts: Array<Record<'admitted' | 'waited' | OverloadRefusal, number>>;
  private readonly pump = (): void => this.admitWaiters();
  /** `tenantShare`; 1 when every tenant may hold the whole limit. */
  private readonly share: number;
  /** Slots each tenant holds now, while `share` < 1 (a tenant holding none is absent: as many keys as slots in flight). */
  private readonly held = new Map<string, number>();
  /** True when `tenant` holds less than its share; undefined when there is no share (every tenant is eligible). */
  private readonly eligible: ((tenant: string) => boolean) | undefined;

  /**
   * @param options - see {@link OverloadLimiterOptions}
   * @throws FloodgateError UNKNOWN_OPTION, INVALID_OPTIONS, INVALID_LIMIT, INVALID_DURATION or CONFLICTING_OPTIONS on a bad option
   */
  constructor(options: OverloadLimiterOptions = {}) {
    assertKnownOptions(options, OPTIONS, OWNER);
    this.clock = optionalFunction(options.clock, `${OWNER} clock`) ?? systemClock;
    this.schedule = optionalFunction(options.schedule, `${OWNER} schedule`) ?? timerScheduler;
    this.controller = new AdaptiveController(controllerOptions(options), this.clock(), optionalFunction(options.random, `${OWNER} random`));
    this.priorities = priorityList(options.priorities);
    this.index = new Map(this.priorities.map((name, i) => [name, i]));
    const fallback = this.index.has('default') ? 'default' : this.priorities[this.priorities.length - 1]!;
    this.defaultIndex = this.priorityIndex(options.defaultPriority ?? fallback, `${OWNER} defaultPriority`);
    const queue = options.queue;
    if (queue === false) {
      this.timeoutMs = 0;
      this.maxQueue = 0;
    } else {
      if (queue !== undefined) assertKnownOptions(queue, ['timeout', 'maxQueue'], `${OWNER} queue`);
      this.timeoutMs = queue?.timeout === undefined ? 1000 : parseDuration(queue.timeout, `${OWNER} queue.timeout`);
      if (this.timeoutMs > MAX_TIMER_MS)
        invalid(ErrorCode.INVALID_DURATION, `${OWNER} queue.timeout`, `at most ${MAX_TIMER_MS} ms`, queue?.timeout);
      this.maxQueue =
        queue?.maxQueue === undefined ? 1000 : wholeNumber(queue.maxQueue, `${OWNER} queue.maxQueue`, { min: 1, max: 1_000_000 });
    }
    this.share = tenantShare(options.tenantShare);
    this.eligible = this.share >= 1 ? undefined : (tenant) => (this.held.get(tenant) ?? 0) < this.tenantCap();
    this.queue = new FairQueue(this.priorities.length);
    this.counts = this.priorities.map(() => ({ admitted: 0, waited: 0, limit: 0, full: 0, timeout: 0, shed: 0 }));
  }

  /** In-flight requests allowed now. */
  get limit(): number {
    return this.controller.limit;
  }

  /** The controller's numbers and the queue's, for metrics; see {@link OverloadStats}. */
  stats(): OverloadStats {
    const queued: Record<string, number> = {};
    const decisions: Record<string, Record<'admitted' | 'waited' | OverloadRefusal, number>> = {};
    this.priorities.forEach((name, i) => {
      queued[name] = this.queue.sizeOf(i);
      decisions[name] = { ...this.counts[i]! };
    });
    return { ...this.controller.stats(), queued, decisions };
  }

  /**
   * Decides without waiting when it can: a slot when one is free and nobody of this class or higher waits, a refusal when the
   * request could not wait (no queue, or a full one it cannot take a place in). Undefined when it would wait: then call
   * {@link acquire} with the same request, which queues it. Lets a caller on a hot path skip a promise in the common cases.
   *
   * @throws FloodgateError INVALID_OPTIONS for an unknown priority or a bad request
   */
  tryAcquire(request: OverloadRequest = {}): OverloadSlot | undefined {
    const priority = this.requestPriority(request);
    const tenant = request.tenant ?? '';
    const now = this.clock();
    if (!this.waitsAhead(priority) && (this.eligible?.(tenant) ?? true) && this.controller.tryAdmit(now))
      return this.admitted(priority, tenant, now, 0);
    if (this.maxQueue === 0) return this.refused(priority, 'limit', 0);
    if (this.queue.size >= this.maxQueue && this.queue.victimFor(priority, tenant) === undefined) return this.refused(priority, 'full', 0);
    return undefined;
  }

  /**
   * A slot for the request: at once when one is free, else after a wait in its class and tenant's line, or a refusal
   * (`allowed: false` with a `reason`). Never rejects for overload: only for a bad request, or when `signal` aborts.
   *
   * @throws FloodgateError INVALID_OPTIONS for an unknown priority or a bad request; ABORTED (as a rejection) when `signal`
   *   aborted while the request waited
   */
  acquire(request: OverloadRequest = {}): Promise<OverloadSlot> {
    try {
      const now = this.tryAcquire(request);
      if (now !== undefined) return Promise.resolve(now);
      return this.wait(request);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private wait(request: OverloadRequest): Promise<OverloadSlot> {
    const priority = this.requestPriority(request);
    const tenant = request.tenant ?? '';
    const signal = request.signal;
    if (signal?.aborted === true) return Promise.reject(abortedError(signal));
    const timeoutMs =
      request.timeout === undefined ? this.timeoutMs : Math.min(this.timeoutMs, parseDuration(request.timeout, `${OWNER} timeout`));
    if (this.queue.size >= this.maxQueue) {
      const victim = this.queue.victimFor(priority, tenant)!;
      this.queue.remove(victim);
      this.leave(victim.item);
      victim.item.settle(this.refused(victim.item.priority, 'shed', this.clock() - victim.item.since));
    }
    return new Promise<OverloadSlot>((resolve, reject) => {
      const waiter: Waiter = {
        priority,
        since: this.clock(),
        settle: resolve,
        fail: reject,
        cancelTimer: undefined,
        signal,
        onAbort: undefined,
      };
      const entry = this.queue.push(priority, tenant, waiter);
      waiter.cancelTimer = this.schedule(() => this.expire(entry), timeoutMs);
      if (signal !== undefined) {
        waiter.onAbort = () => {
          if (!this.queue.remove(entry)) return;
          this.leave(waiter);
          waiter.fail(abortedError(signal));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      // With a share, waiters of tenants at their share may stand ahead of this one while slots are free: it may go at once.
      if (this.eligible !== undefined) this.admitWaiters();
    });
  }

  private expire(entry: FairEntry<Waiter>): void {
    if (!this.queue.remove(entry)) return;
    const waiter = entry.item;
    waiter.cancelTimer = undefined;
    this.leave(waiter);
    waiter.settle(this.refused(waiter.priority, 'timeout', this.clock() - waiter.since));
  }

  /** A waiter leaves the queue however it leaves: its timer and abort listener go with it. */
  private leave(waiter: Waiter): void {
    waiter.cancelTimer?.();
    waiter.cancelTimer = undefined;
    if (waiter.onAbort !== undefined) waiter.signal!.removeEventListener('abort', waiter.onAbort);
  }

  /** Gives freed slots to waiters, highest class first, tenants in turn (passing over those at their share), while the limit has room. */
  private admitWaiters(): void {
    while (this.queue.size > 0) {
      const entry = this.queue.next(this.eligible);
      if (entry === undefined) return;
      const now = this.clock();
      if (!this.controller.tryAdmit(now, false)) return;
      this.queue.take(entry);
      const waiter = entry.item;
      this.leave(waiter);
      waiter.settle(this.admitted(waiter.priority, entry.tenant, now, now - waiter.since));
    }
  }

  /** True when a waiter of class `priority` or higher could take a free slot: a newcomer of `priority` goes behind it. */
  private waitsAhead(priority: number): boolean {
    if (this.eligible === undefined) return this.queue.waitingAtOrAbove(priority);
    // Waiters of tenants at their share cannot take a free slot: they do not stand in a newcomer's way.
    const next = this.queue.next(this.eligible);
    return next !== undefined && next.priority <= priority;
  }

  /** Counts a slot against `tenant`'s share; the function returned gives it back when the slot ends, then serves the waiters. */
  private holding(tenant: string): () => void {
    this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
    return () => {
      const n = this.held.get(tenant)! - 1;
      if (n === 0) this.held.delete(tenant);
      else this.held.set(tenant, n);
      this.admitWaiters();
    };
  }

  /** The most slots one tenant may hold now: its share of the limit, at least one. */
  private tenantCap(): number {
    return Math.max(1, Math.floor(this.controller.limit * this.share));
  }

  private admitted(priority: number, tenant: string, now: number, waitedMs: number): OverloadSlot {
    this.counts[priority]![waitedMs > 0 ? 'waited' : 'admitted']++;
    const slot = openSlot(this.controller, this.clock, true, now, this.eligible === undefined ? this.pump : this.holding(tenant));
    return { ...slot, priority: this.priorities[priority]!, reason: undefined, waitedMs };
  }

  private refused(priority: number, reason: OverloadRefusal, waitedMs: number): OverloadSlot {
    this.counts[priority]![reason]++;
    const slot = openSlot(this.controller, this.clock, false, this.clock());
    return { ...slot, priority: this.priorities[priority]!, reason, waitedMs };
  }

  private requestPriority(request: OverloadRequest): number {
    if (typeof request !== 'object' || request === null)
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} request`, 'an object such as { priority, tenant }', request);
    assertKnownOptions(request, ['priority', 'tenant', 'signal', 'timeout'], `${OWNER} request`);
    if (request.tenant !== undefined && typeof request.tenant !== 'string')
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} request tenant`, 'a string', request.tenant);
    if (request.signal !== undefined && !(request.signal instanceof AbortSignal))
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} request signal`, 'an AbortSignal', request.signal);
    return request.priority === undefined ? this.defaultIndex : this.priorityIndex(request.priority, `${OWNER} request priority`);
  }

  private priorityIndex(name: unknown, what: string): number {
    const i = typeof name === 'string' ? this.index.get(name) : undefined;
    if (i === undefined) invalid(ErrorCode.INVALID_OPTIONS, what, `one of the priorities (${this.priorities.join(', ')})`, name);
    return i;
  }
}

/** The controller's options for `limit`: adaptive as given, or a fixed number (minLimit = maxLimit, so it never moves). */
function controllerOptions(options: OverloadLimiterOptions): AdaptiveControllerOptions {
  const { limit = 'adaptive', adaptive } = options;
  if (limit === 'adaptive') return adaptive ?? {};
  const fixed = wholeNumber(limit, `${OWNER} limit`, {
    min: 1,
    max: 1_000_000,
    code: ErrorCode.INVALID_LIMIT,
    expected: '"adaptive" or a positive whole number',
  });
  if (adaptive !== undefined)
    throw new FloodgateError(
      ErrorCode.CONFLICTING_OPTIONS,
      `${OWNER} limit ${fixed} is fixed, so its adaptive options would never apply; remove adaptive, or write limit: 'adaptive'.`,
    );
  return { minLimit: fixed, maxLimit: fixed, initialLimit: fixed, probeLimit: fixed, probeInterval: MAX_TIMER_MS };
}

function tenantShare(value: unknown): number {
  if (value === undefined) return 1;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 1)
    invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} tenantShare`, 'a number above 0 and at most 1, e.g. 0.25', value);
  return value;
}

function priorityList(value: unknown): readonly string[] {
  if (value === undefined) return DEFAULT_PRIORITIES;
  if (!Array.isArray(value) || value.length === 0 || value.length > 16)
    invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} priorities`, 'a list of 1 to 16 class names, highest first', value);
  const names = value as unknown[];
  names.forEach((name, i) => {
    if (typeof name !== 'string' || name === '')
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} priorities[${i}]`, 'a non-empty string', name);
    if (names.indexOf(name) !== i) invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} priorities`, 'names listed once each', value);
  });
  return Object.freeze([...(names as string[])]);
}
