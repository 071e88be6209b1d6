/** The most-limited keys of the last minutes, per rule and the policy that refused them. */
/**
 * Refusals counted in one bounded table per rule and minute, so a flood of distinct keys cannot grow memory.
 */

/** Minutes of history kept; `/admin/limited?minutes=` asks for at most this many. */
export const LIMITED_MINUTES = 15;
/**
 * Keys one rule's table holds for one minute. When it is full, it is cut
 * down to the half with the most refusals: a key refused often stays, a key
 * refused once among a flood of fresh ones is forgotten. Memory is bounded
 * by rules × {@link LIMITED_MINUTES} × this many entries.
 */
export const LIMITED_TABLE_SIZE = 1_000;

/** One row of {@link LimitedKeys.top}. */
export interface LimitedKey {
  /**
   * The policy that refused: a KEY means another client under each key
   * source (an API key, an address, the one `global` key), so the row names
   * the policy whose count it is, and an action on it names that policy too.
   */
  readonly policy: string;
  /** The key as that policy counts it. */
  readonly key: string;
  /** Refusals counted in the asked minutes (a lower bound once a table was cut). */
  readonly refusals: number;
}

interface Minute {
  /** Whole minutes since the epoch. */
  at: number;
  /** By {@link entryId}. */
  counts: Map<string, number>;
}

/** Policy and key as one table entry: policy names are printable ASCII (the config checks), so the first NUL ends the policy. */
const entryId = (policy: string, key: string): string => `${policy}\u0000${key}`;

/** Refusals per rule and key over the last {@link LIMITED_MINUTES} minutes, in bounded memory. */
export class LimitedKeys {
  private readonly rules = new Map<string, Minute[]>();

  /** @param now - the clock, in ms (injected by tests) */
  constructor(private readonly now: () => number = Date.now) {}

  /** Counts one refusal of `key` by `policy` of `rule`. */
  note(rule: string, policy: string, key: string): void {
    const id = entryId(policy, key);
    const at = Math.floor(this.now() / 60_000);
    let minutes = this.rules.get(rule);
    if (minutes === undefined) this.rules.set(rule, (minutes = []));
    let minute = minutes[minutes.length - 1];
    if (minute === undefined || minute.at !== at) {
      minute = { at, counts: new Map() };
      minutes.push(minute);
      while (minutes.length > 0 && minutes[0]!.at <= at - LIMITED_MINUTES) minutes.shift();
    }
    const counts = minute.counts;
    counts.set(id, (counts.get(id) ?? 0) + 1);
    if (counts.size >= LIMITED_TABLE_SIZE) minute.counts = keepTop(counts, LIMITED_TABLE_SIZE / 2);
  }

  /** The `top` most-refused keys (each with the policy that refused it) of `rule` over the last `minutes` minutes (the current one included), most refused first. */
  top(rule: string, minutes: number, top: number): LimitedKey[] {
    const since = Math.floor(this.now() / 60_000) - minutes + 1;
    const sums = new Map<string, number>();
    for (const minute of this.rules.get(rule) ?? []) {
      if (minute.at < since) continue;
      for (const [key, n] of minute.counts) sums.set(key, (sums.get(key) ?? 0) + n);
    }
    return [...keepTop(sums, top)].map(([id, refusals]) => {
      const cut = id.indexOf('\u0000');
      return { policy: id.slice(0, cut), key: id.slice(cut + 1), refusals };
    });
  }

  /** Entries held, over every rule and minute (for tests and the bound above). */
  get size(): number {
    let n = 0;
    for (const minutes of this.rules.values()) for (const m of minutes) n += m.counts.size;
    return n;
  }

  /** Forgets rules no longer configured. */
  retain(names: readonly string[]): void {
    const keep = new Set(names);
    for (const name of this.rules.keys()) if (!keep.has(name)) this.rules.delete(name);
  }
}

/** The `n` entries with the highest counts, highest first (ties by key, so answers are stable). */
function keepTop(counts: ReadonlyMap<string, number>, n: number): Map<string, number> {
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return new Map(sorted.slice(0, n));
}
