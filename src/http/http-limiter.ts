/** HttpLimiter: the one HTTP path every adapter runs. */
/**
 * Request view → client identity → key → every policy's decision → a response to send, or "continue".
 */
import type { Decision } from '../core/decision.js';
import { isStoreFailure } from '../core/errors.js';
import { LIMITER_INTERNALS } from '../limiter/internals.js';
import { rateLimitHeaders, type HeaderPair, type PolicyReport } from './headers.js';
import { checkedKey, continueWith, isThenable, toReport } from './limiter-parts.js';
import { compositeReports, decidableTogether } from './together.js';
import { rewardAdmitting, rewardLate, rewardLateComposite } from './rewards.js';
import { consumeAll, consumeAllNow, type CompositeDecision } from '../limiter/composite.js';
import { boundKey, headerValue } from './client-keys.js';
import { ClientIdentities } from './identity.js';
import { resolveHttpOptions, listMatches } from './options.js';
import { SharedRefusals } from './refusal.js';
import { ResponseBound } from './response-bound.js';
import { hasOwnKeys, keyAt, policyKeys } from './policy-keys.js';
import { clientOf, type RequestContext } from './request-context.js';
import type { NamedPolicy } from './settings.js';
import type { HttpRateLimitOptions, AdapterConfig, HttpOutcome, RequestView, ApiKeySource } from './types.js';

const NO_ERRORS: readonly unknown[] = Object.freeze([]);

const CONTINUE: HttpOutcome = Object.freeze({ action: 'continue', headers: Object.freeze([]) as readonly HeaderPair[] });

/**
 * The shared request → key → decision → response path. Built once per
 * middleware (all options validated up front), then {@link handle} is
 * called per request and never rejects.
 */
export class HttpLimiter<Raw> extends ResponseBound<Raw> {
  /** Shared single-policy refusals by what they depend on; see {@link limitedOne}. */
  private readonly refusals: SharedRefusals;
  /** Who each request comes from, memoised per socket or framework address. */
  private readonly identities: ClientIdentities<Raw>;
  /** True when requests are identified by the framework's address; adapters read it only then (Express computes `req.ip` on each read). */
  readonly usesFrameworkIp: boolean;
  /** The route's fixed policies when none has a key of its own (the usual route), else undefined. */
  private readonly plainPolicies: readonly NamedPolicy[] | undefined;

  /**
   * @param options - see {@link HttpRateLimitOptions}
   * @param adapter - what the calling adapter supports
   * @throws FloodgateError for any invalid option (UNKNOWN_OPTION, INVALID_OPTIONS, CONFLICTING_OPTIONS, …)
   */
  constructor(options: HttpRateLimitOptions<Raw>, adapter: AdapterConfig) {
    super(resolveHttpOptions(options, adapter));
    this.usesFrameworkIp = this.settings.usesFrameworkIp;
    this.plainPolicies = hasOwnKeys(this.settings.policies) ? undefined : this.settings.policies;
    this.refusals = new SharedRefusals(this.settings.sharesRefusals, this.settings.legacyHeaders, this.settings.retryAfterJitter?.draw);
    this.identities = new ClientIdentities(this.settings);
  }

  /** The names of this route's policies, in order (none when a function picks them per request). */
  get policyNames(): readonly string[] {
    return this.settings.policies.map((p) => p.name);
  }

  /**
   * Decides about one request: synchronously when nothing has to be waited
   * for (a refusal the in-memory block already knows, a deny list entry, a
   * missing API key, a skipped request), else through a promise. Adapters
   * act at once on a plain outcome: under a flood of refusals that spares
   * every promise turn of the store path. Never throws, and the promise
   * never rejects: errors from user callbacks come back as
   * `{ action: "error" }` for the framework's error handling, store
   * failures as a response or a pass (per `onStoreError`).
   */
  decide(view: RequestView<Raw>): HttpOutcome | Promise<HttpOutcome> {
    try {
      const outcome = this.evaluate(view);
      return isThenable(outcome) ? Promise.resolve(outcome).then(undefined, errorOutcome) : outcome;
    } catch (error) {
      return errorOutcome(error);
    }
  }

  /** {@link decide}, always as a promise. */
  async handle(view: RequestView<Raw>): Promise<HttpOutcome> {
    return this.decide(view);
  }

  // The stages below pass one RequestContext along, filling it in as they learn the request's key, policies and cost.
  // They return a plain outcome when they can, and a promise only when a user callback or a store call makes them
  // wait: most key functions are synchronous, and every await is a microtask turn per request.

