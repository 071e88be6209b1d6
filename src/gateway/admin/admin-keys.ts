/** The admin API's key actions. */
/**
 * Inspect, reset, block and unblock one key, under the one policy a path names or, for a rule-level path, under the
 * policies a key means the same client in (409 when it does not).
 */
import { parseDuration, isFloodgateError, type RateLimiter } from '../../index.js';
import { boundKey } from '../../http/index.js';
import { keyLabel, policyName } from '../config/policy-names.js';
import type { PolicySettings, RuleSettings } from '../config/settings.js';
import type { RuleOverrides } from '../rules/rule-overrides.js';
import { MAX_KEY_BYTES } from '../rules/compile-rules.js';
import { msOrForever, policyState } from './admin-rules.js';
import { allow, ApiError, badField, type AdminRequest } from './admin-http.js';

/** The stable code of the 409 a rule-level key action gets when its policies count under different keys. */
const POLICY_AMBIGUOUS = 'FLOODGATE_ADMIN_POLICY_AMBIGUOUS';

/** One loaded rule: its settings and the limiters of its policies, in the same order. */
export interface KeyRule {
  /** The rule's settings. */
  readonly settings: RuleSettings;
  /** One RateLimiter per policy, in `settings.policies` order. */
  readonly limiters: readonly RateLimiter[];
  /** The rule's per-key overrides, when it has `overrides`. */
  readonly overrides?: RuleOverrides | undefined;
}

/** The policies an action acts on: their indexes in the rule. */
type Targets = readonly number[];

/** What a policy counts under: its own key, else the rule's. */
function keyedBy(rule: RuleSettings, p: PolicySettings): string {
  return keyLabel(p.key ?? rule.key);
}

/**
 * The policies a rule-level KEY names. A KEY is one client under one key
 * source: an API key under a header, an address under `ip`, and, under
 * `global`, the one key every client shares. So:
 * - when every policy counts under one source, the KEY names one client in
 *   each, and the action is on all of them (a rule of 10/s and 1000/day per
 *   API key blocks the key in both);
 * - else, the policies counted under `global` are left out: their key is
 *   everyone's, never the client an operator means by a KEY, and blocking it
 *   would refuse every client (an API key literally `global`);
 * - if one source is left, the action is on its policies; if two or more are
 *   (an API-key policy and an address policy), the KEY could be either
 *   client (an API key equal to someone's address), and the answer is 409
 *   {@link POLICY_AMBIGUOUS}, naming the policies to choose from with
 *   `/admin/rules/RULE/policies/POLICY/keys/KEY`.
 */
export function ruleLevelTargets(rule: RuleSettings): Targets {
  const sources = new Map<string, number[]>();
  rule.policies.forEach((p, i) => {
    const source = keyedBy(rule, p);
    sources.set(source, [...(sources.get(source) ?? []), i]);
  });
  if (sources.size === 1) return rule.policies.map((_, i) => i);
  const clients = [...sources].filter(([source]) => source !== 'global');
  if (clients.length === 1) return clients[0]![1];
  throw new ApiError(409, {
    error: `the policies of rule ${JSON.stringify(rule.name)} count under different keys (${clients.map(([s]) => s).join(', ')}), so one KEY may name a different client in each; name the policy: /admin/rules/${encodeURIComponent(rule.name)}/policies/POLICY/keys/KEY.`,
    code: POLICY_AMBIGUOUS,
    field: 'policy',
    policies: rule.policies.map((p) => ({ policy: policyName(p), key: keyedBy(rule, p) })),
  });
}

/** The index of the policy named `name` in `rule` (its own name, or the one its headers give an unnamed one); 404 otherwise. */
export function namedTarget(rule: RuleSettings, name: string): Targets {
  const i = rule.policies.findIndex((p) => policyName(p) === name);
  if (i < 0)
    throw new ApiError(404, {
      error: `rule ${JSON.stringify(rule.name)} has no policy named ${JSON.stringify(name)}; its policies: ${rule.policies.map((p) => JSON.stringify(policyName(p))).join(', ')}.`,
      field: 'policy',
    });
  return [i];
}

