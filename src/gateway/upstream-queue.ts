/** The wait for an upstream connection: at most `proxy.connections` requests in flight, the rest wait in order, and one waiting longer than `proxy.queueTimeout` is answered 503 instead. */

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

  /**
   * Runs `start` at once when a connection is free, else when one frees up.
   * `expired` runs instead when no turn comes within the timeout. Every
   * `start` must be followed by one {@link leave}.
   * @returns undefined when `start` ran at once; else a function that gives up the place in the queue (the client left), doing nothing once `start` or `expired` ran
   */
  enter(start: () => void, expired: () => void): (() => void) | undefined {
    if (this.active < this.capacity) {
      this.active += 1;
      start();
      return undefined;
    }
    const waiter: Waiter = { start, timer: undefined, done: false };
    if (this.timeoutMs > 0) {
      waiter.timer = setTimeout(() => {
        waiter.done = true;
        expired();
      }, this.timeoutMs);
    }
    this.waiting.push(waiter);
    return () => {
      if (waiter.done) return;
      waiter.done = true;
      clearTimeout(waiter.timer);
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
