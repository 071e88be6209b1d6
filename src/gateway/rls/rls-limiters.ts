/** The rate limit service's limiters. */
/**
 * One RateLimiter per configured limit (and per limit Envoy sends in a descriptor), on a table per domain, with the
 * gateway's failure policy, kept across reloads while their numbers stay.
 */
import { RateLimiter, type RateLimiterOptions } from '../../index.js';
import type { GatewaySettings } from '../config/settings.js';
import type { RuleContext } from '../rules/rule-set.js';
import type { GatewayStore } from '../rules/key-tables.js';
import { maxRequestsPerUnit, UNIT_SECONDS, type RlsConfig, type RlsLimit, type RlsNode, type RlsUnit } from './rls-config.js';

/** Most limiters kept for limits Envoy sends in descriptors (its route config has a handful; a flood of made-up ones is not kept). */
const MAX_OVERRIDE_LIMITERS = 1_000;

/** The numbers a limiter counts under. */
export interface LimiterSpec {
  /** Requests per unit; positive. */
  readonly requestsPerUnit: number;
  /** The unit. */
  readonly unit: RlsUnit;
  /** The algorithm. */
  readonly algorithm: RateLimiterOptions['algorithm'] & string;
}

/** Builds and keeps the limiters. */
export class RlsLimiters {
  private byPrefix = new Map<string, RateLimiter>();
  private readonly overrides = new Map<string, RateLimiter>();
  /** Each limiter's domain, whose table it counts in. */
  private readonly domainOf = new WeakMap<RateLimiter, string>();
  /** What each limiter was made from, for its checker. */
  private readonly made = new WeakMap<RateLimiter, { readonly prefix: string; readonly domain: string; readonly spec: LimiterSpec }>();
  /** Each fixed-window limiter's checker (null: it has none), made when first needed. */
  private readonly checkers = new WeakMap<RateLimiter, RateLimiter | null>();
  /**
   * The limiter of each configured limit object, under the store prefix it was found with: every descriptor of every
   * request asks, and building its prefix string to look it up cost a string and a hash per descriptor. Made anew by
   * {@link retain}, so a limiter it drops is never handed out again.
   */
  private found = new WeakMap<RlsLimit, { readonly storePrefix: string; readonly limiter: RateLimiter }>();

  /**
   * @param tables - the stores to count in: on the embedded memory store a table per domain (one request's descriptors are
   *   decided in one atomic step, so in one store), so a flood of made-up values in one domain fills no other's table; within
   *   a table each limit has its own overflow sketch (the store keeps one per limiter prefix)
   * @param context - the gateway's rule context (whether the store can fail, the insurance store)
   * @param settings - the gateway's settings in force (store prefix, failure policy, in-memory block)
   */
  constructor(
    private readonly tables: Pick<GatewayStore, 'rlsStoreFor' | 'retainRls'>,
    private readonly context: RuleContext,
    private readonly settings: () => GatewaySettings,
  ) {}

  /** The limiter of a configured limit (positive `requestsPerUnit`, a unit). */
  forLimit(limit: RlsLimit): RateLimiter {
    const storePrefix = this.settings().store.prefix;
    const known = this.found.get(limit);
    if (known !== undefined && known.storePrefix === storePrefix) return known.limiter;
    const prefix = this.prefixOf(limit);
    let limiter = this.byPrefix.get(prefix);
    if (limiter === undefined) {
      limiter = this.make(prefix, limit.domain, { requestsPerUnit: limit.requestsPerUnit, unit: limit.unit!, algorithm: limit.algorithm });
      this.byPrefix.set(prefix, limiter);
    }
    this.found.set(limit, { storePrefix, limiter });
    return limiter;
  }

  /** The limiter of a limit Envoy sent with a descriptor (its route's `limit` override) in `domain`. */
  forOverride(domain: string, spec: LimiterSpec): RateLimiter {
    const prefix = `${this.settings().store.prefix}:rls-override:${domain}:${spec.requestsPerUnit}:${spec.unit}`;
    let limiter = this.overrides.get(prefix);
    if (limiter === undefined) {
      if (this.overrides.size >= MAX_OVERRIDE_LIMITERS) this.overrides.delete(this.overrides.keys().next().value!);
      limiter = this.make(prefix, domain, spec);
      this.overrides.set(prefix, limiter);
    }
    return limiter;
  }

