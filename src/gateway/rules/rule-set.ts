/** Rules compiled for the hot path: which requests each applies to, and the HttpLimiter (key, policies, headers) that decides for it; shadow rules report without refusing. */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { isStoreFailure } from '../../errors.js';
import {
  HttpLimiter,
  type HttpOutcome,
  type HttpRateLimitOptions,
  type KeySource,
  type NamedLimiter,
  type RequestView,
} from '../../http/core.js';
import { headerValue } from '../../http/keys.js';
import type { HeaderPair } from '../../http/headers.js';
import { RateLimiter, type RateLimiterOptions } from '../../limiter.js';
import type { Store } from '../../stores/store.js';
import { throttled } from '../../throttle.js';
import { keyCheck, type KeyCheck, type KeyRefusal } from './key-check.js';
import { loggableKey, type GatewayLogger } from '../serve/log.js';
import { enforceInTurn } from './rule-chain.js';
import { canonicalHost } from './path-match.js';
import type { DecisionCell, DecisionOutcome, GatewayMetrics } from '../serve/metrics.js';
import type { GatewaySettings, MatchSettings, PolicySettings, RuleSettings } from '../config/settings.js';

/** A compiled rule. */
export interface Rule {
  /** The rule's name (metrics label, log field, store key part). */
  readonly name: string;
  /** Reports without refusing. */
  readonly shadow: boolean;
  /** An enforced rule after which no other rule is tried when it matches. */
  readonly final: boolean;
  /** Refuses a repeated or invalid API key before anything is counted; undefined for IP-keyed rules. */
  readonly checkKey: KeyCheck | undefined;
  /** True when the request facts satisfy every condition of the rule's match. */
  readonly matches: (method: string, path: string, host: string | undefined, headers: IncomingHttpHeaders) => boolean;
  /** Decides about one request. */
  readonly limiter: HttpLimiter<IncomingMessage>;
  /** The RateLimiters of its policies, on the shared store (not the insurance ones), whose breakers readiness reads. */
  readonly limiters: readonly RateLimiter[];
  /** The rule's `floodgate_decisions_total` series, bound once so a decision costs one addition. */
  readonly counts: Readonly<Record<RuleOutcome, DecisionCell>>;
}

/** The outcomes a rule counts. */
type RuleOutcome = Exclude<DecisionOutcome, 'unmatched'>;
const RULE_OUTCOMES: readonly RuleOutcome[] = [
  'allowed',
  'limited',
  'missing_key',
  'invalid_key',
  'store_error',
  'error',
  'shadow_allowed',
  'shadow_limited',
];

/**
 * Longest key, in UTF-8 bytes, before HttpLimiter hashes it (as
 * `maxKeyLength`): an API key is kept readable in the store up to this.
 */
const MAX_KEY_BYTES = 128;

/** What the gateway does with a request after every rule that applies has decided. */
export type Verdict =
  /** Forward it; add `headers` to the upstream's response. */
  | { readonly forward: true; readonly headers: readonly HeaderPair[] }
  /** Answer it with this response. */
  | {
      readonly forward: false;
      readonly status: number;
      readonly headers: readonly HeaderPair[];
      readonly contentType: string;
      readonly body: string;
      /**
       * The same header fields, Content-Type and Content-Length included, as
       * the flat name/value list `res.writeHead` takes: set on verdicts that
       * are sent many times, since one writeHead costs less than a
       * setHeader per field.
       */
      readonly wire?: readonly string[];
    };

const NO_HEADERS: readonly HeaderPair[] = Object.freeze([]);
const FORWARD: Verdict = Object.freeze({ forward: true, headers: NO_HEADERS });

/** What the rules need from the running gateway. */
export interface RuleContext {
  /** The store a rule's limiters count in. */
  storeFor(rule: string): Store;
  /** True when the store can fail (Redis, cluster), so the failure policy applies. */
  readonly storeCanFail: boolean;
  /** The store of the insurance limiters (memory), kept across reloads. */
  readonly insuranceStore: Store;
  /** Logger. */
  readonly log: GatewayLogger;
  /** Metrics. */
  readonly metrics: GatewayMetrics;
}

/**
 * The rules of one configuration. Every matching rule applies, in order:
 * each enforced one counts the request in turn and the first refusal
 * answers (see rule-chain.ts); a matching `final` rule ends the list; every
 * matching shadow rule counts and reports. A request no rule matches is
 * forwarded without limits.
 */
export class RuleSet {
  /** Whether any rule looks at the Host header (so it is parsed only then). */
  private readonly needsHost: boolean;
  private readonly unmatchedCount: DecisionCell;

