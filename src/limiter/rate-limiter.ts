/** RateLimiter: validates options, then runs each call through the limiter's guards and its store. */
/**
 * In order: the block list, the circuit breaker, the store and the fallbacks.
 */
import type { Clock } from '../core/clock.js';
import { toDecision, type Decision, type DecisionSource } from '../core/decision.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { isStoreFailure, toStoreError, type FloodgateError } from '../core/errors.js';
import { CircuitBreaker } from '../guards/breaker.js';
import { MemoryBlockGuard } from '../guards/memory-block.js';
import { capacityOf, BLOCK_FOREVER, scopePolicy, type OperationKind, type Outcome, type Policy } from '../core/policy.js';
import { clockOption, hashTagOption, prefixOption, storeKeyOf, storeOption } from './setup.js';
import type { Store } from '../stores/store.js';
import { assertKey, assertKnownOptions, assertUnits } from '../core/validate.js';
import { LapseProbes, type Probe } from '../guards/lapse-probe.js';
import { holdReservation, reserve, type Reservation, type ReserveOptions } from './reservation.js';
import { LIMITER_INTERNALS, type FailureHandling, type LimiterCore, type LimiterInternals } from './internals.js';
import { LimiterWaiting } from './waiting.js';
import { inspectKey, unblockKey, type KeyInspection } from './admin.js';
import { overrideResolver, type OverrideResolver } from './overrides.js';
import { circuitOpenError, fallbackDecision, refused } from './fallback.js';
import { limiterHealth, type LimiterHealth } from './health.js';
import { parseShadow, shadowDecision } from './shadow.js';
import {
  callSignal,
  isRateLimiter,
  RATE_LIMITER_BRAND,
  OPTION_NAMES,
  parseBreaker,
  parseFailureHandling,
  parseMemoryBlock,
  parsePolicy,
  type RateLimiterOptions,
  type WaitCallOptions,
} from './options.js';

/**
 * A rate limiter: one policy applied to many keys.
 *
 * Being limited is a normal result: every method resolves to a
 * {@link Decision}. A promise rejects only with a {@link FloodgateError}: for
 * an invalid argument, or when the store fails and neither `insurance` nor a
 * fail-open / fail-closed mode is configured.
 */
export class RateLimiter implements LimiterCore {
  /**
   * `value instanceof RateLimiter` is also true for a RateLimiter of the
   * package's other build (ESM or CommonJS, both loaded in one process): both
   * mark their instances with the same registered symbol, and every method
   * the middleware calls is on the instance.
   */
  static [Symbol.hasInstance](value: unknown): value is RateLimiter {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    return this === RateLimiter && isRateLimiter(value);
  }

  /** The validated policy. */
  readonly policy: Policy;
  /** The store in use. */
  readonly store: Store;
  /** The key namespace in the store. */
  readonly prefix: string;
  /** The `hashTag` option: one key's counters of limiters sharing it stay in one Redis Cluster slot. */
  readonly hashTag: string | undefined;
  /** Shadow mode (the `shadow` option): consumes the policy would refuse are admitted, marked `shadowLimited`. */
  readonly shadow: boolean;
  private readonly clock: Clock;
  private readonly memoryBlock: MemoryBlockGuard | undefined;
  /** Store calls in flight for keys whose in-memory block just ended (see LapseProbes). */
  private readonly probes = new LapseProbes((key, amount, probe) => this.ask('consume', key, amount, probe));
  private readonly breaker: CircuitBreaker | undefined;
  private readonly failures: FailureHandling;
  private internals: LimiterInternals | undefined;
  private readonly waiting: LimiterWaiting | undefined;
  private readonly overrides: OverrideResolver | undefined;