/**
 * GET (inspect), or POST `reset` | `block` | `unblock`, of `given` under the
 * policies `targets` picks (called only for a POST, so a GET never gets 409).
 * A GET of a rule-level path shows every policy, each with the key it counts.
 */
export async function keyAction(
  req: AdminRequest,
  rule: KeyRule,
  given: string,
  action: string | undefined,
  targets: () => Targets,
  changed: ((rule: string, key: string) => void) | undefined,
): Promise<[number, unknown]> {
  if (given === '') throw badField('key', 'the key is empty.');
  // As the rules count it: a long key is counted by its hash, so acting on it as given would touch nothing.
  const key = boundKey(given, MAX_KEY_BYTES);
  if (action === undefined) {
    allow(req, 'GET');
    return [200, await inspect(rule, key, targets)];
  }
  allow(req, 'POST');
  const on = targets();
  const limiters = on.map((i) => rule.limiters[i]!);
  switch (action) {
    case 'reset':
      await Promise.all(limiters.map((l) => l.reset(key)));
      changed?.(rule.settings.name, key);
      return [200, await inspect(rule, key, () => on)];
    case 'unblock':
      await Promise.all(limiters.map((l) => l.unblock(key)));
      changed?.(rule.settings.name, key);
      return [200, await inspect(rule, key, () => on)];
    case 'block': {
      const duration = blockDuration(await req.json());
      await Promise.all(limiters.map((l) => l.block(key, duration === 'forever' ? 'forever' : `${duration}ms`)));
      return [200, { ...(await inspect(rule, key, () => on)), blockedForMs: msOrForever(duration === 'forever' ? Infinity : duration) }];
    }
    default:
      throw new ApiError(404, { error: `no action ${JSON.stringify(action)} on a key; use reset, block or unblock.` });
  }
}

/** The state of `key` under the policies `targets` picks, or every policy when it answers 409 (a GET names no client by itself). */
async function inspect(rule: KeyRule, key: string, targets: () => Targets): Promise<Record<string, unknown>> {
  let on: Targets;
  try {
    on = targets();
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 409) throw error;
    on = rule.settings.policies.map((_, i) => i);
  }
  const states = await Promise.all(on.map((i) => rule.limiters[i]!.inspect(key)));
  const override = rule.overrides?.tables.map((t) => t.match(key)?.pattern).find((p) => p !== undefined);
  return {
    rule: rule.settings.name,
    key,
    ...(override === undefined ? {} : { override }),
    policies: states.map((seen, n) => {
      const p = rule.settings.policies[on[n]!]!;
      return { ...policyState(p, seen), keyedBy: keyedBy(rule.settings, p) };
    }),
  };
}

/** `{"duration": "10m" | 60000 | "forever"}` → ms or "forever". */
function blockDuration(body: unknown): number | 'forever' {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badField('body', 'the body must be a JSON object such as {"duration":"10m"} or {"duration":"forever"}.');
  const known = new Set(['duration']);
  const extra = Object.keys(body).find((k) => !known.has(k));
  if (extra !== undefined) throw badField(extra, `unknown field ${JSON.stringify(extra)}; the body takes only duration.`);
  const d = (body as { duration?: unknown }).duration;
  if (d === undefined) throw badField('duration', 'duration is missing: {"duration":"10m"} or {"duration":"forever"}.');
  if (d === 'forever') return 'forever';
  try {
    const ms = parseDuration(d as string, 'duration');
    if (ms <= 0) throw badField('duration', 'duration must be more than 0; to end a block, POST .../unblock.');
    return ms;
  } catch (error) {
    if (error instanceof ApiError) throw error;
    if (isFloodgateError(error)) throw badField('duration', `${error.message} (or "forever")`);
    throw error;
  }
}