  /** Identity, then `skip`. */
  private evaluate(view: RequestView<Raw>): HttpOutcome | Promise<HttpOutcome> {
    // Every field present from the start: one shape for every request's context.
    const ctx: RequestContext<Raw> = {
      view,
      raw: view.raw,
      identity: this.identities.identify(view),
      client: undefined,
      key: '',
      policies: this.settings.policies,
      keys: undefined,
      cost: 0,
      started: undefined,
      reservations: undefined,
    };
    const skip = this.settings.skip;
    if (skip === undefined) return this.keyed(ctx);
    const skipped = skip(ctx.raw, clientOf(ctx));
    if (isThenable(skipped)) return Promise.resolve(skipped).then((s) => (s === true ? CONTINUE : this.keyed(ctx)));
    return skipped === true ? CONTINUE : this.keyed(ctx);
  }

  /** The raw key: the IP key, the API-key header, or the key function's answer. */
  private keyed(ctx: RequestContext<Raw>): HttpOutcome | Promise<HttpOutcome> {
    const source = this.settings.keySource;
    if (source === 'ip') return this.listed(ctx, ctx.identity.key);
    if (typeof source !== 'function') return this.listed(ctx, headerValue(ctx.view.headers, source.header));
    const returned = source(ctx.raw, clientOf(ctx));
    if (isThenable(returned)) return Promise.resolve(returned).then((value) => this.listed(ctx, checkedKey(value)));
    return this.listed(ctx, checkedKey(returned));
  }

  /** Deny list, allow list and a missing API key, then the key, bounded, and the request's policies. */
  private listed(ctx: RequestContext<Raw>, rawKey: string | undefined): HttpOutcome | Promise<HttpOutcome> {
    const { address, ip } = ctx.identity;
    // Deny before allow: an entry on both lists is refused.
    if (this.settings.deny !== undefined && listMatches(this.settings.deny, address, rawKey)) {
      return this.refuse(ctx.raw, { reason: 'denied', status: this.settings.denyStatus, key: rawKey, ip }, []);
    }
    if (this.settings.allow !== undefined && listMatches(this.settings.allow, address, rawKey)) return CONTINUE;
    if (rawKey === undefined) return this.missingKey(ctx, this.settings.keySource as Required<ApiKeySource>);
    ctx.key = boundKey(rawKey, this.settings.maxKeyLength);
    const select = this.settings.selectPolicies;
    if (select === undefined) return this.costed(ctx);
    const chosen = select(ctx.raw, clientOf(ctx));
    if (isThenable(chosen)) return Promise.resolve(chosen).then((policies) => this.costed(ctx, policies));
    return this.costed(ctx, chosen);
  }

  /** The answer to a request without the route's (or a policy's) key header. */
  private missingKey(ctx: RequestContext<Raw>, missing: Required<ApiKeySource>): HttpOutcome {
    const extra: HeaderPair[] = missing.missingStatus === 401 ? [['WWW-Authenticate', `ApiKey header="${missing.header}"`]] : [];
    const info = {
      reason: 'missing-key',
      status: missing.missingStatus,
      key: undefined,
      ip: ctx.identity.ip,
      missingHeader: missing.header,
    } as const;
    return this.refuse(ctx.raw, info, extra);
  }

  /** The request's cost (and its policies, when the `limiter` function chose them), then its decision. */
  private costed(ctx: RequestContext<Raw>, chosen?: readonly NamedPolicy[]): HttpOutcome | Promise<HttpOutcome> {
    if (chosen !== undefined) ctx.policies = chosen;
    const cost = this.settings.cost;
    if (typeof cost === 'number') {
      ctx.cost = cost;
      // The route's own policies without keys of their own: straight to the decision, as before per-policy keys.
      if (ctx.policies === this.plainPolicies) return this.counted(ctx);
      return this.keyedEach(ctx);
    }
    const returned = cost(ctx.raw, clientOf(ctx));
    if (isThenable(returned))
      return Promise.resolve(returned).then((c) => {
        ctx.cost = c;
        return this.keyedEach(ctx);
      });
    ctx.cost = returned;
    return this.keyedEach(ctx);
  }

  /** Each policy's own key, when some policy has one (else nothing is allocated), then the decision. */
  private keyedEach(ctx: RequestContext<Raw>): HttpOutcome | Promise<HttpOutcome> {
    if (!hasOwnKeys(ctx.policies)) return this.counted(ctx);
    const inputs = { routeKey: ctx.key, ipKey: ctx.identity.key, headers: ctx.view.headers, maxKeyLength: this.settings.maxKeyLength };
    const keys = policyKeys(ctx.policies, ctx.raw, () => clientOf(ctx), inputs);
    if (isThenable(keys))
      return keys.then((k) => {
        ctx.keys = k;
        return this.counted(ctx);
      });
    if (!Array.isArray(keys)) return this.missingKey(ctx, keys as Required<ApiKeySource>);
    ctx.keys = keys;
    return this.counted(ctx);
  }

