/** The concurrency-slot vocabulary stores speak. */
/**
 * What an acquisition answers, owner ids, and the checks every store applies to a slot call.
 */
import { randomBytes } from 'node:crypto';
import { describeValue } from './describe-value.js';
import { ErrorCode, FloodgateError } from './errors.js';

/**
 * What a store answers to an acquisition. A slot is held by one owner id
 * until it is released or its expiry passes; only unexpired slots count.
 */
export interface SlotAcquisition {
  /** Whether the slot was taken: fewer than `limit` unexpired slots were held by others. */
  readonly admitted: boolean;
  /** Unexpired slots of the key after the call, this one included when admitted. */
  readonly inUse: number;
  /**
   * When refused: ms until the earliest held slot expires (a slot may be
   * released sooner). 0 when admitted.
   */
  readonly retryAfterMs: number;
}

/**
 * The concurrency capability of a {@link Store}, optional like `consumeAll`.
 * Keys are store keys (prefix included), in their own namespace: a key's
 * slots never touch the rate counters of the same key.
 */
export interface SlotStore {
  /**
   * Takes a slot of `key` for `owner`, expiring `ttlMs` from now, when fewer
   * than `limit` unexpired slots are held. An owner that already holds an
   * unexpired slot of the key has it extended instead (admitted, counted once).
   */
  acquireSlot?(key: string, limit: number, owner: string, ttlMs: number): Promise<SlotAcquisition>;
  /**
   * Frees `owner`'s slot of `key`. Resolves true when an unexpired slot of
   * that owner was freed; false when there was none (already released, or
   * expired, and then perhaps taken by another owner, whose slot stays).
   */
  releaseSlot?(key: string, owner: string): Promise<boolean>;
  /**
   * Moves the expiry of `owner`'s unexpired slot of `key` to `ttlMs` from
   * now. Resolves false when the owner holds no unexpired slot: an expired
   * slot is never revived, since another owner may have its place.
   */
  renewSlot?(key: string, owner: string, ttlMs: number): Promise<boolean>;
}

/** Longest slot ttl: within what `setTimeout` honours, so the heartbeat can run at ttl/3. */
export const MAX_SLOT_TTL_MS = 2 ** 31 - 1;
/** Longest owner id a store accepts (ours are at most 33 characters; a bound keeps a bad caller from storing megabytes). */
const MAX_OWNER_LENGTH = 128;

/** This process's part of every owner id: 8 random bytes, drawn once (a forked or restarted process draws its own). */
let ownerPrefix: string | undefined;
let ownerCount = 0;

/**
 * A fresh owner id, one per acquisition: this process's random 64-bit prefix (16 hex characters), `-`, and a counter.
 * Unique across processes by the prefix and within one by the counter; drawing 16 random bytes per acquisition was a
 * quarter of a slot's CPU. At most 33 characters.
 */
export function newOwner(): string {
  ownerPrefix ??= `${randomBytes(8).toString('hex')}-`;
  ownerCount = ownerCount >= Number.MAX_SAFE_INTEGER ? 1 : ownerCount + 1;
  return ownerPrefix + ownerCount;
}

/**
 * The error for a slot call whose arguments no store accepts (INVALID_KEY,
 * INVALID_OPTIONS, INVALID_DURATION or INVALID_LIMIT, naming `store`), or
 * undefined. Stores reject with it instead of sending the call.
 */
export function slotCallError(store: string, key: unknown, owner: unknown, ttlMs?: unknown, limit?: unknown): FloodgateError | undefined {
  if (typeof key !== 'string' || key.length === 0) {
    return new FloodgateError(ErrorCode.INVALID_KEY, `${store} slot key must be a non-empty string; got ${describeValue(key)}.`);
  }
  if (typeof owner !== 'string' || owner.length === 0 || owner.length > MAX_OWNER_LENGTH) {
    return new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${store} slot owner must be a string of 1 to ${MAX_OWNER_LENGTH} characters; got ${describeValue(owner)}.`,
    );
  }
  if (ttlMs !== undefined && (!Number.isSafeInteger(ttlMs) || (ttlMs as number) < 1 || (ttlMs as number) > MAX_SLOT_TTL_MS)) {
    return new FloodgateError(
      ErrorCode.INVALID_DURATION,
      `${store} slot ttl must be a whole number of ms from 1 to ${MAX_SLOT_TTL_MS}; got ${describeValue(ttlMs)}.`,
    );
  }
  if (limit !== undefined && (!Number.isSafeInteger(limit) || (limit as number) < 1)) {
    return new FloodgateError(ErrorCode.INVALID_LIMIT, `${store} slot limit must be a positive whole number; got ${describeValue(limit)}.`);
  }
  return undefined;
}

/** Whether `store` has all three slot methods. */
export function hasSlots(store: SlotStore): store is Required<SlotStore> {
  return typeof store.acquireSlot === 'function' && typeof store.releaseSlot === 'function' && typeof store.renewSlot === 'function';
}