  /**
   * @param rules - compiled rules, in order
   * @param settings - the rules' settings, in the same order
   * @param metrics - where decisions are counted
   */
  constructor(
    readonly rules: readonly Rule[],
    settings: readonly RuleSettings[],
    metrics: GatewayMetrics,
  ) {
    this.needsHost = settings.some((r) => r.match.hosts !== undefined);
    this.unmatchedCount = metrics.decisionCell('(none)', 'unmatched');
  }

  /**
   * Decides about a request (a proxied one, or the original request the
   * decision endpoint describes): synchronously when the rule's
   * HttpLimiter can (a refusal the in-memory block already knows), else
   * through a promise that never rejects.
   */
  decide(view: RequestView<IncomingMessage>, hostHeader: string | undefined): Verdict | Promise<Verdict> {
    const host = this.needsHost ? canonicalHost(hostHeader) : undefined;
    let shadows: Rule[] | undefined;
    let enforced: Rule | undefined;
    // Allocated only when a second enforced rule matches: one rule per request is the common case.
    let more: Rule[] | undefined;
    for (const rule of this.rules) {
      if (!rule.matches(view.method, view.path, host, view.headers)) continue;
      if (rule.shadow) (shadows ??= []).push(rule);
      else {
        if (enforced === undefined) enforced = rule;
        else (more ??= [enforced]).push(rule);
        if (rule.final) break;
      }
    }
    if (shadows !== undefined) return this.withShadows(more ?? enforced, shadows, view);
    if (enforced === undefined) return this.unmatched();
    if (more !== undefined) return enforceInTurn(more, (rule) => this.enforce(rule, view));
    return this.enforce(enforced, view);
  }

  private async withShadows(
    enforced: Rule | readonly Rule[] | undefined,
    shadows: readonly Rule[],
    view: RequestView<IncomingMessage>,
  ): Promise<Verdict> {
    const [verdict, shadowHeader] = await Promise.all([
      enforced === undefined
        ? this.unmatched()
        : Array.isArray(enforced)
          ? enforceInTurn(enforced as readonly Rule[], (rule) => this.enforce(rule, view))
          : this.enforce(enforced as Rule, view),
      Promise.all(shadows.map((rule) => this.shadow(rule, view))).then((items) => items.join(', ')),
    ]);
    const headers: HeaderPair[] = [...verdict.headers, ['Floodgate-Shadow', shadowHeader, true]];
    return { ...verdict, headers };
  }

  /**
   * True while some rule's limiter has its circuit breaker open on the
   * store: the store's connection may be up (a stalled Redis keeps its TCP
   * connection) while its calls keep failing. Read per `/readyz`, never per
   * request. It clears by itself: a breaker stops counting as open once its
   * cooldown passes, and closes when its probe gets an answer.
   */
  storeCircuitOpen(): boolean {
    return this.rules.some((rule) => rule.limiters.some((limiter) => limiter.circuitOpen()));
  }

  private unmatched(): Verdict {
    this.unmatchedCount.count += 1;
    return FORWARD;
  }

  /** The key check, then the rule's HttpLimiter decides. */
  private enforce(rule: Rule, view: RequestView<IncomingMessage>): Verdict | Promise<Verdict> {
    if (rule.checkKey !== undefined) {
      const refused = rule.checkKey(view);
      if (refused !== undefined) return keyRefusalVerdict(rule, refused);
    }
    const decided = rule.limiter.decide(view);
    return decided instanceof Promise ? decided.then((outcome) => verdictOf(rule, outcome)) : verdictOf(rule, decided);
  }

  /** Runs a shadow rule; returns its `Floodgate-Shadow` list item. */
  private async shadow(rule: Rule, view: RequestView<IncomingMessage>): Promise<string> {
    const outcome: HttpOutcome = await rule.limiter.handle(view);
    const limited = outcome.action === 'respond' && outcome.status === 429;
    rule.counts[limited ? 'shadow_limited' : 'shadow_allowed'].count += 1;
    const result =
      outcome.action === 'continue'
        ? 'allowed'
        : limited
          ? 'limited'
          : outcome.action === 'respond'
            ? `refused-${outcome.status}`
            : 'error';
    return `"${rule.name}";outcome=${result}`;
  }
}

/** Runs `then` on a verdict {@link RuleSet.decide} returned, at once when it is not a promise. */
export function whenDecided(decided: Verdict | Promise<Verdict>, then: (verdict: Verdict) => void): void {
  if (decided instanceof Promise) void decided.then(then);
  else then(decided);
}

/** Counts an enforced rule's outcome and turns it into what the gateway does. */
function verdictOf(rule: Rule, outcome: HttpOutcome): Verdict {
  switch (outcome.action) {
    case 'continue':
      rule.counts.allowed.count += 1;
      return outcome.headers.length === 0 ? FORWARD : { forward: true, headers: outcome.headers };
    case 'respond':
      rule.counts[refusalOutcome(outcome.status)].count += 1;
      return refusalVerdict(outcome);
    case 'error':
      rule.counts.error.count += 1;
      rule.limiter.reportError(outcome.error, undefined);
      return { forward: false, status: 500, headers: NO_HEADERS, contentType: 'application/problem+json', body: INTERNAL_ERROR_BODY };
  }
}