  /**
   * The only policy's decision when it needs no waiting (the in-memory block
   * refuses, or the store is in process), else the store path. Several
   * policies always take the store path: a refusal by one rewards what the
   * others took.
   */
  private counted(ctx: RequestContext<Raw>): HttpOutcome | Promise<HttpOutcome> {
    if (this.holdsUnits) this.noteStart(ctx);
    const { policies, key, keys, cost } = ctx;
    if (policies.length === 1) {
      const now = policies[0]!.limiter.consumeNow(keyAt(key, keys, 0), cost);
      if (now !== undefined) return now.allowed ? this.admittedOne(ctx, now) : this.limitedOne(ctx, now);
      return this.consumed(ctx);
    }
    if (!decidableTogether(policies)) return this.consumed(ctx);
    const parts = policies.map((p, i) => ({ limiter: p.limiter, key: keyAt(key, keys, i), cost }));
    const now = consumeAllNow(parts);
    if (now !== undefined) return this.together(ctx, now);
    const call = consumeAll(parts);
    return this.guard.wrap(call).then(
      (d) => this.together(ctx, d),
      (error: unknown) => this.apart(ctx, call, error),
    );
  }

  /** The decision of several policies on one store, taken in one atomic step: nothing to reward when one refuses. */
  private together(ctx: RequestContext<Raw>, d: CompositeDecision): HttpOutcome | Promise<HttpOutcome> {
    const reports = compositeReports(ctx.policies, d, ctx.keys);
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());
    if (!d.allowed) return this.limited(ctx, d.parts, reports, rateHeaders, []);
    return this.concluded(ctx, d.parts, reports, rateHeaders, NO_ERRORS);
  }

  /**
   * A composite that failed as a whole: a store failure (or the middleware's
   * timeout) is answered per `onStoreError`, anything else goes to the
   * framework. A composite that outlives the timeout and is admitted later
   * has its units rewarded, since the request was not served under it.
   */
  private apart(ctx: RequestContext<Raw>, call: Promise<CompositeDecision>, error: unknown): HttpOutcome | Promise<HttpOutcome> {
    if (!isStoreFailure(error)) return { action: 'error', error };
    this.report(error, ctx.raw);
    if (this.guard.timedOut(error)) rewardLateComposite(ctx, call, this.rewarder(ctx.raw));
    return this.concluded(ctx, [], [], [], [error]);
  }

  /**
   * Every policy's consume, with rewards when one refuses and the failure
   * policy when a store fails: the path of a single policy, and of policies
   * on different stores, which no one step can decide together.
   */
  private consumed(ctx: RequestContext<Raw>): Promise<HttpOutcome> {
    const { policies, key, keys, cost } = ctx;
    const calls = policies.map((p, i) =>
      p.limiter.consume(keyAt(key, keys, i), cost, this.waitOptions(ctx, p.limiter[LIMITER_INTERNALS]().waits)),
    );
    if (calls.length > 1)
      return Promise.allSettled(calls.map((call) => this.guard.wrap(call))).then((results) => this.settled(ctx, calls, results));
    // One policy, the common case: its answer goes straight to the admission or refusal, without the settled-results
    // array and the promise around it that several policies need.
    return this.guard.wrap(calls[0]!).then(
      (only) => (only.allowed ? this.admittedOne(ctx, only) : this.limitedOne(ctx, only)),
      (reason: unknown) => this.settled(ctx, calls, [{ status: 'rejected', reason }]),
    );
  }

  /** The end of {@link consumed} once every call settled: rewards, failures, and the answer. */
  private async settled(
    ctx: RequestContext<Raw>,
    calls: readonly Promise<Decision>[],
    results: readonly PromiseSettledResult<Decision>[],
  ): Promise<HttpOutcome> {
    const { raw, policies, keys } = ctx;
    const decisions: Array<Decision | undefined> = [];
    const storeErrors: unknown[] = [];
    let badCall: unknown;
    let refused = false;
    for (const result of results) {
      if (result.status === 'fulfilled') {
        decisions.push(result.value);
        if (!result.value.allowed) refused = true;
      } else {
        decisions.push(undefined);
        if (isStoreFailure(result.reason)) storeErrors.push(result.reason);
        else badCall ??= result.reason;
      }
    }
    for (const error of storeErrors) this.report(error, raw);
    // One policy that answered: nothing to reward either way.
    if (decisions.length === 1 && decisions[0] !== undefined) {
      const only = decisions[0];
      return only.allowed ? this.admittedOne(ctx, only) : this.limitedOne(ctx, only);
    }

    // Not admitted after all: the admitting policies are rewarded what they took.
    if (badCall !== undefined || refused || (storeErrors.length > 0 && !this.settings.passOnStoreError)) {
      const reward = this.rewarder(raw);
      rewardLate(ctx, calls, results, (error) => this.guard.timedOut(error), reward);
      if (decisions.some((d) => d !== undefined && d.allowed && d.source !== 'fail-open')) await rewardAdmitting(ctx, decisions, reward);
    }
    if (badCall !== undefined) return { action: 'error', error: badCall };

    const reports: PolicyReport[] = [];
    decisions.forEach((d, i) => {
      if (d !== undefined) reports.push(toReport(policies[i]!, d, keys?.[i]));
    });
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());

    if (refused) return this.limited(ctx, decisions, reports, rateHeaders, storeErrors);
    return this.concluded(ctx, decisions, reports, rateHeaders, storeErrors);
  }

  /**
   * An admission, unless a store failed and `onStoreError` refuses then:
   * the end of every path on which no policy refused.
   */
  private concluded(
    ctx: RequestContext<Raw>,
    decisions: ReadonlyArray<Decision | undefined>,
    reports: PolicyReport[],
    rateHeaders: readonly HeaderPair[],
    errors: readonly unknown[],
  ): HttpOutcome | Promise<HttpOutcome> {
    const { raw, key, cost } = ctx;
    const ip = ctx.identity.ip;
    if (errors.length > 0 && !this.settings.passOnStoreError) {
      const status = this.settings.storeErrorStatus;
      const outcome = this.refuse(raw, { reason: 'store-error', status, key, ip, policies: reports, error: errors[0] }, rateHeaders);
      this.decided(raw, { key, ip, cost, allowed: false, status, policies: reports, errors });
      return outcome;
    }
    const decided = { key, ip, cost, allowed: true, status: undefined, policies: reports, errors, ...shadowMark(reports) };
    return this.admitted(ctx, continueWith(rateHeaders, key, cost, reports), decisions, decided);
  }

  /** The admission by a route's only policy. */
  private admittedOne(ctx: RequestContext<Raw>, decision: Decision): HttpOutcome | Promise<HttpOutcome> {
    const { key, cost } = ctx;
    const reports = [toReport(ctx.policies[0]!, decision, ctx.keys?.[0])];
    const outcome = continueWith(rateLimitHeaders(this.settings.modes, reports, Date.now()), key, cost, reports);
    const decided = {
      key,
      ip: ctx.identity.ip,
      cost,
      allowed: true,
      status: undefined,
      policies: reports,
      errors: NO_ERRORS,
      ...(decision.shadowLimited === true ? SHADOW_LIMITED : undefined),
    };
    return this.admitted(ctx, outcome, [decision], decided);
  }

  /**
   * The refusal by a route's only policy, shared between requests when
   * nothing sees each one (see SharedRefusals).
   */
  private limitedOne(ctx: RequestContext<Raw>, decision: Decision): HttpOutcome {
    return this.refusals.share(decision, ctx, this.refusedByOne);
  }

  /** Builds {@link limitedOne}'s refusal; a field made once, so a refusal the memo already holds allocates nothing to find it. */
  private readonly refusedByOne = (ctx: RequestContext<Raw>, decision: Decision, retryAfter: number | undefined): HttpOutcome => {
    const reports = [toReport(ctx.policies[0]!, decision, ctx.keys?.[0])];
    // An undefined retryAfter (no jitter, or a refusal not shared) is drawn by limited itself.
    return this.limited(ctx, [decision], reports, rateLimitHeaders(this.settings.modes, reports, Date.now()), [], retryAfter);
  };
}

const SHADOW_LIMITED = Object.freeze({ shadowLimited: true as const });

/** `{ shadowLimited: true }` when a shadow limiter of `reports` would have refused, else nothing to spread. */
function shadowMark(reports: readonly PolicyReport[]): typeof SHADOW_LIMITED | undefined {
  for (const r of reports) if (r.shadowLimited === true) return SHADOW_LIMITED;
  return undefined;
}

/** What a user callback or a misconfiguration that threw becomes. */
function errorOutcome(error: unknown): HttpOutcome {
  return { action: 'error', error };
}
