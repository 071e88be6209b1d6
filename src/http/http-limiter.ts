/** HttpLimiter: the one HTTP path every adapter runs: request view → client identity → key → every policy's decision → a response to send, or "continue". */
import type { ServerResponse } from 'node:http';
import type { Decision } from '../decision.js';
import { isStoreFailure } from '../errors.js';
import { rateLimitHeaders, retryAfterSeconds, type HeaderPair, type PolicyReport } from './headers.js';
import { checkedKey, continueWith, isThenable, keyAt, toReport, type Keys } from './limiter-parts.js';
import { compositeReports, decidableTogether } from './together.js';
import { costAndKeys, ownKeys } from './cost-and-keys.js';
import { consumeEach, refund, refundLate, refundLateComposite, type GiveBack } from './give-back.js';
import { consumeAll, consumeAllNow, type CompositeDecision } from '../composite.js';
import { refundWhenDone } from './count-by-outcome.js';
import { CallGuard } from './call-guard.js';
import { boundKey, headerValue } from './client-keys.js';
import { ClientIdentities, clientInfo, type Identity } from './identity.js';
import { resolveHttpOptions, listMatches, type HttpSettings, type NamedPolicy } from './options.js';
import { RefusalBodies, SharedRefusals, QUOTA_EXCEEDED_TYPE, REDUCED_CAPACITY_TYPE } from './refusal.js';
import type {
  HttpRateLimitOptions,
  AdapterConfig,
  HttpOutcome,
  RequestView,
  ClientInfo,
  ApiKeySource,
  DecisionInfo,
  RateLimitInfo,
  RefusalInfo,
} from './types.js';

const NO_ERRORS: readonly unknown[] = Object.freeze([]);

const CONTINUE: HttpOutcome = Object.freeze({ action: 'continue', headers: Object.freeze([]) as readonly HeaderPair[] });

/**
 * The shared request → key → decision → response path. Built once per
 * middleware (all options validated up front), then {@link handle} is
 * called per request and never rejects.
 */
export class HttpLimiter<Raw> {
  /** Shared single-policy refusals by what they depend on; see {@link limitedOne}. */
  private readonly refusals: SharedRefusals;
  /** The refusal bodies, each distinct built-in one rendered once. */
  private readonly bodies: RefusalBodies;
  /** Who each request comes from, memoised per socket or framework address. */
  private readonly identities: ClientIdentities<Raw>;
  /** The options, checked and resolved. */
  private readonly settings: HttpSettings<Raw>;
  /** True when requests are identified by the framework's address; adapters read it only then (Express computes `req.ip` on each read). */
  readonly usesFrameworkIp: boolean;
  /** The policies each admitted request was counted by, while its response runs; only with a refund rule. */
  private readonly applied = new WeakMap<RateLimitInfo, { readonly policies: readonly NamedPolicy[]; readonly keys: Keys }>();
  /** The middleware's own timeout around each limiter call. */
  private readonly guard: CallGuard;

  /**
   * @param options - see {@link HttpRateLimitOptions}
   * @param adapter - what the calling adapter supports
   * @throws FloodgateError for any invalid option (UNKNOWN_OPTION, INVALID_OPTIONS, CONFLICTING_OPTIONS, …)
   */
  constructor(options: HttpRateLimitOptions<Raw>, adapter: AdapterConfig) {
    this.settings = resolveHttpOptions(options, adapter);
    this.usesFrameworkIp = this.settings.usesFrameworkIp;
    this.bodies = new RefusalBodies(this.settings.body);
    this.refusals = new SharedRefusals(this.settings.sharesRefusals, this.settings.legacyHeaders);
    this.identities = new ClientIdentities(this.settings);
    this.guard = new CallGuard(this.settings.timeoutMs);
  }

  /** Hands an error that the adapter met (or got back as `{ action: "error" }`) to `onError`; never throws. */
  reportError(error: unknown, raw: Raw | undefined): void {
    this.report(error, raw);
  }

