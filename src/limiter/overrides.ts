/** Per-key policy overrides. */
/**
 * A live table of exact keys and `*` patterns, each changing a limiter's limit, window or block for the keys it
 * matches.
 */
import { parseDuration, type Duration } from '../core/duration.js';
import { describeValue } from '../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import { assertKnownOptions } from '../core/validate.js';

/** What an override changes of a limiter's policy; what it leaves out stays as the limiter has it. The algorithm never changes. */
export interface PolicyOverride {
  /** Units admitted per window (for token-bucket: the bucket size). */
  readonly limit?: number;
  /** The window (for token-bucket: time to refill the whole bucket). */
  readonly window?: Duration;
  /** How long going over the limit blocks the key; `0` for no block. */
  readonly blockDuration?: Duration;
}

/** A function giving a key's override, or undefined for the limiter's own policy; called for every decision, so keep it fast. */
export type OverrideLookup = (key: string) => PolicyOverride | undefined;

/** What matched a key: the pattern (the key itself for an exact entry) and its override. */
export interface OverrideMatch {
  readonly pattern: string;
  readonly override: PolicyOverride;
}

const OVERRIDE_FIELDS = ['limit', 'window', 'blockDuration'] as const;
/** limit × window bound, as for the limiter's own policy: counts stay exact. */
const MAX_PRODUCT = 2 ** 50;

interface Glob {
  readonly pattern: string;
  readonly literal: number;
  readonly regexp: RegExp;
}

/**
 * Per-key overrides of a limiter's policy, changed live: pass one table as
 * the `overrides` option of one or more limiters, then `set` and `delete`
 * entries while they run. A pattern without `*` matches that key exactly;
 * `*` matches any run of characters (`trial-*`, `*@example.com`).
 *
 * The most specific entry wins: an exact key, then the pattern with the most
 * characters other than `*`, then the smaller pattern in code-unit order, so
 * every host that holds the same entries decides alike whatever order they
 * were added in. A change applies from the next decision and never resets a
 * key's counter: what the key used stays counted under the new numbers.
 */
export class PolicyOverrides {
  private readonly exact = new Map<string, PolicyOverride>();
  private readonly prefixes = new Map<string, PolicyOverride>();
  /** Distinct lengths of the `prefix*` patterns, longest first. */
  private prefixLengths: number[] = [];
  /** The other patterns, most specific first. */
  private globs: Glob[] = [];
  private readonly globOverrides = new Map<string, PolicyOverride>();
  private readonly listeners = new Set<(pattern: string) => void>();
  private changes = 0;

  /** @param entries - the initial entries, pattern → override; each is checked as {@link set} does. */
  constructor(entries?: Readonly<Record<string, PolicyOverride>> | Iterable<readonly [string, PolicyOverride]>) {
    if (entries === undefined) return;
    const list =
      Symbol.iterator in Object(entries) ? [...(entries as Iterable<readonly [string, PolicyOverride]>)] : Object.entries(entries);
    for (const [pattern, override] of list) this.put(pattern, override);
    this.reindex();
  }

  /** Entries held. */
  get size(): number {
    return this.exact.size + this.prefixes.size + this.globOverrides.size;
  }

  /** Counts every change; a cache of resolved policies is stale when it differs. */
  get version(): number {
    return this.changes;
  }

  /**
   * Adds or replaces the entry of `pattern`.
   * @throws FloodgateError INVALID_OPTIONS for an empty pattern, an unknown field or a field of the wrong type; INVALID_LIMIT, INVALID_WINDOW as the limiter's options do
   */
  set(pattern: string, override: PolicyOverride): void {
    this.put(pattern, override);
    this.reindex();
    this.changed(pattern);
  }

  /** Removes the entry of `pattern`; false when there was none. */
  delete(pattern: string): boolean {
    const kind = patternKind(pattern);
    const had =
      kind === 'exact'
        ? this.exact.delete(pattern)
        : kind === 'prefix'
          ? this.prefixes.delete(pattern.slice(0, -1))
          : this.globOverrides.delete(pattern);
    if (!had) return false;
    this.reindex();
    this.changed(pattern);
    return true;
  }

  /** Removes every entry. */
  clear(): void {
    const patterns = this.entries().map(([p]) => p);
    this.exact.clear();
    this.prefixes.clear();
    this.globOverrides.clear();
    this.reindex();
    for (const p of patterns) this.changed(p);
  }

  /** The entry of exactly `pattern` (not what it matches), or undefined. */
  get(pattern: string): PolicyOverride | undefined {
    const kind = patternKind(pattern);
    if (kind === 'exact') return this.exact.get(pattern);
    return kind === 'prefix' ? this.prefixes.get(pattern.slice(0, -1)) : this.globOverrides.get(pattern);
  }

