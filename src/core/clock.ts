/** The injectable time source, so tests move time instead of sleeping. */

/** Returns the current time in whole milliseconds since the epoch. */
export type Clock = () => number;

/** The default clock: wall time in milliseconds. */
export const systemClock: Clock = () => Date.now();

/** A clock that only moves when told to; for tests and simulations. */
export class ManualClock {
  private current: number;

  /** @param start - initial time in milliseconds (default 1_000_000) */
  constructor(start = 1_000_000) {
    this.current = start;
  }

  /** The current time; pass `clock.now` wherever a {@link Clock} is expected. */
  readonly now: Clock = () => this.current;

  /** Moves time forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.current += ms;
  }

  /** Sets the absolute time. */
  set(ms: number): void {
    this.current = ms;
  }
}
