/** A pub/sub subscription of the local-first store. */
/**
 * What it reports to its owner and how it is closed, whichever client holds it.
 */

/** What a subscription reports to its owner. */
export interface SubscriptionHandlers {
  /** A message arrived on the channel. */
  message(text: string): void;
  /** The subscription is confirmed: messages from now on will arrive. */
  up(): void;
  /** The connection dropped: messages may have been missed. */
  down(): void;
}

/** A live subscription to one channel. */
export interface Subscription {
  /** Unsubscribes, removes its listeners, and quits the connection if the store opened it. */
  close(): Promise<void>;
}
