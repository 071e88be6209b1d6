/** The admin API's JSON view of the loaded rules and of one key's state under a rule. */
/**
 * Plain values only (no allow-list contents, no regular-expression objects).
 */
import type { KeyInspection } from '../../index.js';
import type { KeySettings, PolicySettings, RuleSettings } from '../config/settings.js';
import { keyLabel, policyName } from '../config/policy-names.js';

/** A duration in ms as JSON: a number, or `"forever"` for a block until unblocked (JSON has no Infinity). */
export function msOrForever(ms: number): number | 'forever' {
  return ms === Infinity ? 'forever' : ms;
}

/** The name a policy is reported under: its own, or the one its RateLimit headers give it (`100-per-1d`). */
export { policyName } from '../config/policy-names.js';

function keyView(key: KeySettings): Record<string, unknown> {
  if (key.kind === 'ip' || key.kind === 'global') return { kind: key.kind };
  // Cookie, query, path, method, claim and compound keys: as written (`header:x-api-key + path`).
  if (key.kind !== 'header') return { kind: key.kind, source: keyLabel(key) };
  const v = key.validation;
  return {
    kind: 'header',
    header: key.header,
    fallbackToIp: key.fallbackToIp,
    ...(v?.maxLength === undefined ? {} : { maxLength: v.maxLength }),
    ...(v?.pattern === undefined ? {} : { pattern: v.pattern.source }),
    // The keys themselves are secrets of their own: only where they come from is shown.
    ...(v?.allowListFile === undefined ? {} : { allowList: { file: v.allowListFile, keys: v.allowList?.size ?? 0 } }),
    ...(v?.knownKeys === undefined ? {} : { allowList: { redis: v.knownKeys.set } }),
  };
}

/** One rule as `GET /admin/rules` lists it. */
export function ruleView(rule: RuleSettings): Record<string, unknown> {
  const m = rule.match;
  const match: Record<string, unknown> = {};
  if (m.methods !== undefined) match.methods = m.methods;
  if (m.pathPrefix !== undefined) match.path = m.pathPrefix;
  if (m.pathPattern !== undefined) match.pathPattern = m.pathPattern.source;
  if (m.hosts !== undefined) match.hosts = m.hosts;
  if (m.headers !== undefined) match.headers = Object.fromEntries(m.headers);
  return {
    name: rule.name,
    shadow: rule.shadow,
    final: rule.final,
    match,
    key: keyView(rule.key),
    policies: rule.policies.map((p) => ({
      name: policyName(p),
      limit: p.limit,
      windowMs: p.windowMs,
      algorithm: p.algorithm,
      blockMs: p.blockMs,
      ...(p.burst === undefined ? {} : { burst: p.burst }),
      ...(p.initialTokens === undefined ? {} : { initialTokens: p.initialTokens }),
      ...(p.key === undefined ? {} : { key: keyView(p.key) }),
    })),
    cost: rule.cost ?? null,
    count: rule.count ?? null,
    concurrency: rule.concurrency ?? null,
    wait: rule.wait ?? null,
  };
}

/** One policy's state for a key, as `GET /admin/rules/:rule/keys/:key` reports it. */
export function policyState(p: PolicySettings, seen: KeyInspection): Record<string, unknown> {
  const d = seen.store;
  return {
    policy: policyName(p),
    limit: d.limit,
    windowMs: d.windowMs,
    remaining: d.remaining,
    allowed: d.allowed,
    resetMs: msOrForever(d.resetMs),
    // A blocked key and a spent one both read as refused; retryAfterMs says for how long either way.
    refusedForMs: d.allowed ? 0 : msOrForever(d.retryAfterMs),
    memoryBlockMs: seen.memoryBlockMs,
  };
}
