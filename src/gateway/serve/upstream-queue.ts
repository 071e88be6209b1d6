/** The wait for an upstream connection. */
/**
 * At most `proxy.connections` requests in flight, the rest wait in order, and one waiting longer than
 * `proxy.queueTimeout` is answered 503 instead.
 */

interface Waiter {
  start: () => void;
  timer: NodeJS.Timeout | undefined;
  done: boolean;
}

/**
 * Admits requests to the upstream pool. undici queues without bound and
 * without a deadline; this queue in front of it gives a request that cannot
 * get a connection in time a prompt 503 rather than a long wait.
 */
export class UpstreamQueue {
  private active = 0;
  private readonly waiting: Waiter[] = [];
  private head = 0;

  /**
   * @param capacity - requests in flight at once (the pool size)
   * @param timeoutMs - longest wait for a turn; 0 waits as long as it takes
   */
  constructor(
    private readonly capacity: number,
    private readonly timeoutMs: number,
  ) {}

  /** Takes a turn when a connection is free now; every true must be followed by one {@link leave}. */
  tryEnter(): boolean {
    if (this.active >= this.capacity) return false;
    this.active += 1;
    return true;
  }

  /**
   * Waits for a turn (after {@link tryEnter} said none is free): `start`
   * runs when a connection frees up, or `expired` when none does within the
   * timeout. Every `start` must be followed by one {@link leave}.
   * @returns a function that gives up the place (the client left): true when it did, false once `start` or `expired` ran
   */
  wait(start: () => void, expired: () => void): () => boolean {
    const waiter: Waiter = { start, timer: undefined, done: false };
    if (this.timeoutMs > 0) {
      waiter.timer = setTimeout(() => {
        waiter.done = true;
        expired();
      }, this.timeoutMs);
    }
    this.waiting.push(waiter);
    return () => {
      if (waiter.done) return false;
      waiter.done = true;
      clearTimeout(waiter.timer);
      return true;
    };
  }

  /** Ends a turn and starts the next waiter's. */
  leave(): void {
    this.active -= 1;
    while (this.head < this.waiting.length) {
      const next = this.waiting[this.head]!;
      this.head += 1;
      if (next.done) continue;
      next.done = true;
      clearTimeout(next.timer);
      this.active += 1;
      this.compact();
      next.start();
      return;
    }
    this.compact();
  }

  /** Drops the consumed front of the array now and then, so a long-lived queue does not grow. */
  private compact(): void {
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
  }
}