  /** @param options - see {@link RateLimiterOptions}; invalid ones throw a FloodgateError. */
  constructor(options: RateLimiterOptions) {
    assertKnownOptions(options, OPTION_NAMES, 'RateLimiter');
    const o = options as RateLimiterOptions;

    this.policy = parsePolicy(o);
    this.shadow = parseShadow(o, 'RateLimiter');
    this.clock = clockOption(o);
    this.store = storeOption(o, this.clock);
    this.prefix = prefixOption(o, this.policy, this.store, this);
    this.hashTag = hashTagOption(o, this.prefix);
    scopePolicy(this.policy, this.prefix);
    this.overrides = o.overrides === undefined ? undefined : overrideResolver(o.overrides, o.execEvenly === true, this.policy);
    const blockRule = parseMemoryBlock(o.inMemoryBlock, capacityOf(this.policy));
    // What the block learned under a key's old override no longer holds once the overrides change.
    const changed = (): boolean => this.overrides?.takeChange() === true;
    this.memoryBlock = blockRule === undefined ? undefined : new MemoryBlockGuard(blockRule, this.clock, changed);
    this.breaker = parseBreaker(o.breaker);

    this.failures = { ...parseFailureHandling(o, this.store), breaker: this.breaker, clock: this.clock };
    const { policy, store, prefix, clock } = this;
    const [consume, consumeNow] = [this.consumeOnce.bind(this), this.consumeNowOnce.bind(this)];
    const giveBack = (key: string, cost: number, decision: Decision, at: number): void =>
      // Best effort: a give-back that fails leaves the units spent, never more than the caller was refused.
      void holdReservation(this, key, cost, decision, at, this.policyFor(key).windowMs)
        .cancel()
        .catch(() => undefined);
    const policyFor = (key: string): Policy => this.policyFor(key);
    this.waiting = LimiterWaiting.fromOptions(o, { policy, policyFor, store, prefix, clock, consume, consumeNow, giveBack });
  }

  /**
   * Spends `cost` units of `key`'s quota if they fit (with `wait`: once they
   * fit, within its timeout; with `execEvenly`: resolving at the key's next slot).
   * @param options - `signal`: abandons the wait when it aborts (see {@link WaitCallOptions})
   * @returns the decision; `allowed: false` when limited (nothing is spent then).
   * @throws FloodgateError ABORTED (as a rejection) when `signal` aborted while the call waited
   */
  consume(key: string, cost = 1, options?: WaitCallOptions): Promise<Decision> {
    let signal: AbortSignal | undefined;
    try {
      signal = callSignal(options, 'consume');
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.shadow) return this.consumeOnce(key, cost).then(shadowDecision);
    return this.waiting === undefined ? this.consumeOnce(key, cost) : this.waiting.consume(key, cost, signal);
  }

  private consumeOnce(key: string, cost: number): Promise<Decision> {
    // Decided in memory when possible: an async run and its awaits cost more than the whole decision then.
    let now: Decision | undefined;
    try {
      now = this.consumeNowOnce(key, cost);
    } catch (error) {
      return Promise.reject(error);
    }
    return now === undefined ? this.run('consume', key, cost) : Promise.resolve(now);
  }

  /**
   * {@link consume}, decided synchronously when that needs no waiting: the
   * in-memory block already refuses `key`, or the store can answer at once
   * (`Store.applyNow`: the memory store always, local-first while a lease
   * covers the call, the cluster store for a key the primary reported
   * refused). Otherwise undefined, and nothing was spent: call `consume`.
   * Callers that answer requests themselves (the HTTP middleware) skip a
   * promise per request this way; `consume` tries the same first.
   * @throws FloodgateError for an invalid key or cost, or a misconfigured store, as consume would reject
   */
  consumeNow(key: string, cost = 1): Decision | undefined {
    if (this.shadow) {
      const now = this.consumeNowOnce(key, cost);
      return now === undefined ? undefined : shadowDecision(now);
    }
    return this.waiting === undefined ? this.consumeNowOnce(key, cost) : this.waiting.consumeNow(key, cost);
  }

  /** Where `key`'s counter lives in the store: `PREFIX:KEY`, or `PREFIX:{HASHTAG:KEY}` with a hash tag. */
  storeKey(key: string): string {
    return storeKeyOf(this.prefix, this.hashTag, key);
  }

