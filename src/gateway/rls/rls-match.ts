/** Finding a request descriptor's limit in the descriptor tree, as envoyproxy/ratelimit walks it. */
/**
 * Per entry, exact `key_value` first, then a wildcard, then the key's default entry.
 */
import type { RlsConfig, RlsLimit, RlsNode } from './rls-config.js';

/** One entry of a request descriptor. */
export interface DescriptorEntry {
  /** The entry's key. */
  readonly key: string;
  /** The entry's value (may be empty). */
  readonly value: string;
}

/** What a descriptor matched. */
export interface RlsMatch {
  /** The limit. */
  readonly limit: RlsLimit;
  /**
   * The values the counter is kept under: the entries' `key_value`s joined by `.`, with a `share_threshold` wildcard's
   * pattern in place of the value it matched. Unescaped, as envoyproxy/ratelimit names its keys: a limit's path fixes
   * its keys and their number, so two descriptors share a counter only when one's own value holds `.KEY_` of the next.
   */
  readonly counter: string;
}

/** The full descriptor as it came (`key_value.key2_value2`): `detailed_metric`'s label (counters use {@link counterName}). */
export function descriptorName(entries: readonly DescriptorEntry[]): string {
  let name = '';
  for (let i = 0; i < entries.length; i++) name += `${i === 0 ? '' : '.'}${entries[i]!.key}_${entries[i]!.value}`;
  return name;
}

/** `.`, `_` and `%` percent-encoded: the separators of a counter's name, so no two descriptors' names read alike. */
function counterPart(text: string): string {
  return /[._%]/.test(text) ? text.replace(/[._%]/g, (c) => (c === '.' ? '%2E' : c === '_' ? '%5F' : '%25')) : text;
}

/**
 * The counter's name of a limit Envoy sent (`key_value.key2_value2`, each key and value with `.`, `_` and `%`
 * escaped). Every such limit with the same numbers in a domain counts in one limiter, whatever its descriptor's shape:
 * unescaped, a client's `[{user: "victim.tier_gold"}]` would spend `[{user: "victim"}, {tier: "gold"}]`'s counter.
 */
export function counterName(entries: readonly DescriptorEntry[]): string {
  let name = '';
  for (let i = 0; i < entries.length; i++) name += `${i === 0 ? '' : '.'}${counterPart(entries[i]!.key)}_${counterPart(entries[i]!.value)}`;
  return name;
}

/** Whether `value` matches a wildcard split on `*` (each `*` matches any run of characters, empty included). */
export function wildcardMatch(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  let fixed = 0;
  for (const p of parts) fixed += p.length;
  if (value.length < fixed || !value.startsWith(first) || !value.endsWith(last)) return false;
  let rest = value.slice(first.length, value.length - last.length);
  for (let i = 1; i < parts.length - 1; i++) {
    const at = rest.indexOf(parts[i]!);
    if (at < 0) return false;
    rest = rest.slice(at + parts[i]!.length);
  }
  return true;
}

/**
 * The limit `entries` reach in `domain`, or undefined. A limit applies only
 * to a descriptor with exactly as many entries as the path to it: one with
 * more entries walks past it, and one that stops above it never reaches it.
 */
export function matchDescriptor(config: RlsConfig, domain: string, entries: readonly DescriptorEntry[]): RlsMatch | undefined {
  let node: RlsNode | undefined = config.domains.get(domain);
  if (node === undefined || entries.length === 0) return undefined;
  let found: RlsLimit | undefined;
  const counter: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    const exact = `${entry.key}_${entry.value}`;
    let next: RlsNode | undefined = node.children.get(exact);
    let shared: string | undefined;
    if (next === undefined) {
      for (const w of node.wildcards) {
        if (wildcardMatch(w.parts, exact)) {
          next = node.children.get(w.name);
          // A shared wildcard counts every value it matches in one counter, named by its pattern.
          if (next?.shareThreshold === true) shared = w.name;
          break;
        }
      }
    }
    if (next === undefined) next = node.children.get(entry.key);
    counter.push(shared ?? exact);
    if (next === undefined) break;
    if (next.limit !== undefined && i === entries.length - 1) found = next.limit;
    if (next.children.size === 0) break;
    node = next;
  }
  if (found === undefined) return undefined;
  return { limit: found, counter: counter.join('.') };
}
