/** Rules that can never match. */
/**
 * An earlier `final` rule matches every request they match, so the list ends before them.
 */
import type { MatchSettings, RuleSettings } from '../config/settings.js';

/** A rule that can never match, and the earlier final rule that takes its requests. */
export interface UnreachableRule {
  /** The rule that never applies. */
  readonly rule: RuleSettings;
  /** The earlier enforced `final` rule that matches every request `rule` matches. */
  readonly by: RuleSettings;
}

/**
 * The rules after an enforced `final` rule whose match covers theirs. A
 * matching final rule ends the list (shadow rules after it included), so
 * such a rule is never tried. Only a cover that holds for every request is
 * reported: a condition that cannot be compared (two different path
 * patterns, a prefix against a pattern) counts as not covered, so a
 * report is never wrong, though an exotic unreachable rule may go unnoticed.
 *
 * @param caseSensitive - `paths.caseSensitive`: whether path prefixes compare case-sensitively
 */
export function unreachableRules(rules: readonly RuleSettings[], caseSensitive: boolean): UnreachableRule[] {
  const out: UnreachableRule[] = [];
  rules.forEach((rule, i) => {
    const by = rules.slice(0, i).find((earlier) => earlier.final && !earlier.shadow && covers(earlier.match, rule.match, caseSensitive));
    if (by !== undefined) out.push({ rule, by });
  });
  return out;
}

/** The message for one unreachable rule, naming both rules and where they are. */
export function unreachableMessage(file: string | undefined, { rule, by }: UnreachableRule): string {
  const at = (r: RuleSettings): string => (file === undefined ? '' : ` (${file}${r.line === undefined ? '' : `:${r.line}`})`);
  return (
    `rule ${JSON.stringify(rule.name)}${at(rule)} can never match: rule ${JSON.stringify(by.name)}${at(by)} is final and matches ` +
    `every request ${JSON.stringify(rule.name)} matches, so the rules after it are not tried. Move ${JSON.stringify(rule.name)} ` +
    `above ${JSON.stringify(by.name)}, narrow the match of ${JSON.stringify(by.name)}, or remove its final.`
  );
}

/** True when every request `b` matches is matched by `a` (compiled as in compile-rules.ts). */
export function covers(a: MatchSettings, b: MatchSettings, caseSensitive: boolean): boolean {
  return (
    coversMethods(a.methods, b.methods) &&
    coversPrefix(a.pathPrefix, b.pathPrefix, caseSensitive) &&
    coversPattern(a.pathPattern, b.pathPattern) &&
    coversHosts(a.hosts, b.hosts) &&
    coversHeaders(a.headers, b.headers)
  );
}

/** A rule for GET also matches HEAD, as compiled. */
function methodSet(methods: readonly string[]): Set<string> {
  const set = new Set(methods);
  if (set.has('GET')) set.add('HEAD');
  return set;
}

function coversMethods(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined) return true;
  if (b === undefined) return false;
  const allowed = methodSet(a);
  return [...methodSet(b)].every((m) => allowed.has(m));
}

function coversPrefix(a: string | undefined, b: string | undefined, caseSensitive: boolean): boolean {
  if (a === undefined) return true;
  if (b === undefined) return false;
  if (b.startsWith(a)) return true;
  // Lower-casing agrees with the case-insensitive regex the prefix compiles to for ASCII; beyond it, only the exact test counts.
  const ascii = /^[\x20-\x7e]*$/;
  return !caseSensitive && ascii.test(a) && ascii.test(b) && b.toLowerCase().startsWith(a.toLowerCase());
}

function coversPattern(a: RegExp | undefined, b: RegExp | undefined): boolean {
  if (a === undefined) return true;
  // The same expression matches the same paths; two different ones cannot be compared. A global or sticky
  // expression remembers where it stopped, so two copies of it may answer differently.
  return b !== undefined && a.source === b.source && a.flags === b.flags && !/[gy]/.test(a.flags);
}

function coversHosts(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined) return true;
  if (b === undefined) return false;
  const exact = new Set(a.filter((h) => !h.startsWith('*.')));
  const suffixes = a.filter((h) => h.startsWith('*.')).map((h) => h.slice(1));
  // "*.x.com" matches names ending in ".x.com"; each of b's names, or its whole suffix, must fall in one of a's.
  return b.every((h) =>
    h.startsWith('*.') ? suffixes.some((s) => h.slice(1).endsWith(s)) : exact.has(h) || suffixes.some((s) => h.endsWith(s)),
  );
}

function coversHeaders(
  a: ReadonlyArray<readonly [string, string | true]> | undefined,
  b: ReadonlyArray<readonly [string, string | true]> | undefined,
): boolean {
  if (a === undefined) return true;
  if (b === undefined) return false;
  return a.every(([name, value]) => b.some(([n, v]) => n === name && (value === true || v === value)));
}
