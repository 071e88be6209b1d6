/** LocalFirstHost: the part of a LocalFirstStore that its composite decisions and control operations work through. */
import type { FloodgateError } from '../../../core/errors.js';
import type { Operation } from '../../../core/policy.js';
import type { RedisStore } from '../redis-store.js';
import type { MessageKind } from './broadcast.js';
import type { Entry } from './lease.js';

/** What the composite decisions and the control operations use of a LocalFirstStore. */
export interface LocalFirstHost {
  readonly entries: ReadonlyMap<string, Entry>;
  /** The store's RedisStore, which sends a composite as one script call. */
  readonly inner: RedisStore;
  /** The store's time, or the clock's failure as a store error. */
  readTime(): number | FloodgateError;
  /** The key's entry, created if needed. */
  touch(key: string, t: number): Entry;
  /** Returns the entry's unspent units to Redis and forgets them. */
  giveBack(key: string, e: Entry): void;
  /** Counts a consume decided from memory. */
  decided(e: Entry, cost: number, t: number): void;
  /** Tops a hot key's lease up before it runs dry, as a single consume decided from memory does. */
  topUpIfLow(key: string, e: Entry, t: number): void;
  /**
   * Counts `cost` that Redis decided in the key's demand and, when the key holds no units and no lease call is
   * in flight, sends a top-up sized by that demand, so the next composite over the key can be decided here.
   */
  leaseAfter(key: string, e: Entry, cost: number, t: number): void;
  /** Resolves once the lease call in flight for `e` is answered, or after the store's timeout. */
  leaseAnswered(e: Entry): Promise<void>;
  /** CONFLICTING_OPTIONS when the key is in use here under another policy. */
  conflict(operation: Operation): FloodgateError | undefined;
  /** Sends the calls queued on the store's own pipeline now (the lease returns). */
  flush(): void;
  /** Broadcasts news of `key` to the other processes. */
  publish(kind: MessageKind, ms: number, key: string): void;
}
