/** The HTTP middleware's work that lasts as long as a response. */
/**
 * A concurrency slot held until it ends, units settled at the actual cost when it ends, and units rewarded by the
 * reward rule.
 */
import type { ServerResponse } from 'node:http';
import type { Decision } from '../core/decision.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError, isStoreFailure } from '../core/errors.js';
import { LIMITER_INTERNALS } from '../limiter/internals.js';
import { holdReservation, type Reservation } from '../limiter/reservation.js';
import type { Slot } from '../limiter/concurrency-limiter.js';
import { rewardWhenDone } from './count-by-outcome.js';
import { whenHandlerDone } from './handler-done.js';
import { LimiterHooks } from './limiter-hooks.js';
import { keyAt } from './policy-keys.js';
import type { RequestContext } from './request-context.js';
import type { NamedPolicy } from './settings.js';
import type { DecisionInfo, HttpOutcome, RateLimitInfo } from './types.js';

/**
 * The base of HttpLimiter that follows admitted requests to the end of
 * their responses. Adapters call {@link watchResponse} with every admitted
 * request's response; the decision paths end in {@link admitted}.
 */
export class ResponseBound<Raw> extends LimiterHooks<Raw> {
  /** What counted each admitted request (policies, keys, cost, reservations), while its response runs; only when something acts at its end. */
  private readonly countedBy = new WeakMap<RateLimitInfo, RequestContext<Raw>>();
  /** The concurrency slot each admitted request holds. */
  private readonly slots = new WeakMap<RateLimitInfo, Slot>();

  /**
   * True when a limiter of the route may wait (`wait`): adapters then give
   * each request an abort signal (`RequestView.signal`, read by
   * {@link waitOptions}), so a wait ends when its client leaves.
   */
  get mayWait(): boolean {
    return (this.waitsMemo ??=
      this.settings.selectPolicies !== undefined ||
      this.settings.policies.some((p) => p.limiter[LIMITER_INTERNALS]().waits) ||
      this.settings.concurrency?.limiter.waits === true);
  }
  private waitsMemo: boolean | undefined;

  /** The options of a call that may wait: the request's abort signal, so a client that leaves abandons the wait. */
  protected waitOptions(ctx: RequestContext<Raw>, waits: boolean): { signal: AbortSignal } | undefined {
    if (!waits) return undefined;
    const signal = ctx.view.signal?.();
    return signal === undefined ? undefined : { signal };
  }

  /** True when the route holds a concurrency slot per request: adapters then do not hand the app a request whose client already left. */
  get holdsSlots(): boolean {
    return this.settings.concurrency !== undefined;
  }

  /** True when an admitted request's units are held as reservations: settled after the response, or rewarded (the reservation cancelled) for want of a slot. */
  protected get holdsUnits(): boolean {
    return this.settings.actualCost !== undefined || this.settings.concurrency !== undefined;
  }

  /**
   * Reads each policy's clock before the stores decide; called only when
   * units are held as reservations ({@link holdsUnits}): a reward must never
   * land in a window that did not count the units, and those bounds are
   * taken from this instant.
   */
  protected noteStart(ctx: RequestContext<Raw>): void {
    ctx.started = ctx.policies.map((p) => p.limiter[LIMITER_INTERNALS]().clock());
  }

  /**
   * Called by the adapter with an admitted request's response: frees its
   * concurrency slot and settles its units at `actualCost` once the work
   * behind the response is over: when it finishes, or, when the client left
   * first, when the handler ends it (at most `leftBoundMs` after the client
   * left; default the slot's ttl), since frameworks run a handler on after
   * its socket closed. The reward rule rewards units when the response
   * ends. Does nothing when none of these is set.
   */
  watchResponse(raw: Raw, res: ServerResponse, info: RateLimitInfo | undefined, leftBoundMs?: number): void {
    if (info === undefined) return;
    const counted = this.countedBy.get(info);
    const slot = this.slots.get(info);
    const bound = leftBoundMs ?? this.settings.concurrency?.limiter.ttlMs;
    if (slot !== undefined) whenHandlerDone(res, () => this.quietly(slot.release(), raw), bound);
    if (counted === undefined) return;
    const rule = this.settings.rewardRule;
    if (rule !== undefined) {
      // A shadow limiter's would-be refusal spent nothing, so it has nothing to give back.
      const spentNothing = info.policies.filter((p) => p.shadowLimited === true).map((p) => p.name);
      const reward = (policy: NamedPolicy, key: string, cost: number): void => {
        if (!spentNothing.includes(policy.name)) this.quietly(policy.limiter.reward(key, cost), raw);
      };
      rewardWhenDone(raw, res, counted, rule, reward, (error) => this.report(error, raw));
    }
    const actualCost = this.settings.actualCost;
    const reservations = counted.reservations;
    if (actualCost !== undefined && reservations !== undefined) {
      whenHandlerDone(res, () => this.quietly(this.settle(raw, res, info.cost, reservations, actualCost), raw), bound);
    }
  }

  /**
   * An admitted request that will not be served after all (a later rule
   * refused it, or an upgrade's tunnel ended): frees its concurrency slot
   * now instead of when a response ends. Its units stay spent, as for any
   * request that was made.
   */
  release(raw: Raw, info: RateLimitInfo | undefined): void {
    if (info === undefined) return;
    const slot = this.slots.get(info);
    if (slot === undefined) return;
    this.slots.delete(info);
    this.quietly(slot.release(), raw);
  }

