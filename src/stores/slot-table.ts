/** SlotTable: the memory store's concurrency slots, per key a map of owner to expiry. */
/**
 * Bounded in keys; a key with no slots is deleted.
 */
import { performance } from 'node:perf_hooks';
import type { SlotAcquisition } from '../core/slots.js';

/** Least time between two full sweeps a full table triggers (real ms), so a flood of new keys cannot make every call O(keys). */
const FULL_SWEEP_GAP_MS = 1000;

/**
 * Concurrency slots in this process. Each key maps owner ids to expiry
 * times; expired slots are dropped whenever their key is touched and by
 * {@link sweep}, and a key left with no slot is deleted, so the table holds
 * only keys with a live slot (or one not yet reclaimed).
 *
 * Bounded to `maxKeys` keys. A new key that finds the table full of keys
 * with live slots is refused, never admitted by forgetting another key's
 * slots (that would let the other key run over its limit). Work per call is
 * proportional to the key's slots, at most its limit.
 */
export class SlotTable {
  private readonly keys = new Map<string, KeySlots>();
  private lastFullSweep = -Infinity;

  /** @param maxKeys - the most keys held at once */
  constructor(private readonly maxKeys: number) {}

  /** Keys held (with at least one slot, expired ones not yet reclaimed included). */
  get size(): number {
    return this.keys.size;
  }

  /** See SlotStore.acquireSlot; decided at time `now`. */
  acquire(key: string, limit: number, owner: string, ttlMs: number, now: number): SlotAcquisition {
    let slots = this.live(key, now);
    if (slots === undefined) {
      const full = this.roomFor(now);
      if (full !== undefined) return { admitted: false, inUse: 0, retryAfterMs: full };
      slots = new KeySlots();
      this.keys.set(key, slots);
    }
    if (slots.has(owner) || slots.size < limit) {
      const expiresAt = now + ttlMs;
      slots.set(owner, expiresAt);
      if (expiresAt < slots.earliest) slots.earliest = expiresAt;
      return { admitted: true, inUse: slots.size, retryAfterMs: 0 };
    }
    let earliest = Infinity;
    for (const expiresAt of slots.values()) if (expiresAt < earliest) earliest = expiresAt;
    return { admitted: false, inUse: slots.size, retryAfterMs: earliest - now };
  }

  /** See SlotStore.releaseSlot. */
  release(key: string, owner: string, now: number): boolean {
    const slots = this.live(key, now);
    if (slots === undefined || !slots.delete(owner)) return false;
    if (slots.size === 0) this.keys.delete(key);
    return true;
  }

  /** See SlotStore.renewSlot. */
  renew(key: string, owner: string, ttlMs: number, now: number): boolean {
    const slots = this.live(key, now);
    if (slots === undefined || !slots.has(owner)) return false;
    const expiresAt = now + ttlMs;
    slots.set(owner, expiresAt);
    if (expiresAt < slots.earliest) slots.earliest = expiresAt;
    return true;
  }

  /** Drops every expired slot, and the keys left with none. */
  sweep(now: number): void {
    for (const key of this.keys.keys()) this.live(key, now);
  }

  /** Forgets every slot. */
  clear(): void {
    this.keys.clear();
  }

  /** The key's unexpired slots (expired ones dropped), or undefined when it has none (and then it is deleted). */
  private live(key: string, now: number): KeySlots | undefined {
    const slots = this.keys.get(key);
    if (slots === undefined) return undefined;
    if (now < slots.earliest) return slots;
    let earliest = Infinity;
    for (const [owner, expiresAt] of slots) {
      if (expiresAt <= now) slots.delete(owner);
      else if (expiresAt < earliest) earliest = expiresAt;
    }
    if (slots.size > 0) {
      slots.earliest = earliest;
      return slots;
    }
    this.keys.delete(key);
    return undefined;
  }

  /**
   * Makes room for one more key: undefined when there is room (after
   * reclaiming the oldest key if its slots all expired, or rarely a full
   * sweep); else the ms until the oldest key's first slot expires, a refused
   * caller's hint.
   */
  private roomFor(now: number): number | undefined {
    if (this.keys.size < this.maxKeys) return undefined;
    const [oldestKey] = this.keys.keys();
    if (oldestKey !== undefined && this.live(oldestKey, now) === undefined) return undefined;
    const mono = performance.now();
    if (mono - this.lastFullSweep >= FULL_SWEEP_GAP_MS) {
      this.lastFullSweep = mono;
      this.sweep(now);
      if (this.keys.size < this.maxKeys) return undefined;
    }
    let earliest = Infinity;
    for (const expiresAt of this.keys.values().next().value!.values()) if (expiresAt < earliest) earliest = expiresAt;
    return Math.max(1, earliest - now);
  }
}

/**
 * One key's slots, owner → expiry, and a bound no slot expires before (a lower bound: a released slot may have been the
 * earliest). The key is scanned for expired slots only once the bound has passed, not on every call, which made each
 * call O(slots held).
 */
class KeySlots extends Map<string, number> {
  earliest = Infinity;
}
