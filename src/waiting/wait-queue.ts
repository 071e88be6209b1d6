/** WaitQueue: callers of one key wait in FIFO order for an attempt (a consume, an acquire) to succeed. */
/**
 * The attempt is retried by timer when it may succeed, never past a deadline.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { MAX_TIMER_MS } from '../core/validate.js';

/** What one attempt answered: admitted, or refused with the ms until it may succeed. */
export type AttemptResult<T> =
  | { readonly admitted: true; readonly value: T }
  | {
      readonly admitted: false;
      readonly value: T;
      readonly retryInMs: number;
      /**
       * True when the attempt may succeed at any moment (a slot freed in another
       * process) and `retryInMs` is only how soon to look again: the last look
       * is then moved to fit before the deadline instead of giving up early.
       */
      readonly poll?: boolean;
    };

/** One try of the waiter's operation; it runs only while the waiter is at the head of its key's line. */
export type Attempt<T> = () => Promise<AttemptResult<T>>;

/** How a wait ended. */
export type WaitResult<T> =
  /** The attempt succeeded after `waitedMs`. */
  | { readonly status: 'admitted'; readonly value: T; readonly waitedMs: number }
  /** The next retry would have fallen after the deadline: `retryInMs` more would have been needed. */
  | { readonly status: 'timeout'; readonly value: T; readonly waitedMs: number; readonly retryInMs: number }
  /**
   * The key's line already held `maxQueue` waiters: refused at once, without
   * an attempt. `value` is the line's latest refusal, if it had one yet.
   */
  | { readonly status: 'full'; readonly value: T | undefined; readonly waitedMs: 0; readonly retryInMs: number }
  /**
   * The caller's signal aborted while it waited: it left its line at once,
   * and no attempt of its own is made after that (one already in flight that
   * admits after all goes to `late`).
   */
  | { readonly status: 'aborted'; readonly waitedMs: number };

/** Runs `fn` after `ms`; returns a function that cancels it. */
export type Scheduler = (fn: () => void, ms: number) => () => void;

/** Options of {@link WaitQueue}. */
export interface WaitQueueOptions {
  /** Most waiters per key; one more is refused at once. */
  readonly maxQueue: number;
  /** Time source of deadlines and waited times. Default `Date.now`. */
  readonly clock?: Clock;
  /** Timer source; tests pass one driven by a ManualClock. Default {@link timerScheduler}. */
  readonly schedule?: Scheduler;
  /**
   * Shortest delay between two attempts of one line, in ms. A store that says
   * "retry in 0 ms" and still refuses (a unit taken by another process in
   * between) would otherwise be asked in a tight loop. Default 4.
   */
  readonly minRetryMs?: number;
}

interface Waiter<T> {
  readonly attempt: Attempt<T>;
  readonly deadline: number;
  readonly since: number;
  readonly resolve: (result: WaitResult<T>) => void;
  readonly reject: (error: unknown) => void;
  /** Takes back an admission that answered after this waiter's deadline (see {@link WaitQueue.run}). */
  readonly late: ((value: T) => void) | undefined;
  /** Answered at its deadline (or on abort) while its attempt was in flight: that attempt's answer is no longer its own. */
  gone: boolean;
  /** Stops listening to the caller's abort signal; undefined without one. */
  unlisten: (() => void) | undefined;
}

interface Line<T> {
  readonly waiters: Waiter<T>[];
  /** An attempt of the head is in flight. */
  busy: boolean;
  /** A local event asked for a retry while the attempt was in flight: its refusal may already be stale. */
  woken: boolean;
  /** Cancels the pending retry; undefined when none is pending. */
  cancel: (() => void) | undefined;
  /** When the pending retry runs (clock time); 0 when none is pending. */
  retryAt: number;
  /** The latest refusal, for callers refused because the line is full. */
  last: T | undefined;
  /** How long the latest attempt took to answer (ms): a retry that would answer only after the deadline is not made. */
  answerMs: number;
  /** When the attempt in flight started; undefined when the refusal being handled came from the caller. */
  startedAt: number | undefined;
  /** Cancels the deadline of the head whose attempt is in flight. */
  cancelDeadline: (() => void) | undefined;
}

