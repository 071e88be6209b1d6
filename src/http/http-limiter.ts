/** HttpLimiter: the one HTTP path every adapter runs: request view → client identity → key → every policy's decision → a response to send, or "continue". */
import type { Decision } from '../core/decision.js';
import { isStoreFailure } from '../core/errors.js';
import { LIMITER_INTERNALS } from '../limiter/internals.js';
import { rateLimitHeaders, type HeaderPair, type PolicyReport } from './headers.js';
import { checkedKey, continueWith, isThenable, settle, toReport } from './limiter-parts.js';
import { compositeReports, decidableTogether } from './together.js';
import { refund, refundLate, refundLateComposite } from './give-back.js';
import { consumeAll, consumeAllNow, type CompositeDecision } from '../limiter/composite.js';
import { boundKey, headerValue } from './client-keys.js';
import { ClientIdentities, clientInfo, type Identity } from './identity.js';
import { resolveHttpOptions, listMatches } from './options.js';
import { SharedRefusals } from './refusal.js';
import { ResponseBound } from './response-bound.js';
import { hasOwnKeys, keyAt, policyKeys } from './policy-keys.js';
import type { NamedPolicy, PolicyKeys } from './settings.js';
import type { HttpRateLimitOptions, AdapterConfig, HttpOutcome, RequestView, ClientInfo, ApiKeySource } from './types.js';

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
    this.refusals = new SharedRefusals(this.settings.sharesRefusals, this.settings.legacyHeaders);
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
      this.noteSignal(view.raw, view.signal);
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
    if (rawKey === undefined) return this.missingKey(view.raw, ip, this.settings.keySource as Required<ApiKeySource>);
    const key = boundKey(rawKey, this.settings.maxKeyLength);
    const select = this.settings.selectPolicies;
    if (select === undefined) return this.costed(view, identity, known, key, this.settings.policies);
    const client = known ?? clientInfo(view, identity);
    const chosen = select(view.raw, client);
    if (isThenable(chosen)) return Promise.resolve(chosen).then((policies) => this.costed(view, identity, client, key, policies));
    return this.costed(view, identity, client, key, chosen);
  }

  /** The answer to a request without the route's (or a policy's) key header. */
  private missingKey(raw: Raw, ip: string | undefined, missing: Required<ApiKeySource>): HttpOutcome {
    const extra: HeaderPair[] = missing.missingStatus === 401 ? [['WWW-Authenticate', `ApiKey header="${missing.header}"`]] : [];
    const info = { reason: 'missing-key', status: missing.missingStatus, key: undefined, ip, missingHeader: missing.header } as const;
    return this.refuse(raw, info, extra);
  }

  /** The request's cost, then its decision by `policies`. */
  private costed(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    key: string,
    policies: readonly NamedPolicy[],
  ): HttpOutcome | Promise<HttpOutcome> {
    const cost = this.settings.cost;
    if (typeof cost === 'number') {
      // The route's own policies without keys of their own: straight to the decision, as before per-policy keys.
      if (policies === this.plainPolicies) return this.counted(view.raw, identity.ip, key, cost, policies, undefined);
      return this.keyedEach(view, identity, known, key, cost, policies);
    }
    const returned = cost(view.raw, known ?? clientInfo(view, identity));
    if (isThenable(returned)) return Promise.resolve(returned).then((c) => this.keyedEach(view, identity, known, key, c, policies));
    return this.keyedEach(view, identity, known, key, returned, policies);
  }

  /** Each policy's own key, when some policy has one (else nothing is allocated), then the decision. */
  private keyedEach(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
  ): HttpOutcome | Promise<HttpOutcome> {
    const ip = identity.ip;
    if (!hasOwnKeys(policies)) return this.counted(view.raw, ip, key, cost, policies, undefined);
    const inputs = { routeKey: key, ipKey: identity.key, headers: view.headers, maxKeyLength: this.settings.maxKeyLength };
    const keys = policyKeys(policies, view.raw, () => known ?? clientInfo(view, identity), inputs);
    if (isThenable(keys)) return keys.then((k) => this.counted(view.raw, ip, key, cost, policies, k));
    if (!Array.isArray(keys)) return this.missingKey(view.raw, identity.ip, keys as Required<ApiKeySource>);
    return this.counted(view.raw, ip, key, cost, policies, keys);
  }

  /**
   * The only policy's decision when it needs no waiting (the in-memory block
   * refuses, or the store is in process), else the store path. Several
   * policies always take the store path: a refusal by one gives back what
   * the others took.
   */
  private counted(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    keys: PolicyKeys | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    this.noteStart(raw, policies);
    if (policies.length === 1) {
      const now = policies[0]!.limiter.consumeNow(keyAt(key, keys, 0), cost);
      if (now !== undefined)
        return now.allowed
          ? this.admittedOne(raw, key, ip, cost, policies[0]!, now, keys)
          : this.limitedOne(raw, key, ip, cost, policies[0]!, now, keys);
      return this.consumed(raw, ip, key, cost, policies, keys);
    }
    if (!decidableTogether(policies)) return this.consumed(raw, ip, key, cost, policies, keys);
    const parts = policies.map((p, i) => ({ limiter: p.limiter, key: keyAt(key, keys, i), cost }));
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
    keys: PolicyKeys | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const reports = compositeReports(policies, d, keys);
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());
    if (!d.allowed) return this.limited(raw, key, ip, cost, d.parts, reports, rateHeaders, []);
    return this.concluded(raw, ip, key, cost, policies, d.parts, reports, rateHeaders, NO_ERRORS, keys);
  }

  /**
   * A composite that failed as a whole: a store failure (or the middleware's
   * timeout) is answered per `onStoreError`, anything else goes to the
   * framework. A composite that outlives the timeout and is admitted later
   * gives its units back, since the request was not served under it.
   */
  private apart(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    call: Promise<CompositeDecision>,
    error: unknown,
    keys: PolicyKeys | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (!isStoreFailure(error)) return { action: 'error', error };
    this.report(error, raw);
    if (this.guard.timedOut(error)) refundLateComposite(policies, call, key, keys, cost, this.giveBack(raw));
    return this.concluded(raw, ip, key, cost, policies, [], [], [], [error], keys);
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
    keys: PolicyKeys | undefined,
  ): Promise<HttpOutcome> {
    const calls = policies.map((p, i) =>
      p.limiter.consume(keyAt(key, keys, i), cost, this.waitOptions(raw, p.limiter[LIMITER_INTERNALS]().waits)),
    );
    const settled =
      calls.length === 1
        ? [await settle(this.guard.wrap(calls[0]!))]
        : await Promise.allSettled(calls.map((call) => this.guard.wrap(call)));
    const decisions: Array<Decision | undefined> = [];
    const storeErrors: unknown[] = [];
    let badCall: unknown;
    let refused = false;
    for (const result of settled) {
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
    // One policy that answered: nothing to give back either way.
    if (decisions.length === 1 && decisions[0] !== undefined) {
      const only = decisions[0];
      return only.allowed
        ? this.admittedOne(raw, key, ip, cost, policies[0]!, only, keys)
        : this.limitedOne(raw, key, ip, cost, policies[0]!, only, keys);
    }

    const giveBack = badCall !== undefined || refused || (storeErrors.length > 0 && !this.settings.passOnStoreError);
    if (giveBack) {
      const giveBack = this.giveBack(raw);
      refundLate(policies, calls, settled, (error) => this.guard.timedOut(error), key, keys, cost, giveBack);
      if (decisions.some((d) => d !== undefined && d.allowed && d.source !== 'fail-open'))
        await refund(policies, decisions, key, keys, cost, giveBack);
    }
    if (badCall !== undefined) return { action: 'error', error: badCall };

    const reports: PolicyReport[] = [];
    decisions.forEach((d, i) => {
      if (d !== undefined) reports.push(toReport(policies[i]!, d, keys?.[i]));
    });
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());

    if (refused) return this.limited(raw, key, ip, cost, decisions, reports, rateHeaders, storeErrors);
    return this.concluded(raw, ip, key, cost, policies, decisions, reports, rateHeaders, storeErrors, keys);
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
    decisions: ReadonlyArray<Decision | undefined>,
    reports: PolicyReport[],
    rateHeaders: readonly HeaderPair[],
    errors: readonly unknown[],
    keys: PolicyKeys | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (errors.length > 0 && !this.settings.passOnStoreError) {
      const status = this.settings.storeErrorStatus;
      const outcome = this.refuse(raw, { reason: 'store-error', status, key, ip, policies: reports, error: errors[0] }, rateHeaders);
      this.decided(raw, { key, ip, cost, allowed: false, status, policies: reports, errors });
      return outcome;
    }
    const decided = { key, ip, cost, allowed: true, status: undefined, policies: reports, errors };
    return this.admitted(raw, continueWith(rateHeaders, key, cost, reports), policies, keys, decisions, decided);
  }

  /** The admission by a route's only policy. */
  private admittedOne(
    raw: Raw,
    key: string,
    ip: string | undefined,
    cost: number,
    policy: NamedPolicy,
    decision: Decision,
    keys: PolicyKeys | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const reports = [toReport(policy, decision, keys?.[0])];
    const outcome = continueWith(rateLimitHeaders(this.settings.modes, reports, Date.now()), key, cost, reports);
    const decided = { key, ip, cost, allowed: true, status: undefined, policies: reports, errors: NO_ERRORS };
    return this.admitted(raw, outcome, [policy], keys, [decision], decided);
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
    keys: PolicyKeys | undefined,
  ): HttpOutcome {
    return this.refusals.share(decision, () => {
      const reports = [toReport(policy, decision, keys?.[0])];
      return this.limited(raw, key, ip, cost, [decision], reports, rateLimitHeaders(this.settings.modes, reports, Date.now()), []);
    });
  }
}

/** What a user callback or a misconfiguration that threw becomes. */
function errorOutcome(error: unknown): HttpOutcome {
  return { action: 'error', error };
}
