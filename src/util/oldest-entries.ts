/** OldestEntries: a Map's oldest entry in amortised O(1). */
/**
 * For tables that drop or reclaim their oldest key on every insert past a bound.
 */

/**
 * `map.keys().next()` scans from the start of V8's hash table, past every
 * entry deleted since the table was last rebuilt; a bounded table that drops
 * its oldest key at each insert keeps thousands of such holes at its start,
 * so each lookup cost microseconds (a third of a Redis composite's CPU in
 * the process, through the policy-binding table). This keeps one live
 * iterator instead: a Map iterator visits entries in insertion order, skips
 * deleted ones and sees entries added after it was made, so each hole is
 * passed once.
 *
 * Sound as long as every entry the cursor has passed is gone from the map or
 * was written again (a write of a new key, or a delete then set, puts it at
 * the young end, where the cursor meets it again). {@link peek} holds the
 * entry it returned; it is still the oldest while the map holds that very
 * value under its key, so a table that moves a key must store a new value
 * object for it (MemoryStore does).
 */
export class OldestEntries<K, V> {
  private cursor: Iterator<[K, V]> | undefined;
  private held: [K, V] | undefined;

  /** @param map - the table, in insertion (age) order */
  constructor(private readonly map: Map<K, V>) {}

  /** The oldest entry, or undefined when the map is empty. */
  peek(): readonly [K, V] | undefined {
    const held = this.held;
    if (held !== undefined && this.map.get(held[0]) === held[1]) return held;
    this.held = this.advance();
    return this.held;
  }

  /** Removes the oldest entry and returns it; undefined when the map is empty. */
  shift(): readonly [K, V] | undefined {
    const oldest = this.peek();
    if (oldest !== undefined) {
      this.map.delete(oldest[0]);
      this.held = undefined;
    }
    return oldest;
  }

  private advance(): [K, V] | undefined {
    let next = this.cursor?.next();
    if (next === undefined || next.done === true) {
      // A finished iterator stays finished; a new one starts at the (now compacted or empty) start.
      this.cursor = this.map.entries();
      next = this.cursor.next();
    }
    if (next.done === true) return undefined;
    // A value replaced in place (set of a present key) keeps its position: read the current one.
    const key = next.value[0];
    return [key, this.map.get(key) as V];
  }
}