  /**
   * The checker of `limiter`: the same counters (store, prefix and keys) under a limit one higher, so that its peek
   * is allowed while the count is at most the limit, and its penalty tells whether the count went past the limit.
   * A check-only descriptor (`hits_addend` 0) is over only once its count is past the limit, as envoyproxy/ratelimit
   * decides, which the limiter's own peek (whether one more unit fits) cannot tell from a count exactly at the limit.
   * A policy and its per-key override are one family, so stores let the two take turns on a key. Undefined for the
   * other algorithms (their state is not a count) and for a limit at floodgate's largest.
   */
  checkerOf(limiter: RateLimiter): RateLimiter | undefined {
    let checker = this.checkers.get(limiter);
    if (checker === undefined) {
      const made = this.made.get(limiter);
      const { spec } = made ?? {};
      checker =
        made === undefined ||
        spec === undefined ||
        spec.algorithm !== 'fixed-window' ||
        spec.requestsPerUnit + 1 > maxRequestsPerUnit(spec.unit)
          ? null
          : this.make(made.prefix, made.domain, spec, { limit: spec.requestsPerUnit + 1 });
      this.checkers.set(limiter, checker);
    }
    return checker ?? undefined;
  }

  /** Drops the limiters of limits `config` no longer has (their counters stay in the store until they expire). */
  retain(config: RlsConfig): void {
    const keep = new Set<string>();
    const walk = (node: RlsNode): void => {
      for (const child of node.children.values()) {
        if (child.limit !== undefined && !child.limit.unlimited && child.limit.unit !== undefined) keep.add(this.prefixOf(child.limit));
        walk(child);
      }
    };
    for (const root of config.domains.values()) walk(root);
    this.byPrefix = new Map([...this.byPrefix].filter(([prefix]) => keep.has(prefix)));
    this.found = new WeakMap();
    const domains = new Set(config.domains.keys());
    for (const [prefix, limiter] of this.overrides) if (!domains.has(this.domainOf.get(limiter) ?? '')) this.overrides.delete(prefix);
    this.tables.retainRls?.(domains);
  }

  /** True when any limiter's breaker keeps calls away from the store. */
  circuitOpen(): boolean {
    for (const l of this.byPrefix.values()) if (l.circuitOpen()) return true;
    for (const l of this.overrides.values()) if (l.circuitOpen()) return true;
    return false;
  }

  /** A limit's counters are its own: its place in the tree and its numbers, so a reload that changes them starts afresh. */
  private prefixOf(limit: RlsLimit): string {
    return `${this.settings().store.prefix}:rls:${limit.fullKey}:${limit.requestsPerUnit}:${limit.unit}:${limit.algorithm}`;
  }

  /** A limiter on the table of `domain`; with `raised`, a checker (every key under that limit, no in-memory block). */
  private make(prefix: string, domain: string, spec: LimiterSpec, raised?: { readonly limit: number }): RateLimiter {
    const settings = this.settings();
    const base = { limit: spec.requestsPerUnit, window: UNIT_SECONDS[spec.unit] * 1000, algorithm: spec.algorithm, prefix };
    // One object for every key: the limiter checks an override once per object.
    const overrides = raised === undefined ? {} : { overrides: () => raised };
    const options: RateLimiterOptions = {
      ...base,
      ...overrides,
      store: this.tables.rlsStoreFor(domain),
      // A checker's answers are not the limiter's: a block learned from them would refuse what the limit admits.
      inMemoryBlock: settings.inMemoryBlock && raised === undefined ? { maxKeys: settings.store.maxKeys } : false,
    };
    // The same failure policy as the HTTP rules (see compile-rules.ts), so one setting governs the whole gateway.
    if (this.context.storeCanFail) {
      const policy = settings.store.onFailure;
      if (policy === 'insurance') options.insurance = new RateLimiter({ ...base, ...overrides, store: this.context.insuranceStore });
      else if (policy === 'fail-open' || policy === 'fail-closed') options.onStoreFailure = policy;
    }
    const limiter = new RateLimiter(options);
    this.domainOf.set(limiter, domain);
    if (raised === undefined) this.made.set(limiter, { prefix, domain, spec });
    return limiter;
  }
}
