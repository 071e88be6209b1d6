/** HttpLimiter: the one HTTP path every adapter runs: request view → client identity → key → every policy's decision → a response to send, or "continue". */
import type { ServerResponse } from 'node:http';
import type { Decision } from '../decision.js';
import { rateLimitHeaders, retryAfterSeconds, type HeaderPair, type PolicyReport } from './headers.js';
import { checkedKey, continueWith, isThenable, toReport } from './limiter-parts.js';
import { decideEach, decideTogether, decideTogetherNow, decidedTogether, policyKeys, type PoliciesDecided } from './several-policies.js';
import { refundWhenDone } from './count-by-outcome.js';
import { CallGuard } from './call-guard.js';
import { boundKey, headerValue } from './client-keys.js';
import { ClientIdentities, clientInfo, type Identity } from './identity.js';
import { resolveHttpOptions, listMatches, type HttpSettings, type NamedPolicy } from './options.js';
import {
  RefusalBodies,
  freezeOutcome,
  refusalMemoKey,
  MAX_MEMOISED_REFUSALS,
  QUOTA_EXCEEDED_TYPE,
  REDUCED_CAPACITY_TYPE,
} from './refusal.js';
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
  private readonly refusals = new Map<number | string, HttpOutcome>();
  /** The refusal bodies, each distinct built-in one rendered once. */
  private readonly bodies: RefusalBodies;
  /** Who each request comes from, memoised per socket or framework address. */
  private readonly identities: ClientIdentities<Raw>;
  /** The options, checked and resolved. */
  private readonly settings: HttpSettings<Raw>;
  /** True when requests are identified by the framework's address; adapters read it only then (Express computes `req.ip` on each read). */
  readonly usesFrameworkIp: boolean;
  /** The policies each admitted request was counted by, while its response runs; only with a refund rule. */
  private readonly applied = new WeakMap<RateLimitInfo, { readonly policies: readonly NamedPolicy[]; readonly keys: readonly string[] }>();
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
    const giveBack = (policy: NamedPolicy, _routeKey: string, cost: number): void => {
      const key = keys[policies.indexOf(policy)]!;
      this.guard.wrap(policy.limiter.reward(key, cost)).then(undefined, (error: unknown) => this.report(error, raw));
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

  /** The request's cost, then each policy's key. */
  private costed(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    key: string,
    policies: readonly NamedPolicy[],
  ): HttpOutcome | Promise<HttpOutcome> {
    if (typeof this.settings.cost === 'number') return this.keyedPolicies(view, identity, known, key, this.settings.cost, policies);
    const client = known ?? clientInfo(view, identity);
    const returned = this.settings.cost(view.raw, client);
    if (isThenable(returned))
      return Promise.resolve(returned).then((cost) => this.keyedPolicies(view, identity, client, key, cost, policies));
    return this.keyedPolicies(view, identity, client, key, returned, policies);
  }

  /** Each policy's key (see {@link policyKeys}), then the decision. */
  private keyedPolicies(
    view: RequestView<Raw>,
    identity: Identity,
    known: ClientInfo | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
  ): HttpOutcome | Promise<HttpOutcome> {
    const ip = identity.ip;
    if (!policies.some((p) => p.key !== undefined)) return this.counted(view.raw, ip, key, cost, policies, undefined);
    const keys = policyKeys(policies, key, view.raw, known ?? clientInfo(view, identity), this.settings.maxKeyLength);
    if (isThenable(keys)) return Promise.resolve(keys).then((all) => this.counted(view.raw, ip, key, cost, policies, all));
    return this.counted(view.raw, ip, key, cost, policies, keys);
  }

  /**
   * The decision by `policies`: synchronously when it needs no waiting (the
   * in-memory block refuses, or the store is in process), else through the
   * store. Several policies on one store are decided in one all-or-nothing
   * step; on different stores, each consumes and a refusal gives back what
   * the others took.
   */
  private counted(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    keys: readonly string[] | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (policies.length === 1) {
      const only = policies[0]!;
      const own = keys === undefined ? key : keys[0]!;
      const now = only.limiter.consumeNow(own, cost);
      if (now !== undefined)
        return now.allowed ? this.admittedOne(raw, key, own, ip, cost, only, now) : this.limitedOne(raw, key, own, ip, cost, only, now);
      return this.consumedOne(raw, ip, key, own, cost, only);
    }
    const all = keys ?? policies.map(() => key);
    const report = (error: unknown): void => this.report(error, raw);
    if (decidedTogether(policies, this.settings.warnsNotAtomic)) {
      const now = decideTogetherNow(policies, all, cost);
      if (now !== undefined) return this.answered(raw, ip, key, cost, policies, all, now);
      return decideTogether(policies, all, cost, this.guard, report).then((d) => this.answered(raw, ip, key, cost, policies, all, d));
    }
    const passOnStoreError = this.settings.passOnStoreError;
    return decideEach(policies, all, cost, passOnStoreError, this.guard, report).then((d) =>
      this.answered(raw, ip, key, cost, policies, all, d),
    );
  }

  /** A route's only policy through the store. */
  private async consumedOne(
    raw: Raw,
    ip: string | undefined,
    key: string,
    own: string,
    cost: number,
    only: NamedPolicy,
  ): Promise<HttpOutcome> {
    const report = (error: unknown): void => this.report(error, raw);
    const decided = await decideEach([only], [own], cost, this.settings.passOnStoreError, this.guard, report);
    const d = decided.decisions[0];
    if (d === undefined) return this.answered(raw, ip, key, cost, [only], [own], decided);
    return d.allowed ? this.admittedOne(raw, key, own, ip, cost, only, d) : this.limitedOne(raw, key, own, ip, cost, only, d);
  }

  /** The response to what the policies decided: an error, a refusal (limited or store failure), or the request passed on. */
  private answered(
    raw: Raw,
    ip: string | undefined,
    key: string,
    cost: number,
    policies: readonly NamedPolicy[],
    keys: readonly string[],
    decided: PoliciesDecided,
  ): HttpOutcome {
    const { decisions, storeErrors, badCall, refused } = decided;
    for (const error of storeErrors) this.report(error, raw);
    if (badCall !== undefined) return { action: 'error', error: badCall };

    // A policy not consulted (another's in-memory block refused first) is left out rather than reported with made-up numbers.
    const reports: PolicyReport[] = [];
    decisions.forEach((d, i) => {
      if (d !== undefined) reports.push(toReport(policies[i]!, d, keys[i]!));
    });
    const rateHeaders = rateLimitHeaders(this.settings.modes, reports, Date.now());

    if (refused) return this.limited(raw, key, ip, cost, decisions, reports, rateHeaders, storeErrors);
    if (storeErrors.length > 0 && !this.settings.passOnStoreError) {
      const status = this.settings.storeErrorStatus;
      const info = { reason: 'store-error', status, key, ip, policies: reports, error: storeErrors[0] } as const;
      const outcome = this.refuse(raw, info, rateHeaders);
      this.decided(raw, { key, ip, cost, allowed: false, status, policies: reports, errors: storeErrors });
      return outcome;
    }
    this.decided(raw, { key, ip, cost, allowed: true, status: undefined, policies: reports, errors: storeErrors });
    return this.admitted(continueWith(rateHeaders, key, cost, reports), policies, keys);
  }

  /** The admission by a route's only policy. */
  private admittedOne(
    raw: Raw,
    key: string,
    own: string,
    ip: string | undefined,
    cost: number,
    policy: NamedPolicy,
    decision: Decision,
  ): HttpOutcome {
    const reports = [toReport(policy, decision, own)];
    this.decided(raw, { key, ip, cost, allowed: true, status: undefined, policies: reports, errors: NO_ERRORS });
    const outcome = continueWith(rateLimitHeaders(this.settings.modes, reports, Date.now()), key, cost, reports);
    return this.settings.refundRule === undefined ? outcome : this.admitted(outcome, [policy], [own]);
  }

  /** Remembers which policies counted an admitted request, when a refund rule may give its units back. */
  private admitted(outcome: HttpOutcome, policies: readonly NamedPolicy[], keys: readonly string[]): HttpOutcome {
    if (this.settings.refundRule !== undefined && outcome.action === 'continue' && outcome.info !== undefined) {
      this.applied.set(outcome.info, { policies, keys });
    }
    return outcome;
  }

  /**
   * The refusal by a route's only policy. Under a flood the same response is
   * built again and again; with no hook or body function to see each
   * request, its fields, Retry-After and body depend only on the whole
   * seconds left (and, for the legacy reset, the second the wait ends), so
   * each distinct one is built once and shared, frozen.
   */
  private limitedOne(
    raw: Raw,
    key: string,
    own: string,
    ip: string | undefined,
    cost: number,
    policy: NamedPolicy,
    decision: Decision,
  ): HttpOutcome {
    const memoKey = this.settings.sharesRefusals ? refusalMemoKey(decision, this.settings.legacyHeaders) : undefined;
    if (memoKey !== undefined) {
      const known = this.refusals.get(memoKey);
      if (known !== undefined) return known;
    }
    const reports = [toReport(policy, decision, own)];
    const outcome = this.limited(raw, key, ip, cost, [decision], reports, rateLimitHeaders(this.settings.modes, reports, Date.now()), []);
    if (memoKey !== undefined) {
      if (this.refusals.size >= MAX_MEMOISED_REFUSALS) this.refusals.clear();
      this.refusals.set(memoKey, freezeOutcome(outcome));
    }
    return outcome;
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
