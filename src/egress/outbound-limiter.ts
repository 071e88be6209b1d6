/** OutboundLimiter: calls to another service's API kept within its limits, shared by every process on one store. */
/**
 * The shape, and why. Each key (an upstream host, a route, an account) has up to three budgets in the shared store: a rate
 * (calls per window), tokens (cost units per window, reserved at an estimate and settled at the actual cost) and a
 * concurrency limit (slots). A call waits in this process's line for its key, highest priority first and FIFO within one;
 * only the head of a line asks the store, so a process sends the store one request per key at a time however many callers
 * wait, and a refusal's `retryAfterMs` says when to ask again. Across processes the store decides who goes first.
 *
 * Learning: an upstream's answer says what it has left (`learn`). When it says it is out (remaining at or under `holdAt`,
 * or a 429/503 with Retry-After), the key is blocked in the store until the stated reset: every process sharing the store
 * holds back, none sends the call that would be refused. A stated limit lower than the configured one becomes the key's
 * limit (never higher: the configured budgets are ceilings), learnt by each process from its own answers.
 */
import { parseDuration, type Duration } from '../core/duration.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { systemClock, type Clock } from '../core/clock.js';
import { assertKnownOptions, invalid, MAX_TIMER_MS, optionalFunction, wholeNumber } from '../core/validate.js';
import type { Store } from '../stores/store.js';
import { MemoryStore } from '../stores/memory.js';
import { FairQueue, type FairEntry } from '../waiting/fair-queue.js';
import { timerScheduler } from '../waiting/wait-queue.js';
import { ConcurrencyLimiter, type Slot } from '../limiter/concurrency-limiter.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import type { Reservation } from '../limiter/reservation.js';
import type { PolicyOverride } from '../limiter/overrides.js';
import { abortedError } from '../limiter/waiting.js';
import type { UpstreamLimits } from './upstream-limits.js';
import type { Algorithm } from '../core/policy.js';

/** A budget per window: `limit` units each `window`. */
export interface OutboundBudget {
  /** Units per window: calls for `rate`, cost units for `tokens`. A positive whole number. */
  limit: number;
  /** The window, e.g. `"1m"`. */
  window: Duration;
  /** How the window counts; default `fixed-window`, as most APIs count (a window that resets whole at its end). */
  algorithm?: Algorithm;
}

/** What one answer of the upstream said: its status, and its limits for calls and for tokens (see `readUpstreamLimits`). */
export interface UpstreamAnswer {
  /** The HTTP status: 429 and 503 are refusals. */
  readonly status?: number;
  /** What it said of calls (`x-ratelimit-*-requests`, the IETF fields, …). */
  readonly requests?: UpstreamLimits;
  /** What it said of tokens (`x-ratelimit-*-tokens`). */
  readonly tokens?: UpstreamLimits;
}

/** Options of {@link OutboundLimiter}. At least one of `rate`, `tokens` and `concurrency`. */
export interface OutboundLimiterOptions {
  /** Where the budgets live; every process that shares it shares them. Default a MemoryStore (this process only). */
  store?: Store;
  /** Prefix of the store keys. Default `"fg:out"`. */
  prefix?: string;
  /** Calls per window per key: the ceiling; a lower limit the upstream states is learnt under it. */
  rate?: OutboundBudget;
  /** Cost units (tokens) per window per key, reserved at each call's estimate and settled at its actual cost. */
  tokens?: OutboundBudget;
  /**
   * Calls in flight per key, across every process. A slot is held for at most `ttl` (default 60 s, not renewed): a crashed
   * process's slots come back then, and a call running longer than it loses its slot (set `ttl` above your longest call).
   */
  concurrency?: number | { limit: number; ttl?: Duration };
  /** Priority names, highest first. Default `["high", "normal", "low"]`. */
  priorities?: readonly string[];
  /** Calls waiting in this process, every key together: one more is refused with FLOODGATE_QUEUE_FULL. Default 10 000. */
  maxQueue?: number;
  /** The longest a call may wait to start unless it says otherwise; then FLOODGATE_DEADLINE_EXCEEDED. Default `"1m"`. */
  timeout?: Duration;
  /**
   * Hold the key (every process) until the reset when an answer says this many calls or fewer remain, and this process's
   * own count had more left (it does not know of the calls that spent them: another client of the upstream, or a window
   * that opened early). Default 0.
   */
  holdAt?: number;
  /**
   * A window learnt from the upstream (`RateLimit-Policy`'s `w`) is taken this share longer, so a window of ours never
   * opens before the upstream's has closed (calls sent at the start of ours would land at the end of its). Default 0.02.
   */
  windowMargin?: number;
  /** Where time comes from (ms). Default wall time. */
  clock?: Clock;
  /** Runs `fn` after `ms` and returns a function that cancels it: retries and deadlines. Default `setTimeout`; a simulation passes its own. */
  timers?: (fn: () => void, ms: number) => () => void;
}

