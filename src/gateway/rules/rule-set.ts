/** Rules compiled for the hot path. */
/**
 * Which requests each applies to, and the HttpLimiter (key, policies, headers) that decides for it; shadow rules
 * report without refusing.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { HttpLimiter, type HttpOutcome, type RequestView, type HeaderPair } from '../../http/index.js';
import { RateLimiter, type Store } from '../../index.js';
import type { KeyCheck, KeyRefusal, KnownKeyCheck } from './key-check.js';
import type { KnownKeys, KnownKeysClient } from './known-keys.js';
import type { KnownKeyChanges } from './known-key-changes.js';
import type { ResponsePrice } from './rule-cost.js';
import type { GatewayLogger } from '../runtime/log.js';
import type { ForwardedHeaderWatch } from './forwarded-warning.js';
import { enforceInTurn } from './rule-chain.js';
import { abandonAll } from './rule-slots.js';
import { canonicalHost } from './path-match.js';
import type { DecisionCell, GatewayMetrics } from '../runtime/metrics.js';
import type { RuleSettings } from '../config/settings.js';
import type { RuleOverrides } from './rule-overrides.js';
import type { OverrideSync } from './override-sync.js';
import { type Verdict, type DecidingRule, type RuleOutcome, FORWARD, verdictOf, keyRefusalVerdict } from './verdict.js';

/** A compiled rule. */
export interface Rule extends DecidingRule {
  /** The rule's name (metrics label, log field, store key part). */
  readonly name: string;
  /** Reports without refusing. */
  readonly shadow: boolean;
  /** An enforced rule after which no other rule is tried when it matches. */
  readonly final: boolean;
  /** Counts requests by the client address (`key: ip`). */
  readonly ipKeyed: boolean;
  /** Refuses a repeated or invalid API key before anything is counted; undefined for IP-keyed rules. */
  readonly checkKey: KeyCheck | undefined;
  /**
   * Reads the keys the gateway reads itself (cookie, query, path, method, token claim, compounds) and keeps them for
   * the limiter, or answers the refusal (a repeated, missing or invalid part); undefined when the rule has none.
   */
  readonly readKeys?: ((view: RequestView<IncomingMessage>) => KeyRefusal | undefined | Promise<KeyRefusal | undefined>) | undefined;
  /** With `allowList: { redis }`: asks the set (through its cache) after `checkKey`; undefined otherwise. */
  readonly checkKnownKey?: KnownKeyCheck | undefined;
  /** The cache behind `checkKnownKey`, for inspection. */
  readonly knownKeys?: KnownKeys | undefined;
  /** True when the request facts satisfy every condition of the rule's match. */
  readonly matches: (method: string, path: string, host: string | undefined, headers: IncomingHttpHeaders) => boolean;
  /** Decides about one request. */
  readonly limiter: HttpLimiter<IncomingMessage>;
  /** The RateLimiters of its policies, on the shared store (not the insurance ones), whose breakers readiness reads. */
  readonly limiters: readonly RateLimiter[];
  /** With `overrides`: the per-key entries its limiters follow; undefined otherwise. */
  readonly overrides?: RuleOverrides | undefined;
  /** With `cost` or `count`: the units each request takes, and how its response settles them; undefined for one unit per request. */
  readonly cost: ResponsePrice | undefined;
  /** With `concurrency`: each admitted request holds a slot until its response ends. */
  readonly holdsSlots: boolean;
  /** With `wait`: a refused request may wait, so its client's leaving must reach the limiter (see RequestView.signal). */
  readonly waits: boolean;
  /** The rule's `floodgate_decisions_total` series, bound once so a decision costs one addition. */
  readonly counts: Readonly<Record<RuleOutcome, DecisionCell>>;
}

