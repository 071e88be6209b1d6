// Timers driven by a ManualClock, for tests of code that schedules retries and delays: they fire only when the test moves the clock.
import { ManualClock } from '../../src/index.js';
import type { Scheduler } from '../../src/waiting/wait-queue.js';

/** Timers that fire only when the test moves its ManualClock. */
export class ManualTimers {
  readonly clock: ManualClock;
  private timers: { at: number; fn: () => void }[] = [];
  /** Every timer fires this much later than asked (a busy event loop). */
  lateness = 0;
  readonly schedule: Scheduler = (fn, ms) => {
    const timer = { at: this.clock.now() + ms + this.lateness, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  };
  /** @param start - the clock's start (ms), or a ManualClock to drive (one a store was built on) */
  constructor(start: number | ManualClock = 0) {
    this.clock = typeof start === 'number' ? new ManualClock(start) : start;
  }
  /** Timers not fired yet. */
  get pending(): number {
    return this.timers.length;
  }
  /** Moves time by `ms`, firing each timer due on the way (in time order) and letting the promises it starts settle. */
  async advance(ms: number): Promise<void> {
    const end = this.clock.now() + ms;
    await settle();
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.clock.set(Math.max(this.clock.now(), due.at));
      due.fn();
      await settle();
    }
    this.clock.set(end);
  }
}

/** Lets pending promise callbacks run. */
export const settle = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));