  /**
   * The policy that decides `key`: its entry in the `overrides` option when
   * one matches, else {@link policy}.
   * @throws FloodgateError for an invalid override an `overrides` function returned
   */
  policyFor(key: string): Policy {
    return this.overrides === undefined ? this.policy : this.overrides.policyFor(key);
  }

  private consumeNowOnce(key: string, cost: number): Decision | undefined {
    assertKey(key);
    const policy = this.policyFor(key);
    assertUnits(cost, 'cost', capacityOf(policy));
    const blocks = this.memoryBlock;
    if (blocks !== undefined) {
      const blockedMs = blocks.check(key);
      if (blockedMs > 0) return this.decision(refused(blockedMs), 'memory-block', policy);
    }
    const store = this.store;
    if (store.applyNow === undefined) return undefined;
    let outcome: Outcome | undefined;
    try {
      outcome = store.applyNow({ kind: 'consume', key: this.storeKey(key), amount: cost, policy });
    } catch (error) {
      const failure = toStoreError(error, store.name);
      // A misconfiguration throws as consume would reject; a store that breaks its no-outage promise
      // spent nothing, so consume (with its breaker and fallback) is left to decide.
      if (!isStoreFailure(failure)) throw failure;
      return undefined;
    }
    if (outcome === undefined) return undefined;
    if (blocks) {
      // Answered without a store call, so a lapse this lookup found must not make a much later
      // consume hold others back: forget it (at time 0 the answer is always no).
      blocks.takeLapsed(key, 0);
      blocks.learn(key, 'consume', outcome, policy);
    }
    return this.decision(outcome, 'store', policy);
  }

  /**
   * True while the circuit breaker keeps calls away from the store: open
   * after repeated failures, or half-open with its one probe still out.
   * False once the cooldown has passed (the next call probes), and always
   * with `breaker: false`. The gateway's `/readyz` reads it: a store whose
   * connection is up but which does not answer shows here first.
   */
  circuitOpen(): boolean {
    return this.breaker?.anyOpen(this.clock()) ?? false;
  }