/** How one call is scheduled. */
export interface ScheduleOptions {
  /** Its cost in `tokens` units, reserved before it runs (an estimate, settled by the call's `settle`). Default 0. */
  cost?: number;
  /** One of the limiter's priorities. Default the middle one (`"normal"`). */
  priority?: string;
  /** Abandons the call while it waits: rejects with FLOODGATE_ABORTED, having spent nothing. */
  signal?: AbortSignal;
  /** The longest it may wait to start (shorter than the limiter's `timeout` only). */
  timeout?: Duration;
}

/** What a scheduled function is given: how to settle its cost, and how to report what the upstream said. */
export interface CallContext {
  /** Settles the call's `tokens` reservation at the actual cost (once; later calls do nothing). Unsettled, the estimate stays charged. */
  settle(actual: number): Promise<void>;
  /** Reports the upstream's answer (its status and limits), which {@link OutboundLimiter.learn} acts on. */
  learn(answer: UpstreamAnswer): Promise<void>;
  /** How long the call waited to start, in ms. */
  readonly waitedMs: number;
}

/** A waiting call. */
interface Waiter {
  readonly key: string;
  readonly cost: number;
  readonly since: number;
  readonly deadline: number;
  start: (held: Held) => void;
  fail: (error: unknown) => void;
  cancelTimer: (() => void) | undefined;
  /** Rejects it with FLOODGATE_DEADLINE_EXCEEDED (when still waiting); its timer is armed once the line has to wait. */
  expire: () => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** What a started call holds, freed when it ends. */
interface Held {
  readonly reservation: Reservation | undefined;
  readonly slot: Slot | undefined;
  /** Calls the key had left in this limiter's count when this one was admitted; undefined without a rate budget. */
  readonly rateRemaining?: number | undefined;
}

/** One key's line in this process, and what this process learnt of the key. */
interface Line {
  readonly queue: FairQueue<Waiter>;
  pumping: boolean;
  /** Cancels the timer that asks the store again (a refusal's retryAfter, or a slot poll). */
  retry: (() => void) | undefined;
  learnt: Learnt | undefined;
  learntTokens: Learnt | undefined;
  /** Waiters whose deadline timers are not armed yet (armed when the line has to wait). */
  unarmed: FairEntry<Waiter>[];
}

/** A limit the upstream stated, under the configured one. */
interface Learnt {
  readonly limit: number;
  readonly windowMs: number;
}

const OWNER = 'OutboundLimiter';
const OPTIONS = [
  'store',
  'prefix',
  'rate',
  'tokens',
  'concurrency',
  'priorities',
  'maxQueue',
  'timeout',
  'holdAt',
  'windowMargin',
  'clock',
  'timers',
] as const;
const DEFAULT_PRIORITIES = ['high', 'normal', 'low'] as const;
/** How often a line whose head waits for a slot freed in another process looks again, in ms. */
const SLOT_POLL_MS = 25;
/** The shortest wait before asking the store again: a refusal that says "retry in 0 ms" must not spin. */
const MIN_RETRY_MS = 2;

/**
 * Schedules calls to an upstream that limits its callers, so that together, across every process sharing the store, they
 * stay within its rate, token and concurrency limits, and hold back at once when it says it is out. See docs/egress.md.
 *
 * ```ts
 * const openai = new OutboundLimiter({ store, rate: { limit: 500, window: '1m' }, tokens: { limit: 30000, window: '1m' }, concurrency: 20 });
 * const answer = await openai.schedule('api.openai.com', async ({ settle, learn }) => {
 *   const res = await fetch(url, init);
 *   await learn(readUpstreamLimits(Object.fromEntries(res.headers), Date.now()), res.status);
 *   const body = await res.json();
 *   await settle(body.usage.total_tokens);
 *   return body;
 * }, { cost: 1200, priority: 'high' });
 * ```
 */
export class OutboundLimiter {
  private readonly clock: Clock;
  private readonly timers: (fn: () => void, ms: number) => () => void;
  private readonly rate: RateLimiter | undefined;
  private readonly tokens: RateLimiter | undefined;
  private readonly slots: ConcurrencyLimiter | undefined;
  private readonly rateCeiling: { limit: number; windowMs: number } | undefined;
  private readonly tokenCeiling: { limit: number; windowMs: number } | undefined;
  private readonly priorities: readonly string[];
  private readonly maxQueue: number;
  private readonly timeoutMs: number;
  private readonly holdAt: number;
  private readonly windowMargin: number;
  private readonly lines = new Map<string, Line>();
  private waiting = 0;

