// A MemoryStore behind a switch that makes every call fail, counting the calls that reach it: the fault tests' store.
import { MemoryStore, type Operation, type Outcome, type Store } from '../../src/index.js';

/** A real MemoryStore whose calls fail with "connection refused" while `failing` is true. */
export class FlakyStore implements Store {
  readonly name = 'flaky';
  /** While true, every call rejects. */
  failing = false;
  /** Calls that reached the store, failed ones included. */
  calls = 0;
  private readonly inner: MemoryStore;

  constructor(clock: () => number) {
    this.inner = new MemoryStore({ clock, sweepIntervalMs: 0 });
  }

  apply(operation: Operation): Promise<Outcome> {
    this.calls++;
    return this.failing ? Promise.reject(new Error('connection refused')) : this.inner.apply(operation);
  }

  consumeAll(operations: readonly Operation[]): Promise<Outcome[]> {
    this.calls++;
    return this.failing ? Promise.reject(new Error('connection refused')) : this.inner.consumeAll(operations);
  }
}