/** Every outcome a rule counts, in the order its metric series are bound. */
export const RULE_OUTCOMES: readonly RuleOutcome[] = [
  'allowed',
  'limited',
  'missing_key',
  'invalid_key',
  'store_error',
  'error',
  'shadow_allowed',
  'shadow_limited',
];

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
  /** The Redis store's client, which rules with `allowList: { redis }` ask; undefined without a Redis store. */
  readonly redis?: KnownKeysClient | undefined;
  /** Changes to allow-list sets heard on Redis pub/sub; undefined without a Redis store. */
  readonly knownKeyChanges?: KnownKeyChanges | undefined;
  /** Keeps rules' overrides in step with their Redis hashes; undefined without a Redis store. */
  readonly overrideSync?: OverrideSync | undefined;
  /** Told of each failed allow-list lookup (the store's failure log). */
  readonly reportStoreFailure?: (error: unknown) => void;
  /** Told of each refusal over a limit (rule name, the policy that refused, the key it counts), when the admin API keeps the most-limited keys. */
  readonly onLimited?: (rule: string, policy: string, key: string) => void;
  /** Warns once of forwarding headers that IP-keyed rules ignore; the same watch across reloads. */
  readonly forwarded?: ForwardedHeaderWatch;
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
  /** Whether any rule's requests may wait, so the gateway hands each request's abort signal to the rules. */
  readonly waits: boolean;
  private readonly unmatchedCount: DecisionCell;

  /**
   * @param rules - compiled rules, in order
   * @param settings - the rules' settings, in the same order
   * @param metrics - where decisions are counted
   * @param forwarded - the watch for ignored forwarding headers, when `trustProxy` is unset
   */
  constructor(
    readonly rules: readonly Rule[],
    settings: readonly RuleSettings[],
    metrics: GatewayMetrics,
    private readonly forwarded?: ForwardedHeaderWatch,
  ) {
    this.needsHost = settings.some((r) => r.match.hosts !== undefined);
    this.waits = rules.some((r) => r.waits);
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
    if (more !== undefined)
      return enforceInTurn(
        more,
        (rule) => this.enforce(rule, view),
        (held) => abandonAll(view.raw, held),
      );
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
          ? enforceInTurn(
              enforced as readonly Rule[],
              (rule) => this.enforce(rule, view),
              (held) => abandonAll(view.raw, held),
            )
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

  /** The key checks, then the rule's HttpLimiter decides. */
  private enforce(rule: Rule, view: RequestView<IncomingMessage>): Verdict | Promise<Verdict> {
    if (rule.ipKeyed && this.forwarded?.pending === true) this.forwarded.see(rule.name, view.headers, view.socketAddress);
    if (rule.checkKey !== undefined) {
      const refused = rule.checkKey(view);
      if (refused !== undefined) return keyRefusalVerdict(rule, refused);
    }
    if (rule.readKeys !== undefined) {
      const read = rule.readKeys(view);
      if (read instanceof Promise)
        return read.then((refused) => (refused !== undefined ? keyRefusalVerdict(rule, refused) : this.known(rule, view)));
      if (read !== undefined) return keyRefusalVerdict(rule, read);
    }
    return this.known(rule, view);
  }

  /** The allow list in Redis, when the rule has one, then the count. */
  private known(rule: Rule, view: RequestView<IncomingMessage>): Verdict | Promise<Verdict> {
    if (rule.checkKnownKey !== undefined) {
      const known = rule.checkKnownKey(view);
      if (known instanceof Promise)
        return known.then((refused) => (refused !== undefined ? keyRefusalVerdict(rule, refused) : this.count(rule, view)));
      if (known !== undefined) return keyRefusalVerdict(rule, known);
    }
    return this.count(rule, view);
  }

  /** The rule's HttpLimiter decides (the key passed its checks). */
  private count(rule: Rule, view: RequestView<IncomingMessage>): Verdict | Promise<Verdict> {
    const decided = rule.limiter.decide(view);
    return decided instanceof Promise ? decided.then((outcome) => verdictOf(rule, outcome)) : verdictOf(rule, decided);
  }

  /** Runs a shadow rule; returns its `Floodgate-Shadow` list item. */
  private async shadow(rule: Rule, view: RequestView<IncomingMessage>): Promise<string> {
    if (rule.ipKeyed && this.forwarded?.pending === true) this.forwarded.see(rule.name, view.headers, view.socketAddress);
    // A key the gateway reads itself is read first, as for an enforced rule; its refusal is reported, not sent.
    const refused = rule.readKeys === undefined ? undefined : await rule.readKeys(view);
    if (refused !== undefined) {
      rule.counts.shadow_allowed.count += 1;
      return `"${rule.name}";outcome=refused-${refused.status}`;
    }
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