  /**
   * @param options - see {@link OutboundLimiterOptions}
   * @throws FloodgateError UNKNOWN_OPTION, INVALID_OPTIONS, INVALID_LIMIT or INVALID_DURATION on a bad option; INVALID_OPTIONS
   *   when none of rate, tokens and concurrency is given
   */
  constructor(options: OutboundLimiterOptions) {
    assertKnownOptions(options, OPTIONS, OWNER);
    this.clock = optionalFunction(options.clock, `${OWNER} clock`) ?? systemClock;
    this.timers = optionalFunction(options.timers, `${OWNER} timers`) ?? timerScheduler;
    const store = options.store ?? new MemoryStore();
    const prefix = options.prefix ?? 'fg:out';
    if (options.rate === undefined && options.tokens === undefined && options.concurrency === undefined)
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `${OWNER} needs a budget: rate (calls per window), tokens (cost units per window) or concurrency (calls in flight), e.g. { rate: { limit: 100, window: '10s' } }.`,
      );
    if (options.rate !== undefined) {
      const learnt = (key: string): Learnt | undefined => this.lines.get(key)?.learnt;
      this.rate = budget(options.rate, 'rate', store, `${prefix}:rate`, learnt);
      this.rateCeiling = ceiling(this.rate);
    }
    if (options.tokens !== undefined) {
      const learnt = (key: string): Learnt | undefined => this.lines.get(key)?.learntTokens;
      this.tokens = budget(options.tokens, 'tokens', store, `${prefix}:tokens`, learnt);
      this.tokenCeiling = ceiling(this.tokens);
    }
    if (options.concurrency !== undefined) {
      const c = typeof options.concurrency === 'number' ? { limit: options.concurrency } : options.concurrency;
      // No heartbeat: a timer per call would cost more than the call's scheduling; a call must end within the ttl (default
      // 60 s), or its slot goes back and another may start beside it.
      this.slots = new ConcurrencyLimiter({ store, limit: c.limit, ttl: c.ttl ?? '60s', prefix: `${prefix}:slots`, heartbeat: false });
    }
    this.priorities = priorityNames(options.priorities);
    this.maxQueue = wholeNumber(options.maxQueue ?? 10_000, `${OWNER} maxQueue`, { min: 1, max: 10_000_000 });
    this.timeoutMs = parseDuration(options.timeout ?? '1m', `${OWNER} timeout`);
    if (this.timeoutMs > MAX_TIMER_MS)
      invalid(ErrorCode.INVALID_DURATION, `${OWNER} timeout`, `at most ${MAX_TIMER_MS} ms`, options.timeout);
    this.holdAt = wholeNumber(options.holdAt ?? 0, `${OWNER} holdAt`);
    const margin = options.windowMargin ?? 0.02;
    if (typeof margin !== 'number' || !(margin >= 0 && margin <= 1))
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} windowMargin`, 'a number from 0 to 1', margin);
    this.windowMargin = margin;
  }

  /** Calls waiting in this process, every key together. */
  get queued(): number {
    return this.waiting;
  }

  /**
   * Runs `fn` once the key's budgets allow it (a rate unit, its `cost` in tokens, a slot), in priority order, then frees
   * its slot when it ends. Resolves with what `fn` resolves; rejects with what it rejects, or with FLOODGATE_QUEUE_FULL,
   * FLOODGATE_DEADLINE_EXCEEDED (it could not start in time) or FLOODGATE_ABORTED, having spent nothing for those three.
   */
  schedule<T>(key: string, fn: (call: CallContext) => Promise<T> | T, options: ScheduleOptions = {}): Promise<T> {
    let waiter: { held: Held; waitedMs: number } | Promise<{ held: Held; waitedMs: number }>;
    try {
      waiter = this.startNow(key, options) ?? this.startDirect(key, options) ?? this.enqueue(key, options);
    } catch (error) {
      return Promise.reject(error);
    }
    return waiter instanceof Promise ? waiter.then((started) => this.run(key, fn, started)) : this.run(key, fn, waiter);
  }

  /**
   * A call of no token cost whose key has nobody waiting here asks the store for its budgets straight away, without a
   * place in the line (no entry, no deadline, no drain); only when refused does it take the line, whose head then asks
   * again when the refusal says. Nobody waits here, so nobody is overtaken. Undefined when the call must take the line.
   */
  private startDirect(key: string, options: ScheduleOptions): Promise<{ held: Held; waitedMs: number }> | undefined {
    if (options.cost !== undefined && options.cost !== 0) return undefined;
    if (typeof key !== 'string' || key === '' || options.signal?.aborted === true) return undefined;
    const line = this.lines.get(key);
    if (line !== undefined && (line.queue.size > 0 || line.retry !== undefined)) return undefined;
    // The options are checked as the line would check them, before anything is spent.
    this.checkOptions(options);
    return this.take(key, 0).then((taken) => ('retryInMs' in taken ? this.enqueue(key, options) : { held: taken, waitedMs: 0 }));
  }

  /**
   * Starts a call without queueing when nothing of its key waits here and the store answers at once (a rate budget alone on
   * the memory store, a local-first lease, a refusal the store remembers): no line, no deadline timer, no promise hop.
   * Undefined when the call must take the line (its budgets need a store round trip, or a refusal says to wait).
   */
  private startNow(key: string, options: ScheduleOptions): { held: Held; waitedMs: number } | undefined {
    if (this.rate === undefined || this.tokens !== undefined || this.slots !== undefined) return undefined;
    // A call with any option (a misspelt one included, which the line reports) takes the checked way.
    for (const _ in options) return undefined;
    if (typeof key !== 'string' || key === '') return undefined;
    const line = this.lines.get(key);
    if (line !== undefined && (line.queue.size > 0 || line.pumping || line.retry !== undefined)) return undefined;
    const decision = this.rate.consumeNow(key);
    if (decision === undefined || !decision.allowed) return undefined;
    return { held: { reservation: undefined, slot: undefined, rateRemaining: decision.remaining }, waitedMs: 0 };
  }

  private async run<T>(
    key: string,
    fn: (call: CallContext) => Promise<T> | T,
    { held, waitedMs }: { held: Held; waitedMs: number },
  ): Promise<T> {
    let settled = held.reservation === undefined;
    const context: CallContext = {
      waitedMs,
      settle: async (actual) => {
        if (settled) return;
        settled = true;
        await held.reservation!.commit(actual);
      },
      learn: (answer) => this.learnFrom(key, answer, held.rateRemaining),
    };
    try {
      return await fn(context);
    } finally {
      if (held.slot !== undefined) await held.slot.release().catch(() => false);
      this.pumpIfWaiting(key);
    }
  }

  /**
   * Acts on what the upstream said of `key`: a refusal (429, 503) or a remaining at or under `holdAt` (calls; 0 for tokens)
   * blocks the key in the store until the stated reset (or Retry-After), so every process sharing the store holds back; a
   * stated limit under the configured one becomes this process's limit for the key (never above it).
   */
  learn(key: string, answer: UpstreamAnswer): Promise<void> {
    return this.learnFrom(key, answer, undefined);
  }

  /** {@link learn}, knowing how many calls this limiter's count had left when the answered call was admitted. */
  private async learnFrom(key: string, answer: UpstreamAnswer, ours: number | undefined): Promise<void> {
    const line = this.line(key);
    const { requests, tokens, status } = answer;
    if (requests?.limit !== undefined && this.rateCeiling !== undefined)
      line.learnt = lower(this.rateCeiling, requests.limit, this.learntWindow(requests.windowMs, this.rateCeiling));
    if (tokens?.limit !== undefined && this.tokenCeiling !== undefined)
      line.learntTokens = lower(this.tokenCeiling, tokens.limit, this.learntWindow(tokens.windowMs, this.tokenCeiling));
    let holdMs: number | undefined;
    if (status === 429 || status === 503)
      holdMs = requests?.retryAfterMs ?? tokens?.retryAfterMs ?? Math.max(requests?.resetMs ?? 0, tokens?.resetMs ?? 0, 1000);
    else {
      // Out by the upstream's count but not by ours: someone else spent them, or our window opened early. Hold every process.
      if (requests?.remaining !== undefined && requests.remaining <= this.holdAt && (ours === undefined || ours > requests.remaining))
        holdMs = requests.resetMs;
      if (tokens?.remaining === 0 && tokens.resetMs !== undefined) holdMs = Math.max(holdMs ?? 0, tokens.resetMs);
    }
    if (holdMs === undefined || holdMs <= 0) return;
    const limiter = this.rate ?? this.tokens;
    if (limiter !== undefined) await limiter.block(key, holdMs).catch(() => undefined);
  }

  /** A stated window, lengthened by `windowMargin`; the ceiling's when none was stated. */
  private learntWindow(stated: number | undefined, ceiling: Learnt): number {
    return stated === undefined ? ceiling.windowMs : Math.ceil(stated * (1 + this.windowMargin));
  }

  private line(key: string): Line {
    let line = this.lines.get(key);
    if (line === undefined) {
      line = {
        queue: new FairQueue(this.priorities.length),
        pumping: false,
        retry: undefined,
        learnt: undefined,
        learntTokens: undefined,
        unarmed: [],
      };
      this.lines.set(key, line);
    }
    return line;
  }

  /** Checks a call's options (FLOODGATE_INVALID_OPTIONS, _INVALID_COST, _UNKNOWN_OPTION, _CONFLICTING_OPTIONS). */
  private checkOptions(options: ScheduleOptions): void {
    assertKnownOptions(options, ['cost', 'priority', 'signal', 'timeout'], `${OWNER} schedule`);
    if (options.priority !== undefined && !this.priorities.includes(options.priority))
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} schedule priority`, `one of ${this.priorities.join(', ')}`, options.priority);
    if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} schedule signal`, 'an AbortSignal', options.signal);
    if (options.timeout !== undefined) parseDuration(options.timeout, `${OWNER} schedule timeout`);
  }

  private enqueue(key: string, options: ScheduleOptions): Promise<{ held: Held; waitedMs: number }> {
    if (typeof key !== 'string' || key === '') invalid(ErrorCode.INVALID_KEY, `${OWNER} key`, 'a non-empty string', key);
    assertKnownOptions(options, ['cost', 'priority', 'signal', 'timeout'], `${OWNER} schedule`);
    const cost = wholeNumber(options.cost ?? 0, `${OWNER} schedule cost`, { code: ErrorCode.INVALID_COST });
    if (cost > 0 && this.tokens === undefined)
      throw new FloodgateError(
        ErrorCode.CONFLICTING_OPTIONS,
        `${OWNER} schedule cost ${cost} needs a tokens budget to count it in; add tokens: { limit, window }.`,
      );
    const priority = options.priority === undefined ? this.priorities.length >> 1 : this.priorities.indexOf(options.priority);
    if (priority < 0)
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} schedule priority`, `one of ${this.priorities.join(', ')}`, options.priority);
    const timeoutMs =
      options.timeout === undefined
        ? this.timeoutMs
        : Math.min(this.timeoutMs, parseDuration(options.timeout, `${OWNER} schedule timeout`));
    const signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal))
      invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} schedule signal`, 'an AbortSignal', signal);
    if (signal?.aborted === true) return Promise.reject(abortedError(signal));
    if (this.waiting >= this.maxQueue)
      return Promise.reject(
        new FloodgateError(
          ErrorCode.QUEUE_FULL,
          `${OWNER}: ${this.waiting} calls already wait in this process (maxQueue); the call was not scheduled.`,
        ),
      );
    const line = this.line(key);
    const since = this.clock();
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        key,
        cost,
        since,
        deadline: since + timeoutMs,
        start: (held) => resolve({ held, waitedMs: this.clock() - since }),
        fail: reject,
        cancelTimer: undefined,
        expire: () => {},
        signal,
        onAbort: undefined,
      };
      const entry = line.queue.push(priority, '', waiter);
      this.waiting++;
      // Its deadline timer is armed only if it has to wait (see armDeadlines): most calls start in their first turn.
      waiter.expire = () => {
        if (!this.leave(line, entry)) return;
        reject(
          new FloodgateError(
            ErrorCode.DEADLINE_EXCEEDED,
            `${OWNER}: the call to ${JSON.stringify(key)} could not start within ${timeoutMs} ms; nothing was spent.`,
          ),
        );
      };
      line.unarmed.push(entry);
      // Calls that started without waiting leave their entries here until the line next waits: drop them now and then.
      if (line.unarmed.length > 1024 && line.unarmed.length > 2 * line.queue.size)
        line.unarmed = line.unarmed.filter((e) => line.queue.has(e));
      if (signal !== undefined) {
        waiter.onAbort = () => {
          if (this.leave(line, entry)) reject(abortedError(signal));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      // A line waiting for its retry asks the store then, not at every arrival: the budget is spent until that time.
      if (line.retry === undefined) this.pump(key);
    });
  }

  /** Takes a waiter out of its line (timed out, aborted or started); false when it was out already. */
  private leave(line: Line, entry: FairEntry<Waiter>): boolean {
    if (!line.queue.remove(entry)) return false;
    this.waiting--;
    const w = entry.item;
    w.cancelTimer?.();
    if (w.onAbort !== undefined) w.signal!.removeEventListener('abort', w.onAbort);
    return true;
  }

  /** Arms the deadline timers of the line's waiters that have none: the line has to wait now. A deadline already past expires at once. */
  private armDeadlines(line: Line): void {
    if (line.unarmed.length === 0) return;
    const now = this.clock();
    for (const entry of line.unarmed) {
      const w = entry.item;
      if (w.cancelTimer !== undefined || !line.queue.has(entry)) continue;
      w.cancelTimer = this.timers(w.expire, Math.max(0, w.deadline - now));
    }
    line.unarmed = [];
  }

  /** Only a line that waits has anything to start: an idle key costs no pump. */
  private pumpIfWaiting(key: string): void {
    const line = this.lines.get(key);
    if (line !== undefined && line.queue.size > 0) this.pump(key);
  }

  /** Starts the line's head calls while the budgets allow; asks again when a refusal says to, or a slot is freed here. */
  private pump(key: string): void {
    const line = this.lines.get(key);
    if (line === undefined || line.pumping) return;
    line.retry?.();
    line.retry = undefined;
    line.pumping = true;
    void this.drain(key, line).finally(() => {
      line.pumping = false;
    });
  }

  private async drain(key: string, line: Line): Promise<void> {
    for (;;) {
      const head = line.queue.peek();
      if (head === undefined) {
        line.unarmed = [];
        // Nothing waits: the line is forgotten unless it keeps something learnt.
        if (line.learnt === undefined && line.learntTokens === undefined) this.lines.delete(key);
        return;
      }
      let taken: Held | { retryInMs: number };
      try {
        taken = await this.take(key, head.item.cost);
      } catch (error) {
        // The store failed (and no fallback answered): the head gets the error, the line goes on with the next.
        if (this.leave(line, head)) head.item.fail(error);
        continue;
      }
      if ('retryInMs' in taken) {
        this.armDeadlines(line);
        line.retry = this.timers(
          () => {
            line.retry = undefined;
            this.pump(key);
          },
          Math.max(MIN_RETRY_MS, Math.min(taken.retryInMs, head.item.deadline - this.clock())),
        );
        return;
      }
      // The head timed out or was abandoned while the store answered: what it took goes back.
      if (!this.leave(line, head)) {
        await giveBack(taken);
        continue;
      }
      head.item.start(taken);
    }
  }

  /** Takes the waiter's budgets in turn (tokens, rate, slot); on a refusal gives back what it took and says when to ask again. */
  private async take(key: string, cost: number): Promise<Held | { retryInMs: number }> {
    let reservation: Reservation | undefined;
    if (this.tokens !== undefined && cost > 0) {
      reservation = await this.tokens.reserve(key, cost);
      if (!reservation.allowed) return { retryInMs: reservation.decision.retryAfterMs };
    }
    let rateRemaining: number | undefined;
    if (this.rate !== undefined) {
      // Answered at once where the store can (memory, a local-first lease, a remembered refusal): no promise to wait on.
      const decision = this.rate.consumeNow(key) ?? (await this.rate.consume(key));
      if (!decision.allowed) {
        if (reservation !== undefined) await reservation.cancel().catch(() => undefined);
        return { retryInMs: decision.retryAfterMs };
      }
      rateRemaining = decision.remaining;
    }
    let slot: Slot | undefined;
    if (this.slots !== undefined) {
      slot = await this.slots.acquire(key);
      if (!slot.allowed) {
        await giveBack({ reservation, slot: undefined });
        if (this.rate !== undefined) await this.rate.reward(key).catch(() => undefined);
        return { retryInMs: Math.min(SLOT_POLL_MS, slot.retryAfterMs || SLOT_POLL_MS) };
      }
    }
    return { reservation, slot, rateRemaining };
  }
}

async function giveBack(held: Held): Promise<void> {
  await held.reservation?.cancel().catch(() => undefined);
  await held.slot?.release().catch(() => false);
}

/** The learnt limit for a key, or undefined when the stated one is not below the ceiling (the ceiling holds). */
function lower(ceiling: Learnt, limit: number, windowMs: number): Learnt | undefined {
  if (limit < 1 || windowMs < 1) return undefined;
  // Lower in both its burst and its rate; anything else would let the upstream's own words raise a ceiling.
  if (limit > ceiling.limit || limit / windowMs > ceiling.limit / ceiling.windowMs) return undefined;
  return { limit, windowMs };
}

function budget(b: OutboundBudget, name: string, store: Store, prefix: string, learnt: (key: string) => Learnt | undefined): RateLimiter {
  assertKnownOptions(b, ['limit', 'window', 'algorithm'], `${OWNER} ${name}`);
  return new RateLimiter({
    store,
    prefix,
    limit: b.limit,
    window: b.window,
    algorithm: b.algorithm ?? 'fixed-window',
    overrides: (key): PolicyOverride | undefined => {
      const l = learnt(key);
      return l === undefined ? undefined : { limit: l.limit, window: l.windowMs };
    },
  });
}

/** A budget's configured limit and window: the ceiling nothing learnt goes above. */
function ceiling(limiter: RateLimiter): Learnt {
  const policy = limiter.policyFor('ceiling');
  return { limit: policy.limit, windowMs: policy.windowMs };
}

function priorityNames(value: unknown): readonly string[] {
  if (value === undefined) return DEFAULT_PRIORITIES;
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    value.length > 16 ||
    value.some((v, i) => typeof v !== 'string' || v === '' || value.indexOf(v) !== i)
  )
    invalid(ErrorCode.INVALID_OPTIONS, `${OWNER} priorities`, 'a list of 1 to 16 distinct names, highest first', value);
  return Object.freeze([...(value as string[])]);
}