/**
 * The default scheduler: a plain `setTimeout`. It holds the event loop open
 * on purpose: a timer exists only while a caller awaits the wait it times
 * (bounded by that caller's deadline), and an unref'd one would let a script
 * whose only work is `await limiter.consume(…)` exit mid-wait (exit code 13,
 * the call lost). {@link WaitQueue.close} cancels them all.
 */
export const timerScheduler: Scheduler = (fn, ms) => {
  const timer = setTimeout(fn, Math.min(ms, MAX_TIMER_MS));
  return () => clearTimeout(timer);
};

/**
 * Per-key FIFO lines of waiters. Only the head of a line attempts; it retries
 * when its last refusal said the attempt may succeed (or sooner, when
 * {@link wake} reports a local event such as a released slot), and the others
 * wait behind it in arrival order, so a newcomer never overtakes a waiter of
 * its process. No waiter is kept whose next retry would fall after its
 * deadline: it is refused at once with the time it would have needed.
 *
 * Across processes there is no order: each process's head asks the shared
 * store, which decides.
 */
export class WaitQueue<T> {
  private readonly lines = new Map<string, Line<T>>();
  private readonly maxQueue: number;
  private readonly clock: Clock;
  private readonly schedule: Scheduler;
  private readonly minRetryMs: number;
  private closed = false;

  /** @param options - see {@link WaitQueueOptions} */
  constructor(options: WaitQueueOptions) {
    this.maxQueue = options.maxQueue;
    this.clock = options.clock ?? systemClock;
    this.schedule = options.schedule ?? timerScheduler;
    this.minRetryMs = options.minRetryMs ?? 4;
  }

  /** Waiters in `key`'s line, the head included. */
  waiting(key: string): number {
    return this.lines.get(key)?.waiters.length ?? 0;
  }

  /** Keys with waiters. */
  get keys(): number {
    return this.lines.size;
  }

  /**
   * Waits in `key`'s line until `attempt` admits, or until its next retry
   * would fall after `deadline` (clock time). With nobody ahead, the attempt
   * runs at once, unless `refused` is the answer of one the caller just made
   * (then the retry is scheduled from it, sparing a second store call).
   * Rejects when the attempt rejects, and with CLOSED after {@link close}.
   *
   * No wait outlasts its deadline: a head whose attempt is still in flight
   * then is answered `timeout` at once, and should that attempt admit after
   * all, its value goes to `late`, which gives it back (the caller was told
   * no). Without `late` (or before any refusal was seen) the attempt is
   * awaited instead.
   *
   * When `signal` aborts (the caller went away), the waiter leaves its line
   * at once and is answered `aborted`: nothing more is attempted for it, and
   * an attempt of it already in flight that admits goes to `late`. A signal
   * aborted already answers `aborted` before anything is attempted.
   */
  run(
    key: string,
    attempt: Attempt<T>,
    deadline: number,
    refused?: AttemptResult<T>,
    late?: (value: T) => void,
    signal?: AbortSignal,
  ): Promise<WaitResult<T>> {
    if (this.closed) return Promise.reject(closedError());
    if (signal?.aborted === true) return Promise.resolve({ status: 'aborted', waitedMs: 0 });
    let line = this.lines.get(key);
    const now = this.clock();
    if (line !== undefined && line.waiters.length >= this.maxQueue) {
      return Promise.resolve({ status: 'full', value: line.last, waitedMs: 0, retryInMs: this.lineRetryIn(line, now) });
    }
    // Behind a head that retries only after this deadline, nothing can admit this waiter in time.
    if (line !== undefined && line.retryAt + line.answerMs > deadline && line.last !== undefined) {
      return Promise.resolve({ status: 'timeout', value: line.last, waitedMs: 0, retryInMs: line.retryAt - now });
    }
    if (line === undefined) {
      line = {
        waiters: [],
        busy: false,
        woken: false,
        cancel: undefined,
        retryAt: 0,
        last: undefined,
        answerMs: 0,
        startedAt: undefined,
        cancelDeadline: undefined,
      };
      this.lines.set(key, line);
    }
    const waiters = line.waiters;
    return new Promise<WaitResult<T>>((answered, failed) => {
      // However the wait ends, the caller's signal is let go, so a long-lived signal does not collect listeners.
      const resolve = (result: WaitResult<T>): void => {
        waiter.unlisten?.();
        answered(result);
      };
      const reject = (error: unknown): void => {
        waiter.unlisten?.();
        failed(error);
      };
      const waiter: Waiter<T> = { attempt, deadline, since: now, resolve, reject, late, gone: false, unlisten: undefined };
      if (signal !== undefined) {
        const onAbort = (): void => this.abort(key, line, waiter);
        signal.addEventListener('abort', onAbort, { once: true });
        waiter.unlisten = () => signal.removeEventListener('abort', onAbort);
      }
      waiters.push(waiter);
      // Behind others, or behind an attempt whose waiter left at its deadline: that attempt's answer drives the line.
      if (waiters.length > 1 || line.busy) return;
      // The caller's own refusal, handled in the same instant it joined: a wait of 0 whatever the clock reads next.
      if (refused !== undefined && !refused.admitted) this.answered(key, line, waiter, refused, now);
      else this.pump(key, line);
    });
  }

