/** The store prefix of a rule's policy. */
/**
 * One prefix per policy and numbers, and no two policies' prefixes (and so no two policies' keys) alike.
 */
import { calendarLabel } from '../../index.js';
import { keyLabel } from '../config/policy-names.js';
import type { KeySettings, PolicySettings } from '../config/settings.js';

/**
 * The segment an unnamed policy takes. An unnamed policy has always counted
 * under `p`, and it still does: unnamed policies are most policies, and
 * moving them would restart every such counter on upgrade. A policy *named*
 * `p` is written `%70` instead (see {@link prefixSegment}), so no name can
 * take this segment.
 */
const UNNAMED = 'p';

const ESCAPED: Readonly<Record<string, string>> = { '%': '%25', ':': '%3A', '{': '%7B', '}': '%7D' };

/**
 * A name or label as one segment of a store key: `%`, `:`, `{` and `}`
 * percent-encoded, and the name `p` written `%70`. The encoding is injective
 * and leaves a segment without `:`, so a prefix always has the same number of
 * segments and two policies' prefixes differ at a segment, never by where a
 * segment ends; and without braces, so on a Redis Cluster no policy name can
 * become the hash tag that places its keys (the rule's `hashTag` does). Names
 * without those characters, other than `p`, are unchanged, and so are their
 * counters.
 */
export function prefixSegment(text: string): string {
  if (text === UNNAMED) return '%70';
  return text.replace(/[%:{}]/g, (c) => ESCAPED[c]!);
}

/**
 * Where a policy's counters live: `STORE_PREFIX:RULE:NAME:ALGORITHM:LIMIT:WINDOW:BLOCK` (then `:bBURST`,
 * `:iINITIAL` for a token bucket that sets them, and `:kKEY` for a policy not counted by address),
 * NAME being `p` for an unnamed policy and {@link prefixSegment} of the name
 * otherwise. A reload that keeps a policy keeps its counters; one that changes
 * its numbers or who it counts against starts it afresh instead of reading counts made under others (after
 * a reload from `ip` to `cookie:sid`, a cookie set to someone's address must not draw on that address's count).
 * Rule names hold no `:` (the config allows letters, digits, `.`, `_`, `-`).
 * @param key - who the policy counts against (its own key, else its rule's)
 */
export function policyPrefix(storePrefix: string, rule: string, p: PolicySettings, key: KeySettings = { kind: 'ip' }): string {
  const name = p.name === undefined ? UNNAMED : prefixSegment(p.name);
  const window = p.calendar ? prefixSegment(calendarLabel(p.calendar)) : String(p.windowMs);
  // A bucket's burst and initial tokens only when set, so a policy without them keeps the counters it had.
  const bucket = `${p.burst === undefined ? '' : `:b${p.burst}`}${p.initialTokens === undefined ? '' : `:i${p.initialTokens}`}`;
  // The address is the default key: policies counted by it keep the counters they had before keys were in the prefix.
  const source = key.kind === 'ip' ? '' : `:k${prefixSegment(keyLabel(key))}`;
  return `${storePrefix}:${rule}:${name}:${p.algorithm}:${p.limit}:${window}:${p.blockMs}${bucket}${source}`;
}