  /**
   * Called by the adapter with an admitted request's response: with
   * `skipFailedRequests` or `skipSuccessfulRequests`, the request's units go
   * back to each policy that counted it once the response ends (see
   * count-by-outcome.ts). Does nothing without those options.
   */
  watchResponse(raw: Raw, res: ServerResponse, info: RateLimitInfo | undefined): void {
    const rule = this.settings.refundRule;
    if (rule === undefined || info === undefined) return;
    const counted = this.applied.get(info);
    if (counted === undefined) return;
    const { policies, keys } = counted;
    // Each policy's units go back under the key it counted them by.
    const giveBack = (policy: NamedPolicy, _routeKey: string, cost: number): void => {
      this.guard
        .wrap(policy.limiter.reward(keyAt(keys, policies.indexOf(policy)), cost))
        .then(undefined, (error: unknown) => this.report(error, raw));
    };
    refundWhenDone(raw, res, info, policies, rule, giveBack, (error) => this.report(error, raw));
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

  // The stages below return a plain outcome when they can, and a promise
  // only when a user callback or a store call makes them wait: most key
  // functions are synchronous, and every await is a microtask turn per request.

  /** Identity, then `skip`. */
  private evaluate(view: RequestView<Raw>): HttpOutcome | Promise<HttpOutcome> {
    const identity = this.identities.identify(view);
    if (this.settings.skip === undefined) return this.keyed(view, identity, undefined);
    const client = clientInfo(view, identity);
    const skipped = this.settings.skip(view.raw, client);
    if (isThenable(skipped)) return Promise.resolve(skipped).then((s) => (s === true ? CONTINUE : this.keyed(view, identity, client)));
    return skipped === true ? CONTINUE : this.keyed(view, identity, client);
  }

  /** The raw key: the IP key, the API-key header, or the key function's answer. */
  private keyed(view: RequestView<Raw>, identity: Identity, known: ClientInfo | undefined): HttpOutcome | Promise<HttpOutcome> {
    const source = this.settings.keySource;
    if (source === 'ip') return this.listed(view, identity, known, identity.key);
    if (typeof source !== 'function') return this.listed(view, identity, known, headerValue(view.headers, source.header));
    const client = known ?? clientInfo(view, identity);
    const returned = source(view.raw, client);
    if (isThenable(returned)) return Promise.resolve(returned).then((value) => this.listed(view, identity, client, checkedKey(value)));
    return this.listed(view, identity, client, checkedKey(returned));
  }

  /** Deny list, allow list and a missing API key, then the cost. */
  private listed(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    rawKey: string | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const { address, ip } = identity;
    // Deny before allow: an entry on both lists is refused.
    if (this.settings.deny !== undefined && listMatches(this.settings.deny, address, rawKey)) {
      return this.refuse(view.raw, { reason: 'denied', status: this.settings.denyStatus, key: rawKey, ip }, []);
    }
    if (this.settings.allow !== undefined && listMatches(this.settings.allow, address, rawKey)) return CONTINUE;
    if (rawKey === undefined) {
      const missing = this.settings.keySource as Required<ApiKeySource>;
      const extra: HeaderPair[] = missing.missingStatus === 401 ? [['WWW-Authenticate', `ApiKey header="${missing.header}"`]] : [];
      const info = { reason: 'missing-key', status: missing.missingStatus, key: undefined, ip, missingHeader: missing.header } as const;
      return this.refuse(view.raw, info, extra);
    }
    const key = boundKey(rawKey, this.settings.maxKeyLength);
    const select = this.settings.selectPolicies;
    if (select === undefined) return this.costed(view, identity, known, key, this.settings.policies);
    const client = known ?? clientInfo(view, identity);
    const chosen = select(view.raw, client);
    if (isThenable(chosen)) return Promise.resolve(chosen).then((policies) => this.costed(view, identity, client, key, policies));
    return this.costed(view, identity, client, key, chosen);
  }

  /** The request's cost and each policy's key (see cost-and-keys.ts), then the decision by `policies`. */
  private costed(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    key: string,
    policies: readonly NamedPolicy[],
  ): HttpOutcome | Promise<HttpOutcome> {
    const cost = this.settings.cost;
    if (typeof cost === 'number' && !ownKeys(policies)) return this.counted(view.raw, identity.ip, key, cost, policies, key);
    let client = known;
    const decide = (cost: number, keys: Keys): HttpOutcome | Promise<HttpOutcome> =>
      this.counted(view.raw, identity.ip, key, cost, policies, keys);
    return costAndKeys(this.settings, view, () => (client ??= clientInfo(view, identity)), key, policies, decide);
  }

  /** The decision, synchronous when the in-memory block or an in-process store answers; several policies on one store in one step. */
  private counted(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    keys: Keys,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (policies.length === 1) {
      const own = keyAt(keys, 0);
      const now = policies[0]!.limiter.consumeNow(own, cost);
      if (now !== undefined)
        return now.allowed
          ? this.admittedOne(raw, key, ip, cost, policies[0]!, now, own)
          : this.limitedOne(raw, key, ip, cost, policies[0]!, now, own);
      return this.consumed(raw, ip, key, cost, policies, keys);
    }
    if (!decidableTogether(policies)) return this.consumed(raw, ip, key, cost, policies, keys);
    const parts = policies.map((p, i) => ({ limiter: p.limiter, key: keyAt(keys, i), cost }));
    const now = consumeAllNow(parts);
    if (now !== undefined) return this.together(raw, ip, key, cost, policies, now, keys);
    const call = consumeAll(parts);
    return this.guard.wrap(call).then(
      (d) => this.together(raw, ip, key, cost, policies, d, keys),
      (error: unknown) => this.apart(raw, ip, key, cost, policies, call, error, keys),
    );
  }

  /** The decision of several policies on one store, taken in one atomic step: nothing to give back when one refuses. */
  private together(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    d: CompositeDecision,
    keys: Keys,
  ): HttpOutcome {
    const reports = compositeReports(policies, d, keys);
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());
    if (!d.allowed) return this.limited(raw, key, ip, cost, d.parts, reports, rateHeaders, []);
    return this.concluded(raw, ip, key, cost, policies, reports, rateHeaders, NO_ERRORS, keys);
  }