  /**
   * The end of every admitting decision path: remembers what counted the
   * request when its response's end matters, takes its concurrency slot, and
   * reports the decision (`onDecision`) as it finally stands.
   * @param decisions - each policy's decision, in order (undefined where its store failed)
   */
  protected admitted(
    ctx: RequestContext<Raw>,
    outcome: HttpOutcome,
    decisions: ReadonlyArray<Decision | undefined>,
    decided: DecisionInfo,
  ): HttpOutcome | Promise<HttpOutcome> {
    const raw = ctx.raw;
    if (outcome.action !== 'continue' || outcome.info === undefined || (this.settings.rewardRule === undefined && !this.holdsUnits)) {
      this.decided(raw, decided);
      return outcome;
    }
    const info = outcome.info;
    const headers = outcome.headers;
    const reservations = this.holdsUnits ? this.reserved(ctx, decisions) : undefined;
    ctx.reservations = reservations;
    this.countedBy.set(info, ctx);
    const concurrency = this.settings.concurrency;
    if (concurrency === undefined) {
      this.decided(raw, decided);
      return outcome;
    }
    const slotCall = concurrency.limiter.acquire(info.key, this.waitOptions(ctx, concurrency.limiter.waits));
    return this.guard.wrap(slotCall).then(
      (slot) => {
        if (slot.allowed) {
          if (slot.shadowLimited === true) {
            // A shadow concurrency limiter had no slot free: the request goes on holding none, its units held as usual.
            const marked: RateLimitInfo = { ...info, shadowLimited: true };
            this.countedBy.set(marked, ctx);
            this.decided(raw, { ...decided, shadowLimited: true });
            return { ...outcome, info: marked };
          }
          this.slots.set(info, slot);
          this.decided(raw, decided);
          return outcome;
        }
        this.cancel(raw, reservations);
        if (this.settings.shadow) {
          // As the refusal would: the units given back and no slot held, so nothing waits for the response's end.
          this.countedBy.delete(info);
          this.decided(raw, { ...decided, shadowLimited: true });
          return { ...outcome, info: { ...info, shadowLimited: true } };
        }
        const status = this.settings.statusCode;
        const refusal = { reason: 'limited', status, key: info.key, ip: decided.ip, policies: info.policies } as const;
        this.decided(raw, { ...decided, allowed: false, status });
        return this.refuse(raw, { ...refusal, violatedPolicies: [concurrency.name] }, headers);
      },
      (error: unknown) => {
        // The middleware's timeout gave up on a slow store; a slot that store grants later was never this
        // request's, and its heartbeat would keep it taken for ever: free it when it comes.
        if (this.guard.timedOut(error))
          this.quietly(
            slotCall.then((late) => late.release()),
            raw,
          );
        if (!isStoreFailure(error)) {
          this.cancel(raw, reservations);
          return { action: 'error', error } as const;
        }
        this.report(error, raw);
        if (this.settings.passOnStoreError) {
          this.decided(raw, { ...decided, errors: [...decided.errors, error] });
          return outcome;
        }
        this.cancel(raw, reservations);
        const status = this.settings.storeErrorStatus;
        this.decided(raw, { ...decided, allowed: false, status, errors: [...decided.errors, error] });
        return this.refuse(raw, { reason: 'store-error', status, key: info.key, ip: decided.ip, policies: info.policies, error }, []);
      },
    );
  }

  /** Each counting policy's units as a reservation of the request's cost. */
  private reserved(ctx: RequestContext<Raw>, decisions: ReadonlyArray<Decision | undefined>): Reservation[] {
    const { key, keys, cost, started } = ctx;
    const held: Reservation[] = [];
    ctx.policies.forEach((policy, i) => {
      const decision = decisions[i];
      // A store that failed (the request passed by onStoreError) spent nothing to settle.
      if (decision === undefined) return;
      const limiter = policy.limiter;
      const at = started?.[i] ?? limiter[LIMITER_INTERNALS]().clock();
      // No ttl: the ttl lets a reservation whose holder crashed lapse at its estimate, and this one is held by this
      // process, settled when its response ends however long that takes (a stream can outlast many windows, and
      // its excess is then charged to the window current at the end).
      held.push(holdReservation(limiter, keyAt(key, keys, i), cost, decision, at, Number.POSITIVE_INFINITY));
    });
    return held;
  }

  /** Cancels a refused request's reservations, which rewards their units (a slot was not to be had, or its store failed). */
  private cancel(raw: Raw, reservations: readonly Reservation[] | undefined): void {
    for (const reservation of reservations ?? []) this.quietly(reservation.cancel(), raw);
  }

  /** Commits every reservation at the response's actual cost; a cost that is not a whole number ≥ 0 keeps the estimate and is reported. */
  private async settle(
    raw: Raw,
    res: ServerResponse,
    estimate: number,
    reservations: readonly Reservation[],
    actualCost: NonNullable<typeof this.settings.actualCost>,
  ): Promise<void> {
    let actual = await actualCost(raw, res);
    if (actual !== undefined && !(Number.isSafeInteger(actual) && actual >= 0)) {
      this.report(
        new FloodgateError(
          ErrorCode.INVALID_COST,
          `actualCost must return a whole number ≥ 0 or undefined; got ${describeValue(actual)}, so the estimate ${estimate} stays charged.`,
        ),
        raw,
      );
      actual = undefined;
    }
    await Promise.all(reservations.map((reservation) => reservation.commit(actual ?? estimate)));
  }

  /** Runs a settlement without waiting for it; a failure goes to onError. */
  private quietly(work: Promise<unknown>, raw: Raw): void {
    work.then(undefined, (error: unknown) => this.report(error, raw));
  }
}
