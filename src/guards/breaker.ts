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

/** Closed → (threshold failures) → open → (cooldown) → one probe → closed or open again. */
export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;

  /** @param options - see {@link BreakerOptions} */
  constructor(private readonly options: BreakerOptions) {}

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
