/** The lapse probe of the in-memory block. */
/**
 * When a hot key's block ends, one event-loop turn of its consumes asks the store and later turns wait for that
 * answer, instead of each making a store call of its own.
 */
import type { Decision } from '../core/decision.js';
import type { FloodgateError } from '../core/errors.js';

/** The consumes of the turn in which a key's in-memory block was found over (see RateLimiter's probe). */
export interface Probe {
  /** True until that turn ends: consumes until then go to the store too. */
  joinable: boolean;
  /** The turn's consumes. */
  calls: Promise<Decision>[];
  /** Set when the turn ends; resolves (never rejects) once every call of it is decided, or after PROBE_WAIT_MS, and the probe is removed. */
  answered: Promise<void> | undefined;
  /** The store failure one of the turn's calls met, if any. */
  failure: FloodgateError | undefined;
}

/** Longest a consume waits for a probe's answers before calling the store itself. */
const PROBE_WAIT_MS = 1000;

/**
 * The probes of one limiter, by key. `ask` sends one consume to the store
 * (through the breaker and the fallbacks) and notes a store failure on the
 * probe it is given.
 */
export class LapseProbes {
  private readonly byKey = new Map<string, Probe>();

  /** @param ask - sends a consume of `amount` for `key` to the store, on behalf of `probe` */
  constructor(private readonly ask: (key: string, amount: number, probe: Probe) => Promise<Decision>) {}

  /** The key's probe, while one is running. */
  current(key: string): Probe | undefined {
    return this.byKey.get(key);
  }

  /** Drops the key's probe (a reset or reward changed the counts its answer would be read against). */
  forget(key: string): void {
    this.byKey.delete(key);
  }

  /** Drops every probe: every in-memory block was dropped (a reset or unblock may have been missed). */
  forgetAll(): void {
    this.byKey.clear();
  }

  /**
   * The first consume of a key within a second of its in-memory block's end.
   * A key that was blocked is hot: until the store answers, every later
   * consume of it would make a store call of its own, most of them to be
   * refused. So consumes of later event-loop turns wait for the answers to
   * this turn's consumes of the key (at most {@link PROBE_WAIT_MS}), then are
   * refused from memory if those blocked the key anew, get the fallback at
   * once if the store failed them, or are sent to the store together.
   * Consumes in this turn go to the store at once, so a store that coalesces
   * a turn's calls (the Redis store) usually decides them in one round trip.
   */
  start(key: string, amount: number): Promise<Decision> {
    const probe: Probe = { joinable: true, calls: [], answered: undefined, failure: undefined };
    this.byKey.set(key, probe);
    const decision = this.join(probe, key, amount);
    setImmediate(() => {
      probe.joinable = false;
      let timer: NodeJS.Timeout | undefined;
      probe.answered = new Promise<void>((resolve) => {
        // A store call that never ends must not hold the key's consumes for good. Not unref'd: a
        // consume is waiting on it, and cleared as soon as the calls end.
        timer = setTimeout(resolve, PROBE_WAIT_MS);
        void Promise.allSettled(probe.calls).then(() => resolve());
      }).then(() => {
        clearTimeout(timer);
        if (this.byKey.get(key) === probe) this.byKey.delete(key);
      });
    });
    return decision;
  }

  /** A consume of the probe's turn: it goes to the store, and later turns wait for its answer too. */
  join(probe: Probe, key: string, amount: number): Promise<Decision> {
    // Runs up to the store call synchronously, so the store has queued it before the turn ends.
    const decision = this.ask(key, amount, probe);
    probe.calls.push(decision);
    return decision;
  }
}
