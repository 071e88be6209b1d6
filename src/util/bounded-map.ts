/** BoundedMap: a Map that holds at most a given number of keys and drops the oldest first. */
/**
 * It is for every per-key table that a flood of new keys must not grow.
 */
import { OldestEntries } from './oldest-entries.js';

/**
 * A Map bounded to `maxKeys` entries. Insertion order is age: `set` of a new
 * key past the bound drops the oldest entry (and reports it to `onDrop`);
 * `touch` makes a key the youngest, for least-recently-used tables.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  /** The oldest entry without a scan from the table's start (see OldestEntries). */
  private readonly oldest = new OldestEntries<K, V>(this);

  /**
   * @param maxKeys - the most keys held (a positive integer, checked by the caller's options)
   * @param onDrop - called with each entry dropped to make room
   */
  constructor(
    readonly maxKeys: number,
    private readonly onDrop?: (key: K, value: V) => void,
  ) {
    super();
  }

  /** Sets `key`; when that makes the map hold more than `maxKeys`, drops the oldest entries. */
  override set(key: K, value: V): this {
    super.set(key, value);
    while (this.size > this.maxKeys) this.dropOldest();
    return this;
  }

  /** Moves `key` to the young end (keeps its value); false when absent. */
  touch(key: K): boolean {
    const value = super.get(key);
    // One lookup when the value is defined: this runs on every decision of a leased key.
    if (value === undefined && !super.has(key)) return false;
    super.delete(key);
    super.set(key, value as V);
    return true;
  }

  /** Drops the oldest entry, if any, and returns its key. */
  dropOldest(): K | undefined {
    const oldest = this.oldest.shift();
    if (oldest === undefined) return undefined;
    this.onDrop?.(oldest[0], oldest[1]);
    return oldest[0];
  }
}