  /** Reports `key`'s state without spending; `allowed` tells whether a cost-1 consume would pass. */
  peek(key: string): Promise<Decision> {
    try {
      assertKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.run('peek', key, 0);
  }

  /** Gives `points` units back to `key` (e.g. a request that turned out not to count). */
  reward(key: string, points = 1): Promise<Decision> {
    try {
      assertKey(key);
      assertUnits(points, 'points');
    } catch (error) {
      return Promise.reject(error);
    }
    // Units given back may admit a call waiting for them now rather than at its scheduled retry.
    return this.waiting === undefined
      ? this.run('reward', key, points)
      : this.run('reward', key, points).finally(() => this.waiting!.wake(key));
  }

  /** Spends `points` more units of `key`, even past the limit. */
  penalty(key: string, points = 1): Promise<Decision> {
    try {
      assertKey(key);
      assertUnits(points, 'points');
    } catch (error) {
      return Promise.reject(error);
    }
    return this.run('penalty', key, points);
  }

  /** Blocks `key` for `duration`, or until {@link reset} with `"forever"`. */
  block(key: string, duration: Duration | 'forever'): Promise<Decision> {
    let amount: number;
    try {
      assertKey(key);
      amount = duration === 'forever' ? BLOCK_FOREVER : parseDuration(duration, 'duration');
    } catch (error) {
      return Promise.reject(error);
    }
    return this.run('block', key, amount);
  }

  /**
   * Holds `estimate` units of `key` until the real cost is known: consumes
   * the estimate now, as {@link consume} does. The {@link Reservation}'s
   * `commit(actual)` then gives back what was not used, or charges the excess
   * even past the limit; `cancel()` gives the estimate back. One not settled
   * within `ttl` (default: the window) stays charged at the estimate.
   * docs/reservations.md has the rules.
   * @throws FloodgateError (as a rejection) for an invalid key, estimate or option, as consume would for a cost
   */
  reserve(key: string, estimate: number, options?: ReserveOptions): Promise<Reservation> {
    return reserve(this, key, estimate, options);
  }

  /** Forgets `key`'s usage and any block. */
  async reset(key: string): Promise<void> {
    assertKey(key);
    await this.run('reset', key, 0);
    this.waiting?.wake(key);
  }

  /**
   * Ends `key`'s block (one set by {@link block} or by `blockDuration`) and
   * keeps its count: a key also over its limit stays refused until its
   * window allows. Resolves to the key's state afterwards.
   */
  unblock(key: string): Promise<Decision> {
    return unblockKey(this, key);
  }

  /** `key`'s state in the store and in this process's in-memory block, spending nothing. */
  inspect(key: string): Promise<KeyInspection> {
    return inspectKey(this, key);
  }

  /**
   * Forgets this process's in-memory block of `key` and lets the key's
   * waiting calls retry now, without asking the store: for when another
   * process changed the key in the store (reset or unblocked it), which this
   * process's block cannot see. Its next consume asks the store.
   */
  forgetMemoryBlock(key: string): void {
    this.memoryBlock?.forget(key);
    this.probes.forget(key);
    this.waiting?.wake(key);
  }

  /**
   * {@link forgetMemoryBlock} for every key: for when this process may have
   * missed another's reset or unblock (its announcement was lost), so no
   * block it holds can be trusted. Each blocked key's next consume asks the
   * store once, which blocks it again if it still is; waiting calls retry at
   * the times already set.
   */
  forgetMemoryBlocks(): void {
    this.memoryBlock?.forgetAll();
    this.probes.forgetAll();
  }

  /** The circuit breaker of store key `storeKey`'s failure scope (see Store.failureScope): the limiter's own for a store that fails as one. */
  private breakerFor(storeKey: string): CircuitBreaker | undefined {
    const breaker = this.breaker;
    return breaker === undefined || this.store.failureScope === undefined ? breaker : breaker.forScope(this.store.failureScope(storeKey));
  }

  /** The circuit breaker's state and what decides while the store fails, as a dashboard shows them. */
  health(): LimiterHealth {
    return limiterHealth(this.failures);
  }

  /**
   * One operation through the in-memory block and the lapse probe to the store. Not async: on the common path it
   * hands back the store call's own promise, sparing a promise and its turns per call; a throw (a clock, an
   * override) still comes back as a rejection.
   */
  private run(kind: OperationKind, key: string, amount: number): Promise<Decision> {
    try {
      const blocks = this.memoryBlock;
      if (blocks === undefined) return this.ask(kind, key, amount);
      if (kind === 'reset' || kind === 'reward') {
        blocks.forget(key);
        // Consumes held back for answers given before this call would be refused on counts it changes.
        this.probes.forget(key);
        return this.ask(kind, key, amount);
      }
      if (kind !== 'consume' && kind !== 'peek') return this.ask(kind, key, amount);
      const now = this.clock();
      const blockedMs = blocks.check(key, now);
      if (blockedMs > 0) return Promise.resolve(this.decision(refused(blockedMs), 'memory-block', this.policyFor(key)));
      return kind === 'consume' ? this.consumeUnblocked(blocks, key, amount, now) : this.ask(kind, key, amount);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** A consume of a key the in-memory block does not hold: through the key's lapse probe when its block just ended (see LapseProbes). */
  private consumeUnblocked(blocks: MemoryBlockGuard, key: string, amount: number, now: number): Promise<Decision> {
    const probe = this.probes.current(key);
    if (probe === undefined) return blocks.takeLapsed(key, now) ? this.probes.start(key, amount) : this.ask('consume', key, amount);
    if (probe.joinable) return this.probes.join(probe, key, amount);
    // With the breaker open the fallback answers at once: nothing to wait for.
    if (this.breakerFor(this.storeKey(key))?.isOpen(now)) return this.ask('consume', key, amount);
    return this.afterProbe(probe, key, amount);
  }

  /** A consume that waits for the key's lapse probe to be answered, then follows what it found. */
  private async afterProbe(probe: Probe, key: string, amount: number): Promise<Decision> {
    await probe.answered;
    if (probe.failure !== undefined) return this.fallback('consume', key, amount, probe.failure);
    return this.run('consume', key, amount);
  }

  /**
   * Asks the store, through the circuit breaker, falling back when it fails;
   * feeds the block list from its answer. A store failure is noted on
   * `probe`, for the consumes waiting on it.
   */
  private async ask(kind: OperationKind, key: string, amount: number, probe?: Probe, fallback = true): Promise<Decision> {
    // Made once: the breaker's failure scope and the store call both name the key's store key.
    const storeKey = this.storeKey(key);
    const breaker = this.breakerFor(storeKey);
    if (breaker && !breaker.allow(this.clock())) {
      const open = circuitOpenError(this.store.name, breaker.retryInMs(this.clock()));
      if (!fallback) throw open;
      return this.fallback(kind, key, amount, open);
    }

    let outcome: Outcome;
    const policy = this.policyFor(key);
    try {
      outcome = await this.store.apply({ kind, key: storeKey, amount, policy });
    } catch (error) {
      const failure = toStoreError(error, this.store.name);
      // A misconfiguration the store reports (e.g. two policies under one
      // prefix) is not an outage: falling back would hide it.
      if (!isStoreFailure(failure)) throw failure;
      breaker?.failure(this.clock());
      if (probe) probe.failure = failure;
      if (!fallback) throw failure;
      return this.fallback(kind, key, amount, failure);
    }
    breaker?.success();
    this.memoryBlock?.learn(key, kind, outcome, policy);
    return this.decision(outcome, 'store', policy);
  }

  /**
   * A reservation's give-back or excess charge: on the store alone (no
   * fallback held the units), rejecting when it fails. Settled in the lease
   * in hand when the store can (`Store.settleNow`), without a store call.
   */
  private settle(kind: 'reward' | 'penalty', key: string, amount: number): Promise<Decision> {
    if (kind === 'reward') {
      this.memoryBlock?.forget(key);
      this.probes.forget(key);
    }
    const policy = this.policyFor(key);
    const outcome = this.store.settleNow?.({ kind, key: this.storeKey(key), amount, policy });
    let settled: Promise<Decision>;
    if (outcome === undefined) {
      settled = this.ask(kind, key, amount, undefined, false);
    } else {
      this.memoryBlock?.learn(key, kind, outcome, policy);
      settled = Promise.resolve(this.decision(outcome, 'store', policy));
    }
    return kind === 'reward' && this.waiting !== undefined ? settled.finally(() => this.waiting!.wake(key)) : settled;
  }

  private fallback(kind: OperationKind, key: string, amount: number, failure: FloodgateError): Promise<Decision> {
    const insured = (insurance: LimiterCore): Promise<Decision> => insurance[LIMITER_INTERNALS]().run(kind, key, amount);
    return fallbackDecision(this.failures, failure, insured, () => this.policyFor(key));
  }

  /** The pieces of this limiter's pipeline a composite decision drives (src/limiter/composite.ts); the symbol is not exported. */
  [LIMITER_INTERNALS](): LimiterInternals {
    return (this.internals ??= {
      ...this.failures,
      memoryBlock: this.memoryBlock,
      waits: this.waiting !== undefined,
      forget: (key) => this.forgetMemoryBlock(key),
      decision: (outcome, source, policy) => this.decision(outcome, source, policy),
      run: (kind, key, amount) => this.run(kind, key, amount),
      settle: (kind, key, amount) => this.settle(kind, key, amount),
    });
  }

  private decision(outcome: Outcome, source: DecisionSource, policy: Policy): Decision {
    return toDecision(outcome, policy, source);
  }
}

// On the prototype, so every instance carries it without a per-instance field.
Object.defineProperty(RateLimiter.prototype, RATE_LIMITER_BRAND, { value: true });