/**
 * Verdicts of the refusals HttpLimiter shares between requests (it freezes
 * those), each built once with its `wire` form: under a flood the same
 * refusal is sent for most requests.
 */
const sharedVerdicts = new WeakMap<HttpOutcome, Verdict>();

function refusalVerdict(outcome: HttpOutcome & { action: 'respond' }): Verdict {
  const shared = Object.isFrozen(outcome);
  if (shared) {
    const known = sharedVerdicts.get(outcome);
    if (known !== undefined) return known;
  }
  const { status, headers, contentType, body } = outcome;
  if (!shared) return { forward: false, status, headers, contentType, body };
  const wire: string[] = [];
  for (const [name, value] of headers) wire.push(name, value);
  wire.push('Content-Type', contentType, 'Content-Length', String(Buffer.byteLength(body)));
  const verdict: Verdict = Object.freeze({ forward: false, status, headers, contentType, body, wire: Object.freeze(wire) });
  sharedVerdicts.set(outcome, verdict);
  return verdict;
}

/** Verdicts of key refusals, one per refusal object (each rule builds its own once). */
const keyVerdicts = new WeakMap<KeyRefusal, Verdict>();

function keyRefusalVerdict(rule: Rule, refusal: KeyRefusal): Verdict {
  rule.counts[refusal.outcome].count += 1;
  let verdict = keyVerdicts.get(refusal);
  if (verdict === undefined) {
    const contentType = 'application/problem+json';
    const wire: string[] = [];
    for (const [name, value] of refusal.headers) wire.push(name, value);
    wire.push('Content-Type', contentType, 'Content-Length', String(Buffer.byteLength(refusal.body)));
    verdict = Object.freeze({
      forward: false,
      status: refusal.status,
      headers: refusal.headers,
      contentType,
      body: refusal.body,
      wire: Object.freeze(wire),
    });
    keyVerdicts.set(refusal, verdict);
  }
  return verdict;
}

const INTERNAL_ERROR_BODY = JSON.stringify({ type: 'about:blank', title: 'Internal Server Error', status: 500 });

function refusalOutcome(status: number): 'limited' | 'missing_key' | 'store_error' | 'error' {
  if (status === 429) return 'limited';
  if (status === 401 || status === 400) return 'missing_key';
  if (status === 503) return 'store_error';
  return 'error';
}

/**
 * Compiles the rules of `settings`: one RateLimiter per policy, on the
 * shared store under a prefix made of the rule, the policy and its numbers,
 * so a reload that keeps a policy keeps its counters, and one that changes
 * its numbers starts it afresh instead of reading counts made under others.
 */
export function compileRules(settings: GatewaySettings, context: RuleContext): RuleSet {
  const rules = settings.rules.map((rule) => compileRule(rule, settings, context));
  return new RuleSet(rules, settings.rules, context.metrics);
}

function compileRule(rule: RuleSettings, settings: GatewaySettings, context: RuleContext): Rule {
  const policies: NamedLimiter[] = rule.policies.map((p) => ({
    limiter: limiterFor(rule, p, settings, context),
    ...(p.name === undefined ? {} : { name: p.name }),
  }));
  const log = context.log.child({ rule: rule.name });
  const warn = throttled<unknown>(10_000, (error, held) => log.warn({ err: error, suppressed: held }, 'rate-limit problem'));
  const options: HttpRateLimitOptions<IncomingMessage> = {
    limiter: policies,
    key: keySource(rule),
    trustProxy: settings.trustProxy,
    headers: settings.headers === 'none' ? 'none' : [...settings.headers],
    onStoreError: 'respond',
    maxKeyLength: MAX_KEY_BYTES,
    // Every store the gateway opens times out by itself (store.timeout), so the middleware's extra timer per call would only cost.
    timeout: false,
    // Store failures are logged where every failure mode sees them (the store wrapper, see store.ts);
    // anything else, one line per 10 s at most.
    onError: (error) => {
      if (!isStoreFailure(error)) warn(error);
    },
  };
  const keyIsIp = rule.key.kind === 'ip';
  if (rule.shadow) {
    let last = 0;
    let held = 0;
    options.onLimited = (_req, info) => {
      const now = Date.now();
      // At most one line per second per shadow rule: a shadow rule exists to be measured, not to flood the log.
      if (now - last < 1000) {
        held += 1;
        return;
      }
      last = now;
      log.info(
        { key: loggableKey(info.key, keyIsIp), ip: info.ip, policies: info.violatedPolicies, suppressed: held },
        'shadow rule would have limited',
      );
      held = 0;
    };
  } else if (context.log.isLevelEnabled('debug')) {
    options.onLimited = (_req, info) =>
      log.debug({ key: loggableKey(info.key, keyIsIp), ip: info.ip, policies: info.violatedPolicies }, 'limited');
  }
  const counts = Object.fromEntries(RULE_OUTCOMES.map((o) => [o, context.metrics.decisionCell(rule.name, o)])) as Record<
    RuleOutcome,
    DecisionCell
  >;
  return {
    name: rule.name,
    shadow: rule.shadow,
    final: rule.final,
    checkKey: rule.shadow ? undefined : keyCheck(rule.key),
    matches: compileMatch(rule.match, settings.paths.caseSensitive),
    limiter: new HttpLimiter(options, { owner: `floodgate gateway rule ${JSON.stringify(rule.name)}`, frameworkIp: false }),
    limiters: policies.map((p) => p.limiter),
    counts,
  };
}

