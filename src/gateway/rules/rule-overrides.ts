/** One rule's per-key overrides at run time. */
/**
 * The config file's entries, with the live ones (from the Redis hash or the admin API) on top, kept in one
 * PolicyOverrides table per policy of the rule.
 */
import { PolicyOverrides } from '../../index.js';
import { resolveOverride } from '../config/override-config.js';
import type { PlanSettings, ResolvedOverride, RuleSettings } from '../config/settings.js';

/** Where an entry in force came from. */
type OverrideSource = 'config' | 'redis' | 'admin';

/** One entry in force, as the admin API lists it. */
export interface OverrideEntry {
  readonly pattern: string;
  /** The value as written: a plan name, "LIMIT/WINDOW", or numbers per policy. */
  readonly value: unknown;
  readonly source: OverrideSource;
}

interface LiveEntry {
  readonly value: unknown;
  readonly resolved: ResolvedOverride;
  readonly source: 'redis' | 'admin';
}

/**
 * A rule's overrides. Each of the rule's limiters is built with one of
 * {@link tables}, so a change here reaches its next decision. A live entry
 * (from the rule's Redis hash, or set through the admin API on a rule
 * without one) hides the config file's entry of the same pattern; removing
 * it brings the file's back.
 */
export class RuleOverrides {
  /** One table per policy of the rule, in its order. */
  readonly tables: readonly PolicyOverrides[];
  private readonly live = new Map<string, LiveEntry>();

  constructor(
    private readonly rule: RuleSettings,
    private readonly plans: PlanSettings,
  ) {
    this.tables = rule.policies.map(() => new PolicyOverrides());
    for (const pattern of rule.overrides?.entries.keys() ?? []) this.apply(pattern);
  }

  /** The rule's Redis hash, when its overrides are shared through one. */
  get redisHash(): string | undefined {
    return this.rule.overrides?.redis;
  }

  /**
   * Checks `value` for this rule without applying it.
   * @throws InvalidValue when it names no plan, a policy the rule lacks, or bad numbers
   */
  check(value: unknown): ResolvedOverride {
    return resolveOverride(value, this.rule.policies, this.plans);
  }

  /**
   * Sets the live entry of `pattern`.
   * @throws InvalidValue as {@link check}; nothing changes then
   */
  put(pattern: string, value: unknown, source: 'redis' | 'admin'): void {
    const resolved = this.check(value);
    this.live.set(pattern, { value, resolved, source });
    this.apply(pattern);
  }

  /** Removes the live entry of `pattern` (the config file's, if any, applies again); false when there was none. */
  remove(pattern: string): boolean {
    if (!this.live.delete(pattern)) return false;
    this.apply(pattern);
    return true;
  }

  /**
   * Replaces every live entry from `source` with `entries` (a full read of
   * the Redis hash); returns the patterns whose values were refused, with why.
   */
  replace(entries: ReadonlyMap<string, unknown>, source: 'redis' | 'admin'): Array<[string, string]> {
    const refused: Array<[string, string]> = [];
    const before = [...this.live].filter(([, e]) => e.source === source).map(([p]) => p);
    for (const pattern of before) if (!entries.has(pattern)) this.remove(pattern);
    for (const [pattern, value] of entries) {
      try {
        this.put(pattern, value, source);
      } catch (error) {
        refused.push([pattern, (error as Error).message]);
      }
    }
    return refused;
  }

  /** Every entry in force: the live ones, then the config file's that no live entry hides. */
  list(): OverrideEntry[] {
    const out: OverrideEntry[] = [...this.live].map(([pattern, e]) => ({ pattern, value: e.value, source: e.source }));
    for (const [pattern, value] of this.rule.overrides?.raw ?? []) {
      if (!this.live.has(pattern)) out.push({ pattern, value, source: 'config' });
    }
    return out;
  }

  /** Entries in force. */
  get size(): number {
    let n = this.live.size;
    for (const pattern of this.rule.overrides?.entries.keys() ?? []) if (!this.live.has(pattern)) n++;
    return n;
  }

  private apply(pattern: string): void {
    const resolved = this.live.get(pattern)?.resolved ?? this.rule.overrides?.entries.get(pattern);
    this.tables.forEach((table, i) => {
      const override = resolved?.[i];
      if (override === undefined) table.delete(pattern);
      else table.set(pattern, override);
    });
  }
}