  /** Every entry, pattern → override. */
  entries(): Array<[string, PolicyOverride]> {
    return [...this.exact, ...[...this.prefixes].map(([p, o]): [string, PolicyOverride] => [`${p}*`, o]), ...this.globOverrides];
  }

  /** The entry that decides `key`, or undefined when none matches. */
  match(key: string): OverrideMatch | undefined {
    const exact = this.exact.get(key);
    if (exact !== undefined) return { pattern: key, override: exact };
    let best: OverrideMatch | undefined;
    let bestLiteral = -1;
    for (const length of this.prefixLengths) {
      if (length > key.length) continue;
      const prefix = key.slice(0, length);
      const override = this.prefixes.get(prefix);
      if (override !== undefined) {
        best = { pattern: `${prefix}*`, override };
        bestLiteral = length;
        break;
      }
    }
    for (const glob of this.globs) {
      if (glob.literal < bestLiteral || (glob.literal === bestLiteral && best !== undefined && best.pattern < glob.pattern)) break;
      if (glob.regexp.test(key)) return { pattern: glob.pattern, override: this.globOverrides.get(glob.pattern)! };
    }
    return best;
  }

  /** Calls `listener` with the pattern after every change; returns the function that stops it. */
  onChange(listener: (pattern: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private put(pattern: string, override: PolicyOverride): void {
    if (typeof pattern !== 'string' || pattern.length === 0) {
      throw new FloodgateError(
        ErrorCode.INVALID_OPTIONS,
        `an override's pattern must be a non-empty string; got ${describeValue(pattern)}.`,
      );
    }
    checkOverride(override, `override ${JSON.stringify(pattern)}`);
    const kind = patternKind(pattern);
    // One pattern lives in one table only: replacing it must not leave the old kind behind.
    if (kind === 'exact') this.exact.set(pattern, override);
    else if (kind === 'prefix') this.prefixes.set(pattern.slice(0, -1), override);
    else this.globOverrides.set(pattern, override);
  }

  private reindex(): void {
    this.prefixLengths = [...new Set([...this.prefixes.keys()].map((p) => p.length))].sort((a, b) => b - a);
    this.globs = [...this.globOverrides.keys()]
      .map((pattern) => ({ pattern, literal: pattern.replaceAll('*', '').length, regexp: globRegExp(pattern) }))
      .sort((a, b) => b.literal - a.literal || (a.pattern < b.pattern ? -1 : 1));
  }

  private changed(pattern: string): void {
    this.changes++;
    for (const listener of this.listeners) listener(pattern);
  }
}

function patternKind(pattern: string): 'exact' | 'prefix' | 'glob' {
  const star = pattern.indexOf('*');
  if (star === -1) return 'exact';
  return star === pattern.length - 1 ? 'prefix' : 'glob';
}

function globRegExp(pattern: string): RegExp {
  const body = pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[\\s\\S]*');
  return new RegExp(`^${body}$`);
}

/**
 * Checks an override's fields.
 * @throws FloodgateError as {@link PolicyOverrides.set} documents
 */
export function checkOverride(override: PolicyOverride, name = 'override'): void {
  if (typeof override !== 'object' || override === null || Array.isArray(override)) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${name} must be an object such as { limit: 5000, window: "1m" }; got ${describeValue(override)}.`,
    );
  }
  if ('algorithm' in override) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `${name} cannot change the algorithm: a key's stored state belongs to its limiter's algorithm. Use another limiter (and prefix) for keys that need another algorithm.`,
    );
  }
  assertKnownOptions(override, OVERRIDE_FIELDS, name);
  const { limit, window, blockDuration } = override;
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit <= 0)) {
    throw new FloodgateError(ErrorCode.INVALID_LIMIT, `${name}: limit must be a positive whole number; got ${describeValue(limit)}.`);
  }
  if (window !== undefined) parseDuration(window, `${name}: window`, ErrorCode.INVALID_WINDOW);
  if (blockDuration !== undefined) parseDuration(blockDuration, `${name}: blockDuration`);
}

/**
 * The policy of `base` changed by `override`, marked as of `base`'s family.
 * @throws FloodgateError LIMIT_TOO_LARGE when limit × window passes 2^50
 */
export function overridePolicy(base: Policy, override: PolicyOverride): Policy {
  if (base.calendar !== undefined && override.window !== undefined) {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `an override of a calendar limiter changes its limit or block, not its window: the key's windows follow the limiter's calendar period.`,
    );
  }
  const limit = override.limit ?? base.limit;
  const windowMs = override.window === undefined ? base.windowMs : parseDuration(override.window, 'window', ErrorCode.INVALID_WINDOW);
  const blockMs = override.blockDuration === undefined ? base.blockMs : parseDuration(override.blockDuration, 'blockDuration');
  if (limit * windowMs > MAX_PRODUCT) {
    throw new FloodgateError(
      ErrorCode.LIMIT_TOO_LARGE,
      `an override's limit × window (in ms) must not exceed 2^50; got ${limit} × ${windowMs}.`,
    );
  }
  const root = base.base ?? base;
  if (root.calendar !== undefined) {
    return Object.freeze({ algorithm: base.algorithm, limit, windowMs, blockMs, calendar: root.calendar, base: root });
  }
  // A token bucket's burst and initial tokens are the limiter's: an override changes its rate (limit, window).
  const bucket = bucketOf(root, limit, windowMs);
  return Object.freeze({ algorithm: base.algorithm, limit, windowMs, blockMs, ...bucket, base: root });
}