  /**
   * A composite that failed as a whole: a store failure (or timeout) per `onStoreError`, anything else to the framework;
   * one admitted after the timeout gives its units back, since the request was not served under it.
   */
  private apart(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    call: Promise<CompositeDecision>,
    error: unknown,
    keys: Keys,
  ): HttpOutcome {
    if (!isStoreFailure(error)) return { action: 'error', error };
    this.report(error, raw);
    if (this.guard.timedOut(error)) refundLateComposite(policies, call, keys, cost, this.giveBack(raw));
    return this.concluded(raw, ip, key, cost, policies, [], [], [error], keys);
  }

  /**
   * Every policy's consume, with refunds when one refuses and the failure
   * policy when a store fails: the path of a single policy, and of policies
   * on different stores, which no one step can decide together.
   */
  private async consumed(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    keys: Keys,
  ): Promise<HttpOutcome> {
    const { calls, settled, decisions, storeErrors, badCall, refused } = await consumeEach(policies, keys, cost, this.guard);
    for (const error of storeErrors) this.report(error, raw);
    // One policy that answered: nothing to give back either way.
    if (decisions.length === 1 && decisions[0] !== undefined) {
      const only = decisions[0];
      const own = keyAt(keys, 0);
      return only.allowed
        ? this.admittedOne(raw, key, ip, cost, policies[0]!, only, own)
        : this.limitedOne(raw, key, ip, cost, policies[0]!, only, own);
    }

    const giveBack = badCall !== undefined || refused || (storeErrors.length > 0 && !this.settings.passOnStoreError);
    if (giveBack) {
      const giveBack = this.giveBack(raw);
      refundLate(policies, calls, settled, (error) => this.guard.timedOut(error), keys, cost, giveBack);
      if (decisions.some((d) => d !== undefined && d.allowed && d.source !== 'fail-open'))
        await refund(policies, decisions, keys, cost, giveBack);
    }
    if (badCall !== undefined) return { action: 'error', error: badCall };

    const reports: PolicyReport[] = [];
    decisions.forEach((d, i) => {
      if (d !== undefined) reports.push(toReport(policies[i]!, d, keyAt(keys, i)));
    });
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());