  /**
   * A local event may let `key`'s head succeed now (a slot released in this
   * process): retry it at once instead of at its scheduled time.
   */
  wake(key: string): void {
    const line = this.lines.get(key);
    if (line === undefined) return;
    if (line.busy) {
      line.woken = true;
      return;
    }
    if (line.cancel === undefined) return;
    line.cancel();
    line.cancel = undefined;
    line.retryAt = 0;
    this.pump(key, line);
  }

  /** Cancels every pending retry and rejects every waiter with CLOSED; later calls reject at once. */
  close(): void {
    this.closed = true;
    const error = closedError();
    for (const line of this.lines.values()) {
      line.cancel?.();
      line.cancel = undefined;
      this.stopDeadline(line);
      for (const waiter of line.waiters.splice(0)) waiter.reject(error);
    }
    this.lines.clear();
  }

  /** Runs the head's attempt, then answers it or schedules its retry. */
  private pump(key: string, line: Line<T>): void {
    const head = line.waiters[0];
    if (head === undefined || this.closed) {
      if (this.lines.get(key) === line) this.lines.delete(key);
      return;
    }
    const now = this.clock();
    // A late timer (a busy event loop), or the waiters drained one by one ahead of this one, must not
    // start an attempt that would answer past the deadline.
    if (now + line.answerMs > head.deadline && line.last !== undefined) {
      const retryInMs = Math.max(line.answerMs, this.minRetryMs);
      this.answerHead(key, line, { status: 'timeout', value: line.last, waitedMs: now - head.since, retryInMs });
      return;
    }
    line.busy = true;
    line.woken = false;
    line.startedAt = now;
    if (head.late !== undefined) line.cancelDeadline = this.schedule(() => this.expire(key, line, head), Math.max(0, head.deadline - now));
    let pending: Promise<AttemptResult<T>>;
    try {
      pending = head.attempt();
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (result) => {
        this.stopDeadline(line);
        if (!head.gone) {
          this.answered(key, line, head, result);
          return;
        }
        // Its waiter was answered at the deadline: an admission goes back; a refusal is the line's news for the next head.
        line.busy = false;
        line.startedAt = undefined;
        if (result.admitted) head.late!(result.value);
        else line.last = result.value;
        const next = line.waiters[0];
        if (!result.admitted && next !== undefined && !this.closed) this.answered(key, line, next, result);
        else this.pump(key, line);
      },
      (error: unknown) => {
        this.stopDeadline(line);
        line.busy = false;
        line.startedAt = undefined;
        if (!head.gone) {
          line.waiters.shift();
          head.reject(error);
        }
        this.pump(key, line);
      },
    );
  }

  /**
   * `waiter`'s caller went away: it leaves the line now. A head whose attempt
   * is in flight is marked gone, so that attempt's admission goes to its
   * `late` (without `late`, the attempt's answer is awaited as at a deadline).
   */
  private abort(key: string, line: Line<T>, waiter: Waiter<T>): void {
    const at = line.waiters.indexOf(waiter);
    if (at < 0) return;
    const inFlight = at === 0 && line.busy;
    if (inFlight && waiter.late === undefined) return;
    line.waiters.splice(at, 1);
    waiter.gone = inFlight;
    waiter.resolve({ status: 'aborted', waitedMs: this.clock() - waiter.since });
    if (inFlight) {
      this.stopDeadline(line);
      return;
    }
    if (at === 0) {
      // The head left while its retry was scheduled: the next waiter takes its place at that retry.
      if (line.waiters.length === 0) {
        line.cancel?.();
        line.cancel = undefined;
        line.retryAt = 0;
        if (this.lines.get(key) === line) this.lines.delete(key);
      }
    }
  }