/** The limiter's burst and initial tokens kept under an override's `limit` and `windowMs`, as parseBucket writes them. */
function bucketOf(root: Policy, limit: number, windowMs: number): { burst?: number; initialTokens?: number } {
  if (root.burst === undefined && root.initialTokens === undefined) return {};
  // Without a burst of its own the bucket is the limit's size, the override's limit then.
  const size = root.burst ?? limit;
  if (size * windowMs > MAX_PRODUCT) {
    throw new FloodgateError(
      ErrorCode.LIMIT_TOO_LARGE,
      `an override's burst × window (in ms) must not exceed 2^50; got ${size} × ${windowMs}.`,
    );
  }
  const initial = Math.min(root.initialTokens ?? size, size);
  return {
    ...(size === limit ? {} : { burst: size }),
    ...(initial === size ? {} : { initialTokens: initial }),
  };
}

/**
 * A limiter's policy per key under its overrides. The policy of each entry is
 * built once and reused while the table is unchanged, so the stores see the
 * same object for every call of an overridden key.
 */
export class OverrideResolver {
  private readonly cache = new Map<string, Policy>();
  private readonly built = new WeakMap<PolicyOverride, Policy>();
  private seen = -1;
  private blocksSeen: number;

  constructor(
    private readonly base: Policy,
    private readonly source: PolicyOverrides | OverrideLookup,
  ) {
    this.blocksSeen = typeof source === 'function' ? 0 : source.version;
  }

  /**
   * True once after each change of a table source: what the limiter's
   * in-memory block learned under the old numbers must go. A function
   * source cannot tell; its changes reach blocks when they expire.
   */
  takeChange(): boolean {
    const source = this.source;
    if (typeof source === 'function' || source.version === this.blocksSeen) return false;
    this.blocksSeen = source.version;
    return true;
  }

  /**
   * The policy that decides `key`.
   * @throws FloodgateError for an override a lookup function returned that is not valid
   */
  policyFor(key: string): Policy {
    const source = this.source;
    if (typeof source === 'function') {
      const override = source(key);
      if (override === undefined) return this.base;
      let policy = this.built.get(override);
      if (policy === undefined) {
        checkOverride(override, `the override returned for key ${JSON.stringify(key)}`);
        policy = overridePolicy(this.base, override);
        if (typeof override === 'object') this.built.set(override, policy);
      }
      return policy;
    }
    if (source.size === 0) return this.base;
    const found = source.match(key);
    if (found === undefined) return this.base;
    if (this.seen !== source.version) {
      this.cache.clear();
      this.seen = source.version;
    }
    let policy = this.cache.get(found.pattern);
    if (policy === undefined) {
      policy = overridePolicy(this.base, found.override);
      this.cache.set(found.pattern, policy);
    }
    return policy;
  }
}

/**
 * The resolver of a limiter's `overrides` option, checked.
 * @throws FloodgateError INVALID_OPTIONS for a source that is neither a table nor a function, or with `execEvenly`
 */
export function overrideResolver(source: unknown, execEvenly: boolean, policy: Policy): OverrideResolver {
  if (!(source instanceof PolicyOverrides) && typeof source !== 'function') {
    throw new FloodgateError(
      ErrorCode.INVALID_OPTIONS,
      `overrides must be a PolicyOverrides table or a function of the key; got ${describeValue(source)}.`,
    );
  }
  if (execEvenly) {
    // The pacer spaces a key's actions by its policy's window/limit, fixed when it is built.
    throw new FloodgateError(ErrorCode.INVALID_OPTIONS, 'overrides cannot be combined with execEvenly.');
  }
  return new OverrideResolver(policy, source as PolicyOverrides | OverrideLookup);
}