    if (refused) return this.limited(raw, key, ip, cost, decisions, reports, rateHeaders, storeErrors);
    return this.concluded(raw, ip, key, cost, policies, reports, rateHeaders, storeErrors, keys);
  }

  /**
   * An admission, unless a store failed and `onStoreError` refuses then:
   * the end of every path on which no policy refused.
   */
  private concluded(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    reports: PolicyReport[],
    rateHeaders: readonly HeaderPair[],
    errors: readonly unknown[],
    keys: Keys,
  ): HttpOutcome {
    if (errors.length > 0 && !this.settings.passOnStoreError) {
      const status = this.settings.storeErrorStatus;
      const outcome = this.refuse(raw, { reason: 'store-error', status, key, ip, policies: reports, error: errors[0] }, rateHeaders);
      this.decided(raw, { key, ip, cost, allowed: false, status, policies: reports, errors });
      return outcome;
    }
    this.decided(raw, { key, ip, cost, allowed: true, status: undefined, policies: reports, errors });
    return this.admitted(continueWith(rateHeaders, key, cost, reports), policies, keys);
  }

  /** The admission by a route's only policy. */
  private admittedOne(
    raw: Raw,
    key: string,
    ip: string | undefined,
    cost: number,
    policy: NamedPolicy,
    decision: Decision,
    own: string,
  ): HttpOutcome {
    const reports = [toReport(policy, decision, own)];
    this.decided(raw, { key, ip, cost, allowed: true, status: undefined, policies: reports, errors: NO_ERRORS });
    const outcome = continueWith(rateLimitHeaders(this.settings.modes, reports, Date.now()), key, cost, reports);
    return this.settings.refundRule === undefined ? outcome : this.admitted(outcome, [policy], own);
  }

  /** Remembers which policies counted an admitted request, when a refund rule may give its units back. */
  private admitted(outcome: HttpOutcome, policies: readonly NamedPolicy[], keys: Keys): HttpOutcome {
    if (this.settings.refundRule !== undefined && outcome.action === 'continue' && outcome.info !== undefined) {
      this.applied.set(outcome.info, { policies, keys });
    }
    return outcome;
  }

  /**
   * The refusal by a route's only policy, shared between requests when
   * nothing sees each one (see SharedRefusals).
   */
  private limitedOne(
    raw: Raw,
    key: string,
    ip: string | undefined,
    cost: number,
    policy: NamedPolicy,
    decision: Decision,
    own: string,
  ): HttpOutcome {
    return this.refusals.share(decision, () => {
      const reports = [toReport(policy, decision, own)];
      return this.limited(raw, key, ip, cost, [decision], reports, rateLimitHeaders(this.settings.modes, reports, Date.now()), []);
    });
  }

  /** The refusal of a request some policy limited: headers, Retry-After, body, hooks. */
  private limited(
    raw: Raw,
    key: string,
    ip: string | undefined,
    cost: number,
    decisions: ReadonlyArray<Decision | undefined>,
    reports: PolicyReport[],
    rateHeaders: readonly HeaderPair[],
    storeErrors: unknown[],
  ): HttpOutcome {
    const violated = reports.filter((r) => !r.allowed);
    const retryAfter = retryAfterSeconds(reports);
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

  /** Gives a policy's units back through the middleware's timeout; resolves to the state after, or undefined when that failed (reported). */
  private giveBack(raw: Raw): GiveBack {
    return (policy, key, cost) =>
      this.guard.wrap(policy.limiter.reward(key, cost)).then(undefined, (error: unknown) => {
        this.report(error, raw);
        return undefined;
      });
  }

  /** Builds the middleware's own response and fires `onLimited` for limited ones. */
  private refuse(
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

  private decided(raw: Raw, info: DecisionInfo): void {
    if (this.settings.onDecision !== undefined) this.safely(() => this.settings.onDecision!(raw, info), raw);
  }

  /** Runs a user hook; a throw or a rejection goes to onError instead of the request. */
  private safely(hook: () => void | Promise<void>, raw: Raw): void {
    try {
      const result = hook();
      if (result !== undefined && typeof (result as Promise<void>).then === 'function') {
        (result as Promise<void>).then(undefined, (error: unknown) => this.report(error, raw));
      }
    } catch (error) {
      this.report(error, raw);
    }
  }

  private report(error: unknown, raw: Raw | undefined): void {
    try {
      this.settings.onError(error, raw);
    } catch {
      // An onError that throws must not turn a handled failure into an unhandled one.
    }
  }
}

/** What a user callback or a misconfiguration that threw becomes. */
function errorOutcome(error: unknown): HttpOutcome {
  return { action: 'error', error };
}
