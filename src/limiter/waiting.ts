/** LimiterWaiting: a RateLimiter's `wait` and `execEvenly` options, wrapped around its ordinary consume. */
import type { Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { parseExecEvenly, parseWait, type RateLimiterOptions, type WaitConfig } from './options.js';
import { Pacer } from '../waiting/pacing.js';
import { capacityOf, type Policy } from '../core/policy.js';
import type { Store } from '../stores/store.js';
import { assertKey, assertUnits } from '../core/validate.js';
import { WarningCode, warnOnce } from '../core/warnings.js';
import { timerScheduler, WaitQueue, type AttemptResult, type Scheduler } from '../waiting/wait-queue.js';

/** What {@link LimiterWaiting} needs of its limiter. */
export interface WaitingDeps {
  /** The checked `wait` option; undefined for no waiting. */
  readonly wait: WaitConfig | undefined;
  /** The `execEvenly` option. */
  readonly execEvenly: boolean;
  readonly policy: Policy;
  /** The policy of one key (the limiter's, or the key's override). */
  readonly policyFor: (key: string) => Policy;
  readonly store: Store;
  readonly prefix: string;
  readonly clock: Clock;
  /** One consume as the limiter decides it without waiting. */
  readonly consume: (key: string, cost: number) => Promise<Decision>;
  /** One synchronous consume as the limiter decides it without waiting (undefined: ask `consume`). */
  readonly consumeNow: (key: string, cost: number) => Decision | undefined;
  /**
   * Gives back a consume admitted after its caller's deadline (the caller was
   * refused): `decision` is that consume's, asked at `at` (the clock, read
   * before the store decided).
   */
  readonly giveBack: (key: string, cost: number, decision: Decision, at: number) => void;
  /** Timer source. Default {@link timerScheduler}. */
  readonly schedule?: Scheduler;
}

/**
 * A limiter's waiting: with `wait`, a refused consume waits in its key's FIFO
 * line (see {@link WaitQueue}) and is retried when the decision's
 * `retryAfterMs` has passed; with `execEvenly`, an admitted consume resolves
 * at its pacing slot (see {@link Pacer}). Every decision it returns carries
 * `waitedMs`.
 */
export class LimiterWaiting {
  private readonly queue: WaitQueue<Decision> | undefined;
  private readonly pacer: Pacer | undefined;

  /** @param deps - the limiter's options and its consume without waiting */
  constructor(private readonly deps: WaitingDeps) {
    const schedule = deps.schedule ?? timerScheduler;
    if (deps.wait !== undefined) this.queue = new WaitQueue({ maxQueue: deps.wait.maxQueue, clock: deps.clock, schedule });
    if (deps.execEvenly) this.pacer = new Pacer(deps.store, deps.prefix, deps.policy, schedule);
  }

  /**
   * The waiting of a limiter with `options`, checked; undefined when it has
   * neither `wait` nor `execEvenly`.
   */
  static fromOptions(options: RateLimiterOptions, deps: Omit<WaitingDeps, 'wait' | 'execEvenly'>): LimiterWaiting | undefined {
    const wait = parseWait(options.wait);
    const execEvenly = parseExecEvenly(options.execEvenly);
    if (wait !== undefined) warnShortWait(wait.timeoutMs, deps.policy);
    return wait === undefined && !execEvenly ? undefined : new LimiterWaiting({ ...deps, wait, execEvenly });
  }

  /** Calls of `key` waiting in this process. */
  waiting(key: string): number {
    return this.queue?.waiting(key) ?? 0;
  }

  /**
   * RateLimiter.consume with waiting: see the `wait` and `execEvenly` options.
   * A call whose `signal` aborts while it waits rejects with ABORTED, having
   * spent nothing.
   */
  async consume(key: string, cost: number, signal?: AbortSignal): Promise<Decision> {
    assertKey(key);
    assertUnits(cost, 'cost', capacityOf(this.deps.policyFor(key)));
    const queue = this.queue;
    if (queue === undefined) {
      const decision = await this.deps.consume(key, cost);
      return decision.allowed ? this.paced(decision, key, cost, 0) : { ...decision, waitedMs: 0 };
    }
    if (signal?.aborted === true) throw abortedError(signal);
    const deadline = this.deps.clock() + this.deps.wait!.timeoutMs;
    // With nobody of the key waiting, calls are decided in parallel as without waiting; only a refused one joins the line
    // (so maxQueue counts calls that wait, and a burst the store admits is not asked one by one).
    let first: AttemptResult<Decision> | undefined;
    if (queue.waiting(key) === 0) {
      first = await this.attempt(key, cost);
      if (first.admitted) return this.paced(first.value, key, cost, 0);
    }
    // Each attempt's start, so that one admitted after the deadline is given back by the rules of a reservation's cancel.
    const started = new WeakMap<Decision, number>();
    const attempt = async (): Promise<AttemptResult<Decision>> => {
      const at = this.deps.clock();
      const answer = await this.attempt(key, cost);
      started.set(answer.value, at);
      return answer;
    };
    const late = (decision: Decision): void => this.deps.giveBack(key, cost, decision, started.get(decision) ?? this.deps.clock());
    const result = await queue.run(key, attempt, deadline, first, late, signal);
    switch (result.status) {
      case 'aborted':
        throw abortedError(signal!);
      case 'admitted':
        return this.paced(result.value, key, cost, result.waitedMs);
      case 'timeout':
        return { ...result.value, allowed: false, retryAfterMs: Math.max(1, result.retryInMs), waitedMs: result.waitedMs };
      case 'full': {
        const retryAfterMs = Math.max(1, result.retryInMs);
        const { limit, windowMs } = this.deps.policyFor(key);
        const base = result.value ?? { limit, windowMs, remaining: 0, resetMs: retryAfterMs, source: 'store' as const };
        return { ...base, allowed: false, retryAfterMs, waitedMs: 0 };
      }
    }
  }

  /**
   * RateLimiter.consumeNow with waiting: a decision only when the call is
   * admitted at once with nobody of its key waiting ahead and no pacing delay
   * to serve; otherwise undefined, and nothing was spent.
   */
  consumeNow(key: string, cost: number): Decision | undefined {
    // A pacing slot is a store answer, so an admitted consume's delay cannot be known synchronously;
    // and one admitted here would already have spent its units.
    if (this.pacer !== undefined) {
      assertKey(key);
      assertUnits(cost, 'cost', capacityOf(this.deps.policyFor(key)));
      return undefined;
    }
    if (this.waiting(key) > 0) {
      assertKey(key);
      assertUnits(cost, 'cost', capacityOf(this.deps.policyFor(key)));
      return undefined;
    }
    const decision = this.deps.consumeNow(key, cost);
    // A refusal spent nothing, so consume may wait for it.
    return decision?.allowed ? { ...decision, waitedMs: 0 } : undefined;
  }

  /** Units of `key` were given back in this process: its first waiting call retries now. */
  wake(key: string): void {
    this.queue?.wake(key);
  }

  /** Rejects every waiting call with CLOSED and cancels their timers. */
  close(): void {
    this.queue?.close();
  }

  private async attempt(key: string, cost: number): Promise<AttemptResult<Decision>> {
    const decision = await this.deps.consume(key, cost);
    return decision.allowed ? { admitted: true, value: decision } : { admitted: false, value: decision, retryInMs: decision.retryAfterMs };
  }

  private async paced(decision: Decision, key: string, cost: number, waitedMs: number): Promise<Decision> {
    const pacedMs = this.pacer === undefined ? 0 : await this.pacer.pace(key, cost);
    return { ...decision, waitedMs: waitedMs + pacedMs };
  }
}

/** The rejection of a call whose signal aborted while it waited. */
export function abortedError(signal: AbortSignal): FloodgateError {
  return new FloodgateError(
    ErrorCode.ABORTED,
    'The call was abandoned while it waited: its signal aborted before it was admitted, and it spent nothing.',
    signal.reason,
  );
}

/**
 * Warns once when `timeoutMs` is shorter than the time the policy takes to
 * free one unit: a refused call then rarely gets one before its timeout
 * (under a fixed window, only when the window happens to end in time).
 */
function warnShortWait(timeoutMs: number, policy: Policy): void {
  const unitMs = Math.ceil(policy.windowMs / policy.limit);
  if (timeoutMs >= unitMs) return;
  warnOnce(
    WarningCode.WAIT_SHORTER_THAN_UNIT,
    `RateLimiter wait.timeout is ${timeoutMs} ms, shorter than window/limit (${unitMs} ms), the time the limiter takes to free one unit: a refused call is rarely admitted before its timeout, so most waits end refused anyway. If waiting was meant, raise the timeout to at least ${unitMs} ms; to refuse at once, leave wait out.`,
    `${timeoutMs}:${policy.limit}:${policy.windowMs}`,
  );
}

/**
 * Warns once per limiter prefix that `consumeAll` decided a part whose
 * limiter has `wait` or `execEvenly`: a composite answers at once, so those
 * options apply to the limiter's own consume only.
 */
export function warnCompositeDoesNotWait(prefix: string): void {
  warnOnce(
    WarningCode.COMPOSITE_DOES_NOT_WAIT,
    `consumeAll decides at once: the RateLimiter with prefix ${JSON.stringify(prefix)} has wait or execEvenly, which apply only to its own consume(), so this composite (a route with several policies, too) neither waited nor paced. To wait for a composite, retry after the decision's retryAfterMs; to silence this, leave wait and execEvenly off limiters used in consumeAll.`,
    prefix,
  );
}
