/** The HTTP middleware's own answers and user hooks: refusal responses, onLimited, onDecision, onError, and units given back through the timeout. */
import { CallGuard } from './call-guard.js';
import type { GiveBack } from './give-back.js';
import type { HeaderPair } from './headers.js';
import type { HttpSettings } from './options.js';
import { QUOTA_EXCEEDED_TYPE, RefusalBodies } from './refusal.js';
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

  /** Gives a policy's units back through the middleware's timeout; resolves to the state after, or undefined when that failed (reported). */
  protected giveBack(raw: Raw): GiveBack {
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