  /** The head's deadline came while its attempt was in flight: it is answered now, and the attempt's answer goes to its `late`. */
  private expire(key: string, line: Line<T>, head: Waiter<T>): void {
    line.cancelDeadline = undefined;
    const value = line.last;
    if (!line.busy || line.waiters[0] !== head || value === undefined) return;
    head.gone = true;
    line.waiters.shift();
    const now = this.clock();
    head.resolve({ status: 'timeout', value, waitedMs: now - head.since, retryInMs: Math.max(line.answerMs, this.minRetryMs) });
    if (this.lines.get(key) === line && line.waiters.length === 0 && !line.busy) this.lines.delete(key);
  }

  private stopDeadline(line: Line<T>): void {
    line.cancelDeadline?.();
    line.cancelDeadline = undefined;
  }

  private answered(key: string, line: Line<T>, head: Waiter<T>, result: AttemptResult<T>, at?: number): void {
    line.busy = false;
    if (this.closed) return;
    const now = at ?? this.clock();
    if (line.startedAt !== undefined) line.answerMs = now - line.startedAt;
    line.startedAt = undefined;
    if (result.admitted) {
      // Answered past the deadline before its timer could run (a busy event loop): not the caller's any more.
      if (head.late !== undefined && now > head.deadline && line.last !== undefined) {
        head.late(result.value);
        const retryInMs = Math.max(line.answerMs, this.minRetryMs);
        this.answerHead(key, line, { status: 'timeout', value: line.last, waitedMs: now - head.since, retryInMs });
        return;
      }
      this.answerHead(key, line, { status: 'admitted', value: result.value, waitedMs: now - head.since });
      return;
    }
    line.last = result.value;
    let delay = line.woken ? this.minRetryMs : Math.max(result.retryInMs, this.minRetryMs);
    // A poll whose interval would overshoot the deadline looks once more just before it.
    if (result.poll === true) delay = Math.max(this.minRetryMs, Math.min(delay, head.deadline - now - line.answerMs));
    const retryAt = now + delay;
    if (!(retryAt + line.answerMs <= head.deadline)) {
      const retryInMs = Math.max(result.retryInMs, delay);
      this.answerHead(key, line, { status: 'timeout', value: result.value, waitedMs: now - head.since, retryInMs }, retryAt);
      return;
    }
    this.dropHopeless(line, 1, retryAt, now);
    line.retryAt = retryAt;
    line.cancel = this.schedule(() => {
      line.cancel = undefined;
      line.retryAt = 0;
      this.pump(key, line);
    }, delay);
  }

  /**
   * Ends the head's wait with `result` and lets the next waiter attempt. When
   * the head timed out, waiters behind it whose deadline falls before
   * `retryAt` go too: in FIFO order none of them is admitted before it.
   */
  private answerHead(key: string, line: Line<T>, result: WaitResult<T>, retryAt?: number): void {
    const head = line.waiters.shift()!;
    head.resolve(result);
    if (retryAt !== undefined) this.dropHopeless(line, 0, retryAt, this.clock());
    this.pump(key, line);
  }

  /** Refuses the waiters from index `from` on whose deadline falls before the line's next retry at `retryAt`. */
  private dropHopeless(line: Line<T>, from: number, retryAt: number, now: number): void {
    const value = line.last;
    if (value === undefined) return;
    const waiters = line.waiters;
    for (let i = waiters.length - 1; i >= from; i--) {
      const w = waiters[i]!;
      if (w.deadline >= retryAt + line.answerMs) continue;
      waiters.splice(i, 1);
      w.resolve({ status: 'timeout', value, waitedMs: now - w.since, retryInMs: retryAt - now });
    }
  }

  private lineRetryIn(line: Line<T>, now: number): number {
    return line.retryAt > now ? line.retryAt - now : this.minRetryMs;
  }
}

function closedError(): FloodgateError {
  return new FloodgateError(ErrorCode.CLOSED, 'The wait queue was closed; calls waiting in it were rejected, and new ones are.');
}
