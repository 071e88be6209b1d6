/** One computation shared by concurrent callers and reused briefly. */
/**
 * Scrapes and probes that fan out (to workers, to the upstream) run at most once at a time.
 */

/**
 * Wraps an expensive async computation (an aggregation over every worker, a
 * probe of the upstream) so that callers arriving while it runs share its
 * result, and callers within `reuseMs` of its end get that result again
 * instead of starting another. A failure is shared by the callers that
 * waited for it but never reused: the next caller tries again.
 */
export class SharedResult<T> {
  private running: Promise<T> | undefined;
  private last: { value: T; at: number } | undefined;

  /**
   * @param compute - the computation; called at most once at a time
   * @param reuseMs - how long a result stays good for later callers; 0 shares only the one in flight
   * @param now - the clock (ms), for tests
   */
  constructor(
    private readonly compute: () => Promise<T>,
    private readonly reuseMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The result in flight, a recent one, or a fresh one. */
  get(): Promise<T> {
    if (this.running !== undefined) return this.running;
    const last = this.last;
    if (last !== undefined && this.now() - last.at < this.reuseMs) return Promise.resolve(last.value);
    const running = this.compute().then(
      (value) => {
        this.last = { value, at: this.now() };
        this.running = undefined;
        return value;
      },
      (error: unknown) => {
        this.running = undefined;
        throw error;
      },
    );
    this.running = running;
    return running;
  }

  /** Forgets the last result, so the next caller computes a fresh one. */
  forget(): void {
    this.last = undefined;
  }
}