function keySource(rule: RuleSettings): KeySource<IncomingMessage> {
  const key = rule.key;
  if (key.kind === 'ip') return 'ip';
  if (!key.fallbackToIp) return { header: key.header, missingStatus: 401 };
  const header = key.header;
  // Namespaced so that a client cannot pick an API key equal to someone's address and share (or drain) that quota.
  return (_req, client) => {
    const value = headerValue(client.headers, header);
    return value === undefined ? `ip:${client.ip ?? 'unknown'}` : `key:${value}`;
  };
}

function limiterFor(rule: RuleSettings, p: PolicySettings, settings: GatewaySettings, context: RuleContext): RateLimiter {
  const prefix = `${settings.store.prefix}:${rule.name}:${p.name ?? 'p'}:${p.algorithm}:${p.limit}:${p.windowMs}:${p.blockMs}`;
  const base: RateLimiterOptions = {
    limit: p.limit,
    window: p.windowMs,
    algorithm: p.algorithm,
    prefix,
    ...(p.blockMs > 0 ? { blockDuration: p.blockMs } : {}),
  };
  const options: RateLimiterOptions = { ...base, store: context.storeFor(rule.name), inMemoryBlock: settings.inMemoryBlock };
  if (context.storeCanFail) {
    switch (settings.store.onFailure) {
      case 'insurance':
        // The insurance counts per process: while the store is away, each instance admits up to the full limit.
        options.insurance = new RateLimiter({ ...base, store: context.insuranceStore });
        break;
      case 'fail-open':
      case 'fail-closed':
        options.onStoreFailure = settings.store.onFailure;
        break;
      case 'reject':
        break;
    }
  }
  return new RateLimiter(options);
}

/**
 * Compiles a rule's match. Paths match case-insensitively unless
 * `caseSensitive` (Express and Koa route `/API/x` to a handler for
 * `/api/x`), and a rule for GET also matches HEAD (Express, Fastify and
 * @koa/router run the GET handler for HEAD); one that lists HEAD alone
 * matches only HEAD.
 */
function compileMatch(m: MatchSettings, caseSensitive = false): Rule['matches'] {
  const checks: Array<(method: string, path: string, host: string | undefined, headers: IncomingHttpHeaders) => boolean> = [];
  if (m.methods !== undefined) {
    const methods = new Set(m.methods);
    if (methods.has('GET')) methods.add('HEAD');
    checks.push((method) => methods.has(method));
  }
  if (m.pathPrefix !== undefined) {
    const prefix = m.pathPrefix;
    if (caseSensitive) checks.push((_m, path) => path.startsWith(prefix));
    else {
      // An anchored case-insensitive regex compares without a lower-cased copy of the path per request.
      const anchored = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'i');
      checks.push((_m, path) => anchored.test(path));
    }
  }
  if (m.pathPattern !== undefined) {
    const pattern =
      caseSensitive || m.pathPattern.flags.includes('i') ? m.pathPattern : new RegExp(m.pathPattern.source, `${m.pathPattern.flags}i`);
    checks.push((_m, path) => pattern.test(path));
  }
  if (m.hosts !== undefined) {
    const exact = new Set(m.hosts.filter((h) => !h.startsWith('*.')));
    const suffixes = m.hosts.filter((h) => h.startsWith('*.')).map((h) => h.slice(1));
    checks.push((_m, _p, host) => host !== undefined && (exact.has(host) || suffixes.some((s) => host.endsWith(s))));
  }
  if (m.headers !== undefined) {
    const wanted = m.headers;
    checks.push((_m, _p, _h, headers) =>
      wanted.every(([name, value]) => {
        const actual = headerValue(headers, name);
        return value === true ? actual !== undefined : actual === value;
      }),
    );
  }
  if (checks.length === 0) return () => true;
  if (checks.length === 1) return checks[0]!;
  return (method, path, host, headers) => checks.every((check) => check(method, path, host, headers));
}
