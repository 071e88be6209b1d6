/** The HTTP middleware's own answers and user hooks. */
/**
 * Refusal responses, onLimited, onDecision, onError, and units rewarded through the timeout.
 */
import { CallGuard } from './call-guard.js';
import type { Rewarder } from './rewards.js';
import { rateLimitHeaders, retryAfterSeconds, type HeaderPair, type PolicyReport } from './headers.js';
import { continueWith } from './limiter-parts.js';
import type { Decision } from '../core/decision.js';
import type { RequestContext } from './request-context.js';
import type { HttpSettings } from './settings.js';
import { QUOTA_EXCEEDED_TYPE, REDUCED_CAPACITY_TYPE, RefusalBodies } from './refusal.js';
import type { DecisionInfo, HttpOutcome, RefusalInfo } from './types.js';

/**
 * What every decision path of {@link HttpLimiter} ends in: a refusal built
 * and reported to the hooks, a decision reported, an error handed to
 * `onError`. Hooks never throw into the request path.
 */
export class LimiterHooks<Raw> {
  /** The refusal bodies, each distinct built-in one rendered once. */
  protected readonly bodies: RefusalBodies;
  /** The middleware's own timeout around each limiter call. */
  protected readonly guard: CallGuard;

  /** @param settings - the checked options */
  constructor(protected readonly settings: HttpSettings<Raw>) {
    this.bodies = new RefusalBodies(settings.body);
    this.guard = new CallGuard(settings.timeoutMs);
  }

  /** Hands an error that the adapter met (or got back as `{ action: "error" }`) to `onError`; never throws. */
  reportError(error: unknown, raw: Raw | undefined): void {
    this.report(error, raw);
  }

  /** Rewards a policy's units through the middleware's timeout; resolves to the state after, or undefined when that failed (reported). */
  protected rewarder(raw: Raw): Rewarder {
    return (policy, key, cost) =>
      this.guard.wrap(policy.limiter.reward(key, cost)).then(undefined, (error: unknown) => {
        this.report(error, raw);
        return undefined;
      });
  }

  /** Builds the middleware's own response and fires `onLimited` for limited ones. */
  protected refuse(
    raw: Raw,
    partial: Partial<RefusalInfo> & Pick<RefusalInfo, 'reason' | 'status' | 'key' | 'ip'>,
    headers: readonly HeaderPair[],
    problemType = QUOTA_EXCEEDED_TYPE,
  ): HttpOutcome {
    const info: RefusalInfo = { retryAfterSeconds: undefined, policies: [], violatedPolicies: [], ...partial };
    const { contentType, body } = this.bodies.render(info, problemType);
    if (info.reason === 'limited' && this.settings.onLimited !== undefined) this.safely(() => this.settings.onLimited!(raw, info), raw);
    return { action: 'respond', status: info.status, headers, contentType, body };
  }

  /**
   * The refusal of a request some policy limited: headers, Retry-After, body,
   * hooks; in shadow mode, the request going on instead (see {@link shadowed}).
   * @param retryAfter - the Retry-After seconds when the caller already drew them (a shared refusal is keyed by them)
   */
  protected limited(
    ctx: RequestContext<Raw>,
    decisions: ReadonlyArray<Decision | undefined>,
    reports: PolicyReport[],
    rateHeaders: readonly HeaderPair[],
    storeErrors: unknown[],
    retryAfter: number | undefined = this.retryAfter(reports),
  ): HttpOutcome {
    if (this.settings.shadow) return this.shadowed(ctx, reports, storeErrors);
    const { raw, key, cost } = ctx;
    const ip = ctx.identity.ip;
    const violated = reports.filter((r) => !r.allowed);
    const headers: HeaderPair[] = [...rateHeaders];
    if (retryAfter !== undefined) headers.push(['Retry-After', String(retryAfter)]);
    const failClosed = decisions.every((d) => d === undefined || d.allowed || d.source === 'fail-closed');
    const info = {
      reason: 'limited',
      status: this.settings.statusCode,
      key,
      ip,
      policies: reports,
      violatedPolicies: violated.map((r) => r.name),
      retryAfterSeconds: retryAfter,
    } as const;
    const outcome = this.refuse(raw, info, headers, failClosed ? REDUCED_CAPACITY_TYPE : QUOTA_EXCEEDED_TYPE);
    this.decided(raw, { key, ip, cost, allowed: false, status: this.settings.statusCode, policies: reports, errors: storeErrors });
    return outcome;
  }

  /** Retry-After for `reports`, spread by `retryAfterJitter` when it is set. */
  protected retryAfter(reports: readonly PolicyReport[]): number | undefined {
    const jitter = this.settings.retryAfterJitter;
    return retryAfterSeconds(reports, jitter === undefined ? 0 : jitter.draw());
  }

  /**
   * A would-be refusal on a shadow route: the request goes on, nothing more
   * spent than the refusal spent (nothing; the other policies' units were
   * given back as for any refusal). The refusing policies are reported as a
   * shadow limiter reports its refusals (admitted, marked `shadowLimited`,
   * with the refusal's numbers), so the RateLimit fields describe the real
   * state; no Retry-After is sent. Nothing waits for the response's end:
   * no slot was taken and no units are held.
   */
  protected shadowed(ctx: RequestContext<Raw>, reports: readonly PolicyReport[], storeErrors: readonly unknown[]): HttpOutcome {
    const { raw, key, cost } = ctx;
    const marked = reports.map((r) => (r.allowed ? r : { ...r, allowed: true, shadowLimited: true as const }));
    const headers = rateLimitHeaders(this.settings.modes, marked, Date.now());
    this.decided(raw, {
      key,
      ip: ctx.identity.ip,
      cost,
      allowed: true,
      status: undefined,
      policies: marked,
      errors: storeErrors,
      shadowLimited: true,
    });
    return continueWith(headers, key, cost, marked, true);
  }

  /** Fires `onDecision`, when set. */
  protected decided(raw: Raw, info: DecisionInfo): void {
    if (this.settings.onDecision !== undefined) this.safely(() => this.settings.onDecision!(raw, info), raw);
  }

  /** Runs a user hook; a throw or a rejection goes to onError instead of the request. */
  protected safely(hook: () => void | Promise<void>, raw: Raw): void {
    try {
      const result = hook();
      if (result !== undefined && typeof (result as Promise<void>).then === 'function') {
        (result as Promise<void>).then(undefined, (error: unknown) => this.report(error, raw));
      }
    } catch (error) {
      this.report(error, raw);
    }
  }

  /** Hands an error to `onError`; an onError that throws is ignored. */
  protected report(error: unknown, raw: Raw | undefined): void {
    try {
      this.settings.onError(error, raw);
    } catch {
      // An onError that throws must not turn a handled failure into an unhandled one.
    }
  }
}
