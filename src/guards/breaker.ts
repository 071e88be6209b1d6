/** Circuit breaker: stops calling a store that keeps failing. */
/**
 * It lets one probe through per cooldown until the store answers again.
 */

/** Options of {@link CircuitBreaker}. */
export interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** ms the circuit stays open before a probe is let through. */
  cooldownMs: number;
}

/** Failure scopes one breaker keeps breakers for; past it the least recently used scope's breaker is dropped (closed or not). */
const MAX_SCOPES = 1024;

/**
 * Closed → (threshold failures) → open → (cooldown) → one probe → closed or open again.
 *
 * A store whose parts fail apart (the nodes of a Redis Cluster: `Store.failureScope`) gets one breaker per scope from
 * {@link forScope}: a lost master opens the breaker of its keys only, and keys on healthy masters keep reaching Redis.
 */
export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;
  /** The breakers of failure scopes, by scope, least recently used first. */
  private scopes: Map<string, CircuitBreaker> | undefined;

  /** @param options - see {@link BreakerOptions} */
  constructor(private readonly options: BreakerOptions) {}

  /** The breaker of failure scope `scope` (made on first use, with this one's options); this one when `scope` is undefined. */
  forScope(scope: string | undefined): CircuitBreaker {
    if (scope === undefined) return this;
    const scopes = (this.scopes ??= new Map());
    let breaker = scopes.get(scope);
    if (breaker === undefined) {
      breaker = new CircuitBreaker(this.options);
      if (scopes.size >= MAX_SCOPES) scopes.delete(scopes.keys().next().value!);
    } else {
      scopes.delete(scope);
    }
    scopes.set(scope, breaker);
    return breaker;
  }

  /** True when this breaker or any scope's is open: what health and readiness report. */
  anyOpen(now: number): boolean {
    if (this.isOpen(now)) return true;
    if (this.scopes !== undefined) for (const b of this.scopes.values()) if (b.isOpen(now)) return true;
    return false;
  }

  /** ms until the first open breaker (this one or a scope's) lets a probe through; 0 when none is open. */
  nextRetryInMs(now: number): number {
    let soonest = this.isOpen(now) ? this.retryInMs(now) : Infinity;
    if (this.scopes !== undefined) for (const b of this.scopes.values()) if (b.isOpen(now)) soonest = Math.min(soonest, b.retryInMs(now));
    return soonest === Infinity ? 0 : soonest;
  }

  /** True when the circuit is open (or half-open with the probe already out). */
  isOpen(now: number): boolean {
    return this.openUntil !== 0 && (now < this.openUntil || this.probing);
  }

  /**
   * Asks to call the store now. False while open; after the cooldown, true
   * for exactly one caller (the probe) until it reports back.
   */
  allow(now: number): boolean {
    if (this.openUntil === 0) return true;
    if (now < this.openUntil || this.probing) return false;
    this.probing = true;
    return true;
  }

  /** ms until the next probe may go out (0 when closed). */
  retryInMs(now: number): number {
    return this.openUntil === 0 ? 0 : Math.max(0, this.openUntil - now);
  }

  /** Reports a store answer: closes the circuit. */
  success(): void {
    this.failures = 0;
    this.openUntil = 0;
    this.probing = false;
  }

  /** Reports a store failure: opens the circuit at the threshold, or again after a failed probe. */
  failure(now: number): void {
    this.failures++;
    if (this.probing || this.failures >= this.options.failureThreshold) {
      this.openUntil = now + this.options.cooldownMs;
      this.probing = false;
    }
  }
}
