/** The primary's reply to one batch as it is built. */
/**
 * Each operation's outcome or error, the refusals workers may replay, lease grants, and the invalidations the batch
 * causes.
 */
import type { Outcome } from '../../core/policy.js';
import { PROTOCOL_VERSION, pushOutcome, type ResultMessage, type InvalidateMessage } from './protocol.js';

/** What one batch answers and invalidates, gathered while its operations are applied. */
export class BatchReply {
  private readonly outcomes: (number | null)[] = [];
  private errors: [number, string, string][] | undefined;
  private hints: number[] | undefined;
  private grants: number[] | undefined;
  private stale: Set<string> | undefined;
  private revoked: Set<string> | undefined;
  private staleAll = false;
  /** Some operation leased units beyond its need. */
  leasedOut = false;

  /** Operation `index` failed: its outcome slot is empty and the error says why. */
  fail(index: number, code: string, text: string): void {
    this.outcomes.push(-1, 0, 0, 0, 0);
    (this.errors ??= []).push([index, code, text]);
  }

  /** The next operation's outcome. */
  answer(outcome: Outcome): void {
    pushOutcome(this.outcomes, outcome);
  }

  /** Operation `index` is a lease call: `granted` units of the window ending at `windowEnd` (primary time). */
  grant(index: number, granted: number, windowEnd: number): void {
    (this.grants ??= []).push(index, granted, windowEnd);
  }

  /** The refusal of operation `index` may be replayed by the worker. */
  hint(index: number): void {
    (this.hints ??= []).push(index);
  }

  /** Takes back the hint of operation `index` (a later operation of this batch invalidated it). */
  withdraw(index: number): void {
    const at = this.hints?.indexOf(index) ?? -1;
    if (at >= 0) this.hints!.splice(at, 1);
  }

  /** Workers must forget the refusal they know of `key`. */
  staleKey(key: string): void {
    (this.stale ??= new Set()).add(key);
  }

  /** Workers must drop their lease of `key`. */
  revoke(key: string): void {
    (this.revoked ??= new Set()).add(key);
  }

  /** Workers must forget every refusal and lease (the primary's table is full and may forget any key); no hint of this batch stands. */
  forgetEverything(): void {
    this.staleAll = true;
    if (this.hints) this.hints.length = 0;
  }

  /** Whether the worker should hear later invalidations (it was hinted or leased to). */
  get subscribes(): boolean {
    return (this.hints !== undefined && this.hints.length > 0) || this.leasedOut;
  }

  /** The invalidation to broadcast before the answer, if any. */
  invalidation(): InvalidateMessage | undefined {
    if (this.staleAll) return { floodgate: PROTOCOL_VERSION, t: 'inv', all: 1 };
    if (this.stale === undefined && this.revoked === undefined) return undefined;
    return {
      floodgate: PROTOCOL_VERSION,
      t: 'inv',
      ...(this.stale ? { k: [...this.stale] } : {}),
      ...(this.revoked ? { l: [...this.revoked] } : {}),
    };
  }

  /** The result message of batch `id`. */
  result(id: number): ResultMessage {
    return {
      floodgate: PROTOCOL_VERSION,
      t: 'result',
      id,
      r: this.outcomes,
      ...(this.errors ? { e: this.errors } : {}),
      ...(this.hints !== undefined && this.hints.length > 0 ? { h: this.hints } : {}),
      ...(this.grants ? { g: this.grants } : {}),
    };
  }
}

/**
 * Remembers what workers were told about `key` (a hint or a lease) until
 * `value.until`, keeping the later end when they may still hold an earlier
 * one; when past `maxKeys`, drops the oldest and returns it (workers may
 * still act on it, so the caller tells them to forget it).
 */
export function remember<T extends { readonly until: number }>(
  told: Map<string, T>,
  key: string,
  value: T,
  maxKeys: number,
): [string, T] | undefined {
  const earlier = told.get(key);
  if (earlier !== undefined) {
    told.delete(key);
    if (earlier.until > value.until) value = { ...value, until: earlier.until };
  }
  told.set(key, value);
  if (told.size <= maxKeys) return undefined;
  const oldest = told.entries().next().value!;
  told.delete(oldest[0]);
  return oldest;
}

/** Amount checks that keep garbage from corrupting a counter (the limiter validates the real calls). */
export function validAmount(kind: string, amount: unknown): boolean {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount)) return false;
  switch (kind) {
    case 'lease':
      return amount >= 0;
    case 'consume':
    case 'reward':
    case 'penalty':
      return amount > 0;
    case 'block':
      // 0 blocks until now: how RateLimiter.unblock ends a block.
      return amount >= 0 || amount === -1;
    default:
      return true;
  }
}
